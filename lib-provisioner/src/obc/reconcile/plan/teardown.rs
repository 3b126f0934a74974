//! How a claim's bucket is torn down: the deletion steps of a claim, and the
//! one teardown decision that both the claim's deletion and the orphan
//! cleanup of the ObjectBucket reconciler follow.

use super::meta::{
    annotation, claim_ref_matches, fixed_bucket_name, has_finalizer, has_label, owned_by,
    recorded_on_object_bucket,
};
use super::names::brownfield_bucket;
use super::{ClassState, Observed, Step};
use crate::obc::api::{
    BUCKET_ORIGIN_ANNOTATION, BucketOrigin, BucketPhase, ObjectBucket, ReclaimPolicy,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The next step for a claim being deleted.
pub(super) fn next_deletion_step(o: &Observed) -> Step {
    if !has_finalizer(&o.claim.metadata) {
        return Step::Done;
    }
    let ours = has_label(&o.claim.metadata, &o.label)
        || matches!(o.class, ClassState::Ours(_))
        || o.ob
            .as_ref()
            .is_some_and(|ob| has_label(&ob.metadata, &o.label));
    if !ours {
        return Step::Ignore;
    }
    if let Some(ob) = o.ob.as_ref().filter(|ob| claim_ref_matches(ob, &o.claim)) {
        let released = ob.status.as_ref().and_then(|s| s.phase) == Some(BucketPhase::Released);
        if !released {
            let plan = teardown_plan(ob, &o.class);
            if !o.torn_down {
                return Step::Teardown {
                    delete_bucket: plan.delete_bucket,
                };
            }
            return if plan.delete_object_bucket {
                Step::DeleteObjectBucket
            } else {
                Step::ReleaseObjectBucket
            };
        }
        if has_finalizer(&ob.metadata) {
            return Step::ReleaseObjectBucket;
        }
    }
    if o.ob.is_none() && !o.torn_down && !recorded_on_object_bucket(&o.claim) {
        // A pass of an older version, which provisioned before it created
        // the ObjectBucket, may have died between the two: tear down by
        // name, so no bucket outlives its claim. The provisioner only
        // deletes what it created for this claim. A claim whose buckets an
        // ObjectBucket records (bound, or prepared by this version, which
        // reserves it before any provisioner call) is torn down through it;
        // if that is gone, its teardown already ran or nothing was made.
        //
        // Reclaim policy Retain keeps the bucket of a claim that was bound.
        // This one never was, and nothing would record a kept bucket (there is
        // no ObjectBucket), so a greenfield bucket is deleted under either
        // policy rather than orphaned.
        if let ClassState::Ours(class) = &o.class {
            let origin = if brownfield_bucket(class).is_some() {
                BucketOrigin::Brownfield
            } else {
                BucketOrigin::Greenfield
            };
            let named = origin == BucketOrigin::Brownfield || fixed_bucket_name(&o.claim).is_some();
            if named {
                return Step::Teardown {
                    delete_bucket: origin == BucketOrigin::Greenfield,
                };
            }
        }
    }
    // The bucket is torn down or recorded (a Released ObjectBucket): the
    // name's record goes, so that the name is free for a later claim.
    if o.name_records
        && !o.name_released
        && let Some(bucket_name) = fixed_bucket_name(&o.claim)
    {
        return Step::ReleaseBucketName {
            bucket_name: bucket_name.to_owned(),
        };
    }
    // The Secret and ConfigMap are the garbage collector's to delete, once
    // the claim is gone (their owner reference). Only children an older
    // version wrote with our finalizer need a write: the finalizer off.
    if o.secret.as_ref().is_some_and(|s| holds_our_finalizer(s, o)) {
        return Step::ReleaseSecret;
    }
    if o.config_map
        .as_ref()
        .is_some_and(|c| holds_our_finalizer(c, o))
    {
        return Step::ReleaseConfigMap;
    }
    Step::RemoveClaimFinalizer
}

/// A child of this claim that still carries our finalizer: its own (owner
/// reference), or one the garbage collector orphaned for it
/// (`--cascade=orphan` strips the owner references before the claim's
/// teardown sees them) that carries our label and no owner.
fn holds_our_finalizer(meta: &ObjectMeta, o: &Observed) -> bool {
    let orphaned =
        has_label(meta, &o.label) && meta.owner_references.as_ref().is_none_or(Vec::is_empty);
    has_finalizer(meta) && (owned_by(meta, &o.claim) || orphaned)
}

/// How an ObjectBucket is torn down once its claim goes: the one decision
/// both the claim's deletion and the orphan cleanup follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TeardownPlan {
    /// Delete the bucket (else only revoke the claim's access).
    pub delete_bucket: bool,
    /// Delete the ObjectBucket afterwards (else mark it Released, keep it).
    pub delete_object_bucket: bool,
}

/// The teardown of `ob`, whose class is `class` (for ObjectBuckets that
/// recorded no origin).
pub(crate) fn teardown_plan(ob: &ObjectBucket, class: &ClassState) -> TeardownPlan {
    // A reserved ObjectBucket was never bound: its claim never got
    // credentials, so Retain has nothing to keep (an empty bucket at most),
    // and the bucket goes with the reservation.
    let delete_object_bucket = ob.spec.reclaim_policy == ReclaimPolicy::Delete || is_reserved(ob);
    TeardownPlan {
        delete_bucket: recorded_origin(ob, class) == BucketOrigin::Greenfield
            && delete_object_bucket,
        delete_object_bucket,
    }
}

/// Whether the ObjectBucket is a reservation made before its bucket (see
/// [`crate::obc::api::RESERVED_ANNOTATION`]).
pub(crate) fn is_reserved(ob: &ObjectBucket) -> bool {
    annotation(&ob.metadata, crate::obc::api::RESERVED_ANNOTATION).is_some()
}

/// [`is_reserved`] of a cached ObjectBucket, without copying it (the claim
/// reconciler's trigger reads it on every ObjectBucket event).
pub(crate) fn cached_is_reserved(ob: &crate::obc::CachedBucket) -> bool {
    super::meta::set(ob.annotation(crate::obc::api::RESERVED_ANNOTATION)).is_some()
}

/// Origin for teardown. When nothing recorded it and the class is gone,
/// assume brownfield: revoking keeps data, deleting could not be undone.
fn recorded_origin(ob: &ObjectBucket, class: &ClassState) -> BucketOrigin {
    if let Some(origin) =
        annotation(&ob.metadata, BUCKET_ORIGIN_ANNOTATION).and_then(BucketOrigin::parse)
    {
        return origin;
    }
    match class {
        ClassState::Ours(class) if brownfield_bucket(class).is_none() => BucketOrigin::Greenfield,
        _ => BucketOrigin::Brownfield,
    }
}
