//! The BucketClaim state machine as a pure function: [`next_step`].

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use crate::cosi::api::{
    BUCKETCLAIM_BEING_DELETED_ANNOTATION, Bucket, BucketClaim, BucketClaimReference, BucketClass,
    BucketDeletionPolicy, BucketSpec, ObjectProtocol, bucket_name_for_claim,
};
use crate::cosi::plan::{Next, has_annotation, has_finalizer};

/// What a claim's pass sees (read from the API).
#[derive(Clone, Debug)]
pub(crate) struct Observed {
    pub claim: BucketClaim,
    /// The Bucket of [`bucket_name`].
    pub bucket: Option<Bucket>,
    /// The claim's BucketClass (dynamic claims; `None` if missing).
    pub class: Option<BucketClass>,
    /// A BucketAccess in the claim's namespace that names it (looked for
    /// only while the claim is being deleted).
    pub access: Option<String>,
    /// When it was observed (for [`DRIVER_GRACE`]).
    pub now: Timestamp,
}

/// How long a Bucket may wait for its driver (its creation or its
/// deletion) before the claim shows the wait: a driver answers in
/// milliseconds to seconds, and showing every such wait would cost each
/// claim a status write and an Event (two of its nine writes on creation)
/// for nothing the user must do.
pub(crate) const DRIVER_GRACE: Duration = Duration::from_secs(5);

/// One step of a claim's pass.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Step {
    AddFinalizer,
    /// Create the dynamic Bucket (`bc-<claim uid>`) from the class.
    CreateBucket(Box<Bucket>),
    /// Write the claim's UID into a static Bucket's `bucketClaimRef`.
    BindBucket,
    /// `status.boundBucketName`.
    RecordBinding,
    /// `readyToUse` and `protocols` from the Bucket; error cleared.
    CopyBucketStatus {
        ready: bool,
        protocols: Option<Vec<ObjectProtocol>>,
    },
    MarkNotReady,
    /// Annotate the Bucket: its claim is being deleted.
    ReleaseBucket,
    /// Delete the Bucket object (policy Delete); the driver deletes the
    /// bucket, then the Bucket goes.
    DeleteBucket,
    RemoveFinalizer,
}

/// The Bucket a claim is bound to: `bc-<uid>` (dynamic) or the one it
/// names (static). `None` for a claim the CRD would refuse.
pub(crate) fn bucket_name(claim: &BucketClaim) -> Option<String> {
    match (
        &claim.spec.bucket_class_name,
        &claim.spec.existing_bucket_name,
    ) {
        (Some(_), None) => claim.uid().map(|uid| bucket_name_for_claim(&uid)),
        (None, Some(name)) => Some(name.clone()),
        _ => None,
    }
}

/// Whether the claim's plan looks at its Bucket (and class): a live claim
/// without COSI's finalizer is only protected first, whatever its Bucket,
/// so its pass reads neither (for a new claim: one GET fewer, of a Bucket
/// no cache has yet).
pub(crate) fn looks_at_bucket(claim: &BucketClaim) -> bool {
    claim.metadata.deletion_timestamp.is_some() || has_finalizer(&claim.metadata)
}

fn is_static(claim: &BucketClaim) -> bool {
    claim.spec.existing_bucket_name.is_some()
}

/// The next step for the claim.
pub(crate) fn next_step(o: &Observed) -> Next<Step> {
    let Some(name) = bucket_name(&o.claim) else {
        return Next::Refuse(
            "set exactly one of spec.bucketClassName (a new bucket) and spec.existingBucketName (a Bucket an administrator made): delete this claim and create it again".into(),
        );
    };
    if o.claim.metadata.deletion_timestamp.is_some() {
        return deletion_step(o, &name);
    }
    live_step(o, &name)
}

fn live_step(o: &Observed, name: &str) -> Next<Step> {
    let claim = &o.claim;
    let status = claim.status.as_ref();
    let bound = status.and_then(|s| s.bound_bucket_name.as_deref());
    if let Some(bound) = bound.filter(|b| *b != name) {
        return Next::Refuse(format!(
            "the claim is bound to Bucket {bound}, but its spec names Bucket {name}: this cannot be repaired; delete the claim and create a new one"
        ));
    }
    if !has_finalizer(&claim.metadata) {
        return Next::Step(Step::AddFinalizer);
    }
    let Some(bucket) = &o.bucket else {
        return missing_bucket(o, name, bound.is_some());
    };
    if let Some(refusal) = binding_refusal(claim, bucket) {
        return Next::Refuse(refusal);
    }
    if bucket.spec.bucket_claim_ref.uid.is_none() {
        return Next::Step(Step::BindBucket);
    }
    if bucket.metadata.deletion_timestamp.is_some() {
        return Next::Refuse(format!(
            "Bucket {name} is being deleted: delete this claim (and create a new one for a new bucket)"
        ));
    }
    if bound.is_none() {
        return Next::Step(Step::RecordBinding);
    }
    bucket_status_step(o, bucket, name)
}

fn missing_bucket(o: &Observed, name: &str, bound: bool) -> Next<Step> {
    if bound {
        return Next::Refuse(format!(
            "Bucket {name}, which this claim was bound to, was deleted: the claim is not bound again; delete it and create a new one"
        ));
    }
    if is_static(&o.claim) {
        return Next::Wait(format!(
            "Bucket {name} does not exist: an administrator must create it, with spec.bucketClaimRef naming this claim"
        ));
    }
    let class_name = o.claim.spec.bucket_class_name.clone().unwrap_or_default();
    match &o.class {
        None => Next::Wait(format!(
            "BucketClass {class_name} does not exist: create it, or delete this claim and name an existing class"
        )),
        Some(class) => Next::Step(Step::CreateBucket(Box::new(new_bucket(
            &o.claim, class, name,
        )))),
    }
}

/// The dynamic Bucket of a claim: driver, policy and parameters from the
/// class, protocols from the claim, bound to the claim's UID. No
/// finalizer: the driver adds its own. No annotation either: the derived
/// `Bucket::new` would copy the CRD's `api-approved.kubernetes.io` onto
/// the object, which upstream's Buckets do not carry.
pub(crate) fn new_bucket(claim: &BucketClaim, class: &BucketClass, name: &str) -> Bucket {
    Bucket {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..Default::default()
        },
        spec: BucketSpec {
            driver_name: class.spec.driver_name.clone(),
            deletion_policy: class.spec.deletion_policy,
            parameters: class
                .spec
                .parameters
                .clone()
                .filter(|p: &BTreeMap<_, _>| !p.is_empty()),
            protocols: claim.spec.protocols.clone(),
            bucket_claim_ref: BucketClaimReference {
                name: claim.name_any(),
                namespace: claim.namespace().unwrap_or_default(),
                uid: claim.uid(),
            },
            existing_bucket_id: None,
        },
        status: None,
    }
}

/// Why this claim may not bind `bucket`: it names another claim (name,
/// namespace, or a UID already set). The other claim is not named: it may
/// be another tenant's.
fn binding_refusal(claim: &BucketClaim, bucket: &Bucket) -> Option<String> {
    let r = &bucket.spec.bucket_claim_ref;
    let name = bucket.name_any();
    if r.name != claim.name_any() || Some(&r.namespace) != claim.namespace().as_ref() {
        return Some(format!(
            "Bucket {name} is not available to this claim: name another Bucket, or ask an administrator for one"
        ));
    }
    match (&r.uid, claim.uid()) {
        (Some(bound), Some(uid)) if *bound != uid => Some(format!(
            "Bucket {name} was bound to an earlier claim of this name: a Bucket is never bound again; ask an administrator for another Bucket"
        )),
        _ => None,
    }
}

fn bucket_status_step(o: &Observed, bucket: &Bucket, name: &str) -> Next<Step> {
    let bs = bucket.status.clone().unwrap_or_default();
    if bs.bucket_id.is_none() {
        let created = bucket.metadata.creation_timestamp.as_ref();
        return driver_wait(o, bucket, created, &format!("provision Bucket {name}"));
    }
    if bs.ready_to_use && bs.protocols.as_ref().is_none_or(Vec::is_empty) {
        return Next::Refuse(format!(
            "driver {} reported no protocols for Bucket {name}: an administrator must check the driver",
            bucket.spec.driver_name
        ));
    }
    if let Some(missing) = missing_protocol(o, &bs.protocols) {
        return Next::Refuse(format!(
            "Bucket {name} does not support protocol {}: ask for the protocols it supports ({})",
            missing.as_str(),
            protocol_list(&bs.protocols)
        ));
    }
    let cs = o.claim.status.clone().unwrap_or_default();
    if cs.ready_to_use != bs.ready_to_use || cs.protocols != bs.protocols || cs.error.is_some() {
        return Next::Step(Step::CopyBucketStatus {
            ready: bs.ready_to_use,
            protocols: bs.protocols,
        });
    }
    Next::Done
}

fn missing_protocol(o: &Observed, have: &Option<Vec<ObjectProtocol>>) -> Option<ObjectProtocol> {
    let have = have.as_deref().unwrap_or_default();
    o.claim
        .spec
        .protocols
        .iter()
        .flatten()
        .find(|p| !have.contains(p))
        .copied()
}

fn protocol_list(list: &Option<Vec<ObjectProtocol>>) -> String {
    let names: Vec<&str> = list.iter().flatten().map(|p| p.as_str()).collect();
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}

fn deletion_step(o: &Observed, name: &str) -> Next<Step> {
    let claim = &o.claim;
    if !has_finalizer(&claim.metadata) {
        return Next::Done;
    }
    if claim.status.as_ref().is_some_and(|s| s.ready_to_use) {
        return Next::Step(Step::MarkNotReady);
    }
    if let Some(access) = &o.access {
        return Next::Wait(format!(
            "BucketAccess {access} still uses this claim: the claim is deleted once every BucketAccess naming it is deleted (its access revoked)"
        ));
    }
    let Some(bucket) = &o.bucket else {
        return Next::Step(Step::RemoveFinalizer);
    };
    let foreign = binding_refusal(claim, bucket).is_some();
    let unbound = bucket.spec.bucket_claim_ref.uid.is_none();
    if is_static(claim) && (foreign || unbound) {
        // A static Bucket this claim never bound stays as the
        // administrator made it.
        return Next::Step(Step::RemoveFinalizer);
    }
    if foreign {
        return Next::Refuse(format!(
            "Bucket {name} names another claim: an administrator must decide what becomes of it, then remove this claim's finalizer"
        ));
    }
    if !has_annotation(&bucket.metadata, BUCKETCLAIM_BEING_DELETED_ANNOTATION) {
        return Next::Step(Step::ReleaseBucket);
    }
    match bucket.spec.deletion_policy {
        BucketDeletionPolicy::Retain => Next::Step(Step::RemoveFinalizer),
        BucketDeletionPolicy::Delete if bucket.metadata.deletion_timestamp.is_none() => {
            Next::Step(Step::DeleteBucket)
        }
        BucketDeletionPolicy::Delete => {
            let deleted = bucket.metadata.deletion_timestamp.as_ref();
            driver_wait(o, bucket, deleted, &format!("delete Bucket {name}"))
        }
    }
}

/// The wait for `bucket`'s driver to `what`, asked at `since`: not shown
/// during its grace, unless the driver said (in the Bucket's status) why it
/// has not, or the claim still shows an earlier error, which would then
/// tell what is no longer so; shown with the driver's reason.
fn driver_wait(o: &Observed, bucket: &Bucket, since: Option<&Time>, what: &str) -> Next<Step> {
    let status = bucket.status.as_ref();
    let why = status.and_then(|s| s.error.as_ref()?.message.as_deref());
    let shown = o.claim.status.as_ref().is_some_and(|s| s.error.is_some());
    if let Some(left) = grace_left(o, since).filter(|_| why.is_none() && !shown) {
        return Next::Pending(left);
    }
    let why = why.map(|m| format!(": {m}")).unwrap_or_default();
    let driver = &bucket.spec.driver_name;
    Next::Wait(format!("waiting for driver {driver} to {what}{why}"))
}

/// What is left of [`DRIVER_GRACE`] for a driver asked at `since`
/// (`None`: no time, or none left). Never more than the grace, whatever
/// the two clocks say.
fn grace_left(o: &Observed, since: Option<&Time>) -> Option<Duration> {
    // A time "in the future" (a clock behind the apiserver's) is now.
    let age = Duration::try_from(o.now.duration_since(since?.0)).unwrap_or_default();
    DRIVER_GRACE.checked_sub(age).filter(|d| !d.is_zero())
}
