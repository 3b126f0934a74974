//! The binding role's BucketAccess state machine, pure: [`next_step`].
//!
//! The buckets handed to the driver come only from Buckets bound (by UID)
//! to claims in the BucketAccess's own namespace; nothing a tenant writes
//! chooses them.

use kube::ResourceExt;

use crate::cosi::api::{
    AccessedBucket, AuthenticationType, Bucket, BucketAccess, BucketAccessClass, BucketClaim,
    HAS_BUCKETACCESS_REFERENCES_ANNOTATION,
};
use crate::cosi::claim::plan::bucket_name;
use crate::cosi::plan::{Next, has_annotation, has_finalizer};

/// One claim a BucketAccess names, as found in its namespace.
#[derive(Clone, Debug)]
pub(crate) struct ClaimSeen {
    pub name: String,
    pub claim: Option<BucketClaim>,
    /// The Bucket the claim's spec leads to (`bc-<uid>` or the static one).
    pub bucket: Option<Bucket>,
}

/// What the binding role's pass sees.
#[derive(Clone, Debug)]
pub(crate) struct Observed {
    pub access: BucketAccess,
    pub class: Option<BucketAccessClass>,
    /// In `spec.bucketClaims` order.
    pub claims: Vec<ClaimSeen>,
    /// Of a deleting BucketAccess handed to a driver: the names of its
    /// access Secrets that driver still holds (under a controller
    /// reference to its UID; for a driver we do not run, also any still
    /// carrying the driver's finalizer). The driver reserved them, with its
    /// finalizer, before it granted, and releases them before it revokes.
    pub secrets_held: Vec<String>,
}

/// One step of the binding role.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Step {
    AddFinalizer,
    /// `has-bucketaccess-references` on this claim.
    AnnotateClaim(String),
    /// One status write: accessed buckets, driver, authentication type,
    /// parameters (readyToUse false): the driver takes over.
    HandOff {
        buckets: Vec<AccessedBucket>,
        class: Box<BucketAccessClass>,
    },
    RemoveFinalizer,
}

/// The next step of the binding role for `o.access`.
pub(crate) fn next_step(o: &Observed) -> Next<Step> {
    let a = &o.access;
    if a.metadata.deletion_timestamp.is_some() {
        if !has_finalizer(&a.metadata) {
            return Next::Done;
        }
        // `sidecar-cleanup-finished` handed the BucketAccess back, but a
        // tenant can write that annotation: a driver's cleanup is believed
        // only once the Secrets it reserved are gone too.
        if let (Some(driver), Some(secret)) = (handed_to(a), o.secrets_held.first()) {
            return Next::Wait(format!(
                "waiting for driver {driver} to finish its cleanup: access Secret {secret} still exists (the driver deletes it)"
            ));
        }
        return Next::Step(Step::RemoveFinalizer);
    }
    if !has_finalizer(&a.metadata) {
        return Next::Step(Step::AddFinalizer);
    }
    if let Some(c) = o.claims.iter().find(|c| {
        c.claim.as_ref().is_some_and(|claim| {
            claim.metadata.deletion_timestamp.is_none()
                && !has_annotation(&claim.metadata, HAS_BUCKETACCESS_REFERENCES_ANNOTATION)
        })
    }) {
        return Next::Step(Step::AnnotateClaim(c.name.clone()));
    }
    if a.status
        .as_ref()
        .is_some_and(|s| s.accessed_buckets.is_some())
    {
        return Next::Done;
    }
    let class_name = &a.spec.bucket_access_class_name;
    let Some(class) = &o.class else {
        return Next::Wait(format!(
            "BucketAccessClass {class_name} does not exist: create it, or recreate this BucketAccess naming an existing class"
        ));
    };
    if let Some(refusal) = class_refusal(a, class) {
        return Next::Refuse(refusal);
    }
    let mut buckets = Vec::new();
    for seen in &o.claims {
        match claim_bucket(a, seen) {
            Ok(b) => buckets.push(b),
            Err(next) => return next,
        }
    }
    Next::Step(Step::HandOff {
        buckets,
        class: Box::new(class.clone()),
    })
}

/// The driver a BucketAccess was handed to, if it was.
pub(crate) fn handed_to(a: &BucketAccess) -> Option<&str> {
    a.status
        .as_ref()
        .filter(|s| s.accessed_buckets.is_some())
        .and_then(|s| s.driver_name.as_deref())
        .filter(|d| !d.is_empty())
}

/// What the class forbids in this BucketAccess (asked at the hand-off,
/// and by the driver role again before it grants).
pub(crate) fn class_refusal(a: &BucketAccess, class: &BucketAccessClass) -> Option<String> {
    let name = &a.spec.bucket_access_class_name;
    if class.spec.authentication_type == AuthenticationType::ServiceAccount
        && a.spec.service_account_name.is_none()
    {
        return Some(format!(
            "BucketAccessClass {name} authenticates with a ServiceAccount: recreate this BucketAccess with spec.serviceAccountName"
        ));
    }
    if a.spec.bucket_claims.len() > 1 && !class.spec.allows_multiple_buckets() {
        return Some(format!(
            "BucketAccessClass {name} allows one bucket per BucketAccess (multiBucketAccess is not MultipleBuckets), and this one names {}: create one BucketAccess per claim, or use a class that allows MultipleBuckets",
            a.spec.bucket_claims.len()
        ));
    }
    let disallowed = class
        .spec
        .disallowed_bucket_access_modes
        .as_deref()
        .unwrap_or_default();
    a.spec.bucket_claims.iter().find(|c| disallowed.contains(&c.access_mode)).map(|c| {
        format!(
            "BucketAccessClass {name} does not allow access mode {} (asked for claim {}): recreate this BucketAccess with another mode, or use another class",
            c.access_mode.as_str(),
            c.bucket_claim_name
        )
    })
}

/// The Bucket of one claim, checked to be bound to exactly that claim of
/// this namespace; else what to do.
fn claim_bucket(a: &BucketAccess, seen: &ClaimSeen) -> Result<AccessedBucket, Next<Step>> {
    let ns = a.namespace().unwrap_or_default();
    let name = &seen.name;
    let Some(claim) = &seen.claim else {
        return Err(Next::Wait(format!(
            "BucketClaim {name} does not exist in namespace {ns}: create it"
        )));
    };
    if claim.metadata.deletion_timestamp.is_some() {
        return Err(Next::Refuse(format!(
            "BucketClaim {name} is being deleted: name another claim"
        )));
    }
    let claim_status = claim.status.clone().unwrap_or_default();
    if let Some(protocols) = claim_status.protocols.as_ref().filter(|p| !p.is_empty())
        && !protocols.contains(&a.spec.protocol)
    {
        return Err(Next::Refuse(format!(
            "BucketClaim {name}'s bucket does not support protocol {}: recreate this BucketAccess with one it supports",
            a.spec.protocol.as_str()
        )));
    }
    let expected = bucket_name(claim);
    let Some(bound) = claim_status.bound_bucket_name.clone() else {
        return Err(Next::Wait(format!(
            "BucketClaim {name} is not bound to a Bucket yet"
        )));
    };
    if Some(&bound) != expected.as_ref() {
        return Err(Next::Refuse(format!(
            "BucketClaim {name} records Bucket {bound}, which is not its Bucket: it cannot be used"
        )));
    }
    let Some(bucket) = &seen.bucket else {
        return Err(Next::Refuse(format!(
            "Bucket {bound} of BucketClaim {name} is gone: the claim cannot be used; delete it"
        )));
    };
    let r = &bucket.spec.bucket_claim_ref;
    if r.namespace != ns || r.name != *name || r.uid != claim.uid() {
        return Err(Next::Refuse(format!(
            "Bucket {bound} is not bound to BucketClaim {ns}/{name}: the claim cannot be used"
        )));
    }
    let Some(bucket_id) = bucket.status.as_ref().and_then(|s| s.bucket_id.clone()) else {
        return Err(Next::Wait(format!(
            "waiting for Bucket {bound} of BucketClaim {name} to be provisioned"
        )));
    };
    if !claim_status.ready_to_use {
        return Err(Next::Wait(format!(
            "waiting for BucketClaim {name} to be ready"
        )));
    }
    Ok(AccessedBucket {
        bucket_name: bound,
        bucket_id,
        bucket_claim_name: name.clone(),
    })
}
