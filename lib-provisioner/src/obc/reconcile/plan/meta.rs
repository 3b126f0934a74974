//! Reading the metadata a decision looks at: finalizers, labels,
//! annotations, owner references and what records the claim's bucket.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::obc::CachedClaim;
use crate::obc::api::{
    ClaimPhase, FINALIZER, GENERATED_NAME_ANNOTATION, ObjectBucket, ObjectBucketClaim,
    PROVISIONER_LABEL, RESERVED_ANNOTATION,
};

/// Whether an ObjectBucket's `claimRef` points at this claim: by UID when
/// both have one, else by namespace and name (older writers left no UID).
pub(crate) fn claim_ref_matches(ob: &ObjectBucket, claim: &ObjectBucketClaim) -> bool {
    let Some(r) = &ob.spec.claim_ref else {
        return false;
    };
    if let (Some(a), Some(b)) = (r.uid.as_deref(), claim.metadata.uid.as_deref())
        && !a.is_empty()
        && !b.is_empty()
    {
        return a == b;
    }
    r.name == claim.metadata.name && r.namespace == claim.metadata.namespace
}

/// Whether a child names the claim as its owner.
pub(crate) fn owned_by(meta: &ObjectMeta, claim: &ObjectBucketClaim) -> bool {
    meta.owner_references.as_ref().is_some_and(|refs| {
        refs.iter()
            .any(|r| r.kind == "ObjectBucketClaim" && Some(&r.uid) == claim.metadata.uid.as_ref())
    })
}

/// Whether a child is as this version writes it: our label, and not our
/// finalizer (which older versions put on children).
pub(crate) fn child_is_adopted(meta: &ObjectMeta, label: &str) -> bool {
    has_label(meta, label) && !has_finalizer(meta)
}

pub(crate) fn has_finalizer(meta: &ObjectMeta) -> bool {
    meta.finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|f| f == FINALIZER))
}

pub(crate) fn has_label(meta: &ObjectMeta, value: &str) -> bool {
    meta.labels
        .as_ref()
        .and_then(|l| l.get(PROVISIONER_LABEL))
        .is_some_and(|v| v == value)
}

pub(crate) fn annotation<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    set(meta
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str))
}

/// An annotation's value as the decisions count it: an empty one is unset.
pub(crate) fn set(value: Option<&str>) -> Option<&str> {
    value.filter(|v| !v.is_empty())
}

/// Whether an ObjectBucket records every bucket ever made for the claim,
/// so that the ObjectBucket missing means its teardown ran, or nothing was
/// made, and that a generated name it held is not to be generated anew.
///
/// `spec.objectBucketName` says so whoever wrote it: older versions and the
/// Go library at bind (the ObjectBucket existed), this version with the
/// claim's finalizer (the ObjectBucket is then reserved before every
/// provisioner call: no bucket is made without one), a user before that
/// (then too). A Bound status says so under a schema that prunes the
/// field. It does *not* say the claim was bound: for that, see
/// [`holds_bucket_of`].
pub(crate) fn recorded_on_object_bucket(claim: &ObjectBucketClaim) -> bool {
    claim
        .spec
        .object_bucket_name
        .as_deref()
        .is_some_and(|n| !n.is_empty())
        || claim.status.as_ref().and_then(|s| s.phase) == Some(ClaimPhase::Bound)
}

/// Whether `ob` holds a bucket made (or granted) for this claim: bound to
/// it by its `claimRef` and no longer a reservation. The proof that the
/// claim was bound: the ObjectBucket is cluster-scoped and only the
/// controller writes it, while the claim's spec (`objectBucketName`
/// included) and metadata are its tenant's.
pub(crate) fn holds_bucket_of(ob: &ObjectBucket, claim: &ObjectBucketClaim) -> bool {
    claim_ref_matches(ob, claim) && annotation(&ob.metadata, RESERVED_ANNOTATION).is_none()
}

/// The status is Bound with a Bound condition; and, unless the current
/// spec's config was refused (`config_refused`), for the current generation
/// with no `ConfigApplied=False` left over.
pub(crate) fn claim_status_is_bound(claim: &ObjectBucketClaim, config_refused: bool) -> bool {
    use crate::obc::reconcile::status::{BOUND_CONDITION, CONFIG_APPLIED_CONDITION, condition};
    let bound = claim.status.as_ref().is_some_and(|s| {
        s.phase == Some(ClaimPhase::Bound)
            && s.conditions
                .iter()
                // "Provisioned": a problem shown on a Bound claim (an API
                // error) is cleared once it passes.
                .any(|c| {
                    c.type_ == BOUND_CONDITION && c.status == "True" && c.reason == "Provisioned"
                })
    });
    if !bound || config_refused {
        return bound;
    }
    claim.status.as_ref().and_then(|s| s.observed_generation) == claim.metadata.generation
        && condition(claim, CONFIG_APPLIED_CONDITION).is_none_or(|c| c.status == "True")
}

/// The provisioner refused the current generation's config for good: the
/// claim is not updated again until its spec changes.
pub(crate) fn config_refused(claim: &ObjectBucketClaim) -> bool {
    use crate::obc::reconcile::status::{CONFIG_APPLIED_CONDITION, SETTLED_REFUSALS, condition};
    condition(claim, CONFIG_APPLIED_CONDITION).is_some_and(|c| {
        c.status == "False"
            && SETTLED_REFUSALS.contains(&c.reason.as_str())
            && c.observed_generation == claim.metadata.generation
    })
}

/// The bucket name a claim has fixed for itself (spec or annotation), used
/// to find two greenfield claims that ask for the same bucket.
pub(crate) fn fixed_bucket_name(claim: &ObjectBucketClaim) -> Option<&str> {
    fixed_bucket_name_of(
        claim,
        annotation(&claim.metadata, GENERATED_NAME_ANNOTATION),
    )
}

/// [`fixed_bucket_name`] of a cached claim, without copying it: the scan
/// over every claim for a bucket name's holder reads it.
pub(crate) fn cached_fixed_bucket_name(claim: &CachedClaim) -> Option<&str> {
    fixed_bucket_name_of(
        claim.without_maps(),
        set(claim.annotation(GENERATED_NAME_ANNOTATION)),
    )
}

fn fixed_bucket_name_of<'a>(
    claim: &'a ObjectBucketClaim,
    generated: Option<&'a str>,
) -> Option<&'a str> {
    claim
        .spec
        .bucket_name
        .as_deref()
        .filter(|n| !n.is_empty())
        .or(generated)
}
