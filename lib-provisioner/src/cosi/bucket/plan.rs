//! The Bucket state machine (driver role) as a pure function: [`next_step`].

use kube::ResourceExt;

use crate::core::provisioner::BucketInfo;
use crate::cosi::api::{
    BUCKETCLAIM_BEING_DELETED_ANNOTATION, Bucket, BucketDeletionPolicy, FINALIZER, ObjectProtocol,
};
use crate::cosi::plan::{Next, has_annotation, has_finalizer};

/// The protocols the driver role serves: the Secret keys it writes are
/// S3's.
pub(crate) const SUPPORTED: &[ObjectProtocol] = &[ObjectProtocol::S3];

/// What a Bucket's pass sees.
#[derive(Clone, Debug)]
pub(crate) struct Observed {
    pub bucket: Bucket,
    /// What `create_bucket` / `existing_bucket` answered in this pass.
    pub found: Option<BucketInfo>,
    /// Whether `delete` succeeded in this pass.
    pub deleted: bool,
    /// Whether `revoke` under `Retain` (the bucket is kept) succeeded in
    /// this pass.
    pub kept: bool,
    /// Whether the claim the Bucket is bound to (by UID) is gone; read
    /// only when [`reads_claim`] says the plan needs it, else false.
    pub claim_gone: bool,
}

/// One step of a Bucket's pass.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Step {
    AddFinalizer,
    /// `create_bucket` (dynamic: named after the Bucket).
    Create,
    /// `existing_bucket` (static: `existingBucketID`).
    LookUp,
    /// `readyToUse`, `bucketID`, `protocols`, `bucketInfo`; error cleared.
    RecordBucket,
    MarkNotReady,
    /// `delete` of the bucket in the store.
    Delete,
    /// `revoke` under `Retain`: the provisioner records that the bucket
    /// it made is kept (so that its store sweep never deletes it).
    Keep,
    RemoveFinalizer,
}

/// Whether the Bucket records the id of a bucket the driver found or made.
fn recorded_id(b: &Bucket) -> bool {
    b.status
        .as_ref()
        .and_then(|s| s.bucket_id.as_ref())
        .is_some()
}

/// Whether the driver made the Bucket's bucket (dynamic, its id recorded).
fn made_by_us(b: &Bucket) -> bool {
    b.spec.existing_bucket_id.is_none() && recorded_id(b)
}

/// Whether this Bucket is this driver's.
pub(crate) fn is_ours(bucket: &Bucket, driver: &str) -> bool {
    bucket.spec.driver_name == driver
}

/// The store's name of the bucket: the recorded id; before one is
/// recorded, what the driver was (or will be) asked for.
pub(crate) fn store_name(bucket: &Bucket) -> Option<String> {
    let recorded = bucket.status.as_ref().and_then(|s| s.bucket_id.clone());
    recorded.or_else(|| match &bucket.spec.existing_bucket_id {
        Some(id) => Some(id.clone()),
        None => Some(bucket.name_any()),
    })
}

/// Whether the plan needs to know if the bound claim still exists: a
/// Bucket being deleted (policy Delete) that its claim has not released.
pub(crate) fn reads_claim(b: &Bucket) -> bool {
    b.metadata.deletion_timestamp.is_some()
        && has_finalizer(&b.metadata)
        && b.spec.deletion_policy == BucketDeletionPolicy::Delete
        && b.spec.bucket_claim_ref.uid.is_some()
        && !has_annotation(&b.metadata, BUCKETCLAIM_BEING_DELETED_ANNOTATION)
}

fn ready(bucket: &Bucket) -> bool {
    bucket.status.as_ref().is_some_and(|s| s.ready_to_use)
}

/// The next step for a Bucket of this driver.
pub(crate) fn next_step(o: &Observed) -> Next<Step> {
    if o.bucket.metadata.deletion_timestamp.is_some() {
        return deletion_step(o);
    }
    let b = &o.bucket;
    if has_annotation(&b.metadata, BUCKETCLAIM_BEING_DELETED_ANNOTATION) {
        // Released by its claim (Retain), or about to be deleted.
        return if ready(b) {
            Next::Step(Step::MarkNotReady)
        } else {
            Next::Done
        };
    }
    if let Some(p) = b
        .spec
        .protocols
        .iter()
        .flatten()
        .find(|p| !SUPPORTED.contains(p))
    {
        return Next::Refuse(format!(
            "this driver serves only S3, and Bucket {} asks for {}: ask for S3",
            b.name_any(),
            p.as_str()
        ));
    }
    if !has_finalizer(&b.metadata) {
        return Next::Step(Step::AddFinalizer);
    }
    let recorded = b
        .status
        .as_ref()
        .and_then(|s| s.bucket_id.as_ref())
        .is_some();
    if recorded && ready(b) && o.found.is_none() {
        return Next::Done;
    }
    if o.found.is_some() {
        return Next::Step(Step::RecordBucket);
    }
    let r = &b.spec.bucket_claim_ref;
    if b.spec.existing_bucket_id.is_some() {
        if r.name.is_empty() || r.namespace.is_empty() {
            return Next::Refuse(format!(
                "Bucket {} names no claim: set spec.bucketClaimRef",
                b.name_any()
            ));
        }
        return Next::Step(Step::LookUp);
    }
    if r.uid.is_none() {
        return Next::Refuse(format!(
            "Bucket {} has no existingBucketID and no claim UID: a new bucket is made only for a BucketClaim (create a BucketClaim with a BucketClass instead)",
            b.name_any()
        ));
    }
    Next::Step(Step::Create)
}

fn deletion_step(o: &Observed) -> Next<Step> {
    let b = &o.bucket;
    if !has_finalizer(&b.metadata) {
        return Next::Done;
    }
    if b.spec.deletion_policy == BucketDeletionPolicy::Retain {
        // Once per pass: the policy may have been changed to Retain after
        // the provisioner recorded Delete with the bucket it made.
        if !o.kept && made_by_us(b) {
            return Next::Step(Step::Keep);
        }
        return Next::Refuse(format!(
            "Bucket {} has deletionPolicy Retain, so its bucket is kept: set deletionPolicy Delete to delete it, or remove the finalizer {FINALIZER} to leave it in the store",
            b.name_any()
        ));
    }
    // A claim that is gone never releases its Bucket (no binding role
    // saw it go): its deletion is the release.
    if reads_claim(b) && !o.claim_gone {
        let r = &b.spec.bucket_claim_ref;
        return Next::Refuse(format!(
            "Bucket {} is still bound to BucketClaim {}/{}: delete the claim instead, which deletes the Bucket",
            b.name_any(),
            r.namespace,
            r.name
        ));
    }
    if ready(b) {
        return Next::Step(Step::MarkNotReady);
    }
    // A static Bucket never looked up has no bucket of ours; a dynamic one
    // may have one made before a crash kept its id from being recorded.
    let found_static = b.spec.existing_bucket_id.is_none() || recorded_id(b);
    if !o.deleted && found_static {
        return Next::Step(Step::Delete);
    }
    Next::Step(Step::RemoveFinalizer)
}
