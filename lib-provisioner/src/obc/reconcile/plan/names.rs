//! Which bucket and which ObjectBucket a claim gets: the name decisions, in
//! the order that never yields a second bucket.

use k8s_openapi::api::storage::v1::StorageClass;

use super::meta::{annotation, has_finalizer, recorded_on_object_bucket};
use super::{BucketName, Observed, Problem};
use crate::core::names;
use crate::obc::api::{
    BROWNFIELD_BUCKET_PARAMETER, BucketOrigin, GENERATED_NAME_ANNOTATION,
    OBJECT_BUCKET_NAME_ANNOTATION, ObjectBucket, ObjectBucketClaim,
};

/// The ObjectBucket a claim binds to: the one it names (bound), else the
/// one chosen for it ([`OBJECT_BUCKET_NAME_ANNOTATION`]), else
/// `obc-<ns>-<name>`.
pub(crate) fn object_bucket_name(claim: &ObjectBucketClaim) -> String {
    claim
        .spec
        .object_bucket_name
        .as_deref()
        .filter(|n| !n.is_empty())
        .or_else(|| annotation(&claim.metadata, OBJECT_BUCKET_NAME_ANNOTATION))
        .map(str::to_owned)
        .unwrap_or_else(|| default_object_bucket_name(claim))
}

/// The `spec.objectBucketName` to record when the claim is first protected
/// (it has no finalizer yet) and names none: the ObjectBucket it will bind
/// to, known before anything exists. `None` for a claim prepared earlier:
/// an older version may have provisioned it before its ObjectBucket
/// existed, and the field would then hide a bucket only its name records
/// from the teardown by name (see `teardown`); such claims get it at bind.
pub(crate) fn bind_at_prepare(claim: &ObjectBucketClaim) -> Option<String> {
    let named = claim
        .spec
        .object_bucket_name
        .as_deref()
        .is_some_and(|n| !n.is_empty());
    (!named && !has_finalizer(&claim.metadata)).then(|| object_bucket_name(claim))
}

fn default_object_bucket_name(claim: &ObjectBucketClaim) -> String {
    names::object_bucket_name(
        claim.metadata.namespace.as_deref().unwrap_or_default(),
        claim.metadata.name.as_deref().unwrap_or_default(),
    )
}

/// Longest object name the apiserver takes (a DNS subdomain).
pub(crate) const MAX_OBJECT_NAME_LEN: usize = 253;

/// The name a new claim gets instead of `obc-<ns>-<name>` when that is too
/// long, or is the ObjectBucket of a claim with another namespace or name
/// (`a-b`/`c` and `a`/`b-c` share it): `obc-<uid>`, unique in the cluster.
/// `None` when the default serves, or the claim has a name already (chosen,
/// or bound: existing claims keep theirs). A claim of the same namespace and
/// name (a recreated claim) is not given another name: it is told that the
/// retained ObjectBucket of its predecessor holds the name.
pub(crate) fn own_object_bucket_name(o: &Observed) -> Option<String> {
    let claim = &o.claim;
    let chosen = claim
        .spec
        .object_bucket_name
        .as_deref()
        .is_some_and(|n| !n.is_empty())
        || annotation(&claim.metadata, OBJECT_BUCKET_NAME_ANNOTATION).is_some();
    if chosen || recorded_on_object_bucket(claim) {
        return None;
    }
    let too_long = default_object_bucket_name(claim).len() > MAX_OBJECT_NAME_LEN;
    let other_claims = o.ob.as_ref().is_some_and(|ob| {
        ob.spec.claim_ref.as_ref().is_some_and(|r| {
            r.namespace != claim.metadata.namespace || r.name != claim.metadata.name
        })
    });
    (too_long || other_claims)
        .then(|| format!("obc-{}", claim.metadata.uid.as_deref().unwrap_or_default()))
}

pub(crate) fn brownfield_bucket(class: &StorageClass) -> Option<&str> {
    class
        .parameters
        .as_ref()
        .and_then(|p| p.get(BROWNFIELD_BUCKET_PARAMETER))
        .map(String::as_str)
        .filter(|b| !b.is_empty())
}

/// Decides the bucket name, in the order that never yields a second bucket:
/// an existing ObjectBucket, the class (brownfield), `spec.bucketName`, a
/// name generated earlier, and only then a new generated name.
pub(crate) fn bucket_name(
    o: &Observed,
    class: Option<&StorageClass>,
    origin: BucketOrigin,
) -> Result<BucketName, Problem> {
    if let Some(name) = o.ob.as_ref().and_then(ObjectBucket::bucket_name) {
        return Ok(BucketName::Known(name.to_owned()));
    }
    let spec = &o.claim.spec;
    let exact = spec.bucket_name.as_deref().filter(|n| !n.is_empty());
    let prefix = spec
        .generate_bucket_name
        .as_deref()
        .filter(|n| !n.is_empty());

    if origin == BucketOrigin::Brownfield {
        return brownfield_name(o, class, exact);
    }

    let processed = has_finalizer(&o.claim.metadata) || recorded_on_object_bucket(&o.claim);
    match (exact, prefix) {
        (None, None) => {
            if let Some(generated) = annotation(&o.claim.metadata, GENERATED_NAME_ANNOTATION) {
                return validated(generated, "the generated bucket name");
            }
            Err(Problem::new(
                "MissingBucketName",
                "set spec.generateBucketName (recommended: a prefix, a random suffix is added) or spec.bucketName (an exact name)",
            ))
        }
        (Some(exact), Some(prefix)) => {
            // Older versions wrote the generated name back into
            // spec.bucketName: then it is the bucket's real name.
            if names::looks_generated_from(prefix, exact) || processed {
                validated(exact, "spec.bucketName")
            } else {
                Err(Problem::new(
                    "AmbiguousBucketName",
                    format!(
                        "both spec.bucketName ({exact:?}) and spec.generateBucketName ({prefix:?}) are set: keep only one"
                    ),
                ))
            }
        }
        (Some(exact), None) => validated(exact, "spec.bucketName"),
        (None, Some(prefix)) => {
            if let Some(generated) = annotation(&o.claim.metadata, GENERATED_NAME_ANNOTATION) {
                return validated(generated, "the generated bucket name");
            }
            if recorded_on_object_bucket(&o.claim) {
                // The ObjectBucket was the only record of the generated name
                // left: generating another could create a second bucket.
                return Err(Problem::new(
                    "ObjectBucketMissing",
                    format!(
                        "ObjectBucket {} is gone, and with it the bucket name generated for this claim (the claim's objectbucket.io/generated-bucket-name annotation is gone too): restore the ObjectBucket, or set spec.bucketName to the bucket's name",
                        object_bucket_name(&o.claim)
                    ),
                ));
            }
            names::generate_bucket_name(prefix).map_err(|e| {
                Problem::new(
                    "InvalidBucketName",
                    format!("{e}: fix spec.generateBucketName"),
                )
            })?;
            Ok(BucketName::Generate(prefix.to_owned()))
        }
    }
}

/// A brownfield claim's bucket: the one its class names, which
/// `spec.bucketName` may repeat but not contradict.
fn brownfield_name(
    o: &Observed,
    class: Option<&StorageClass>,
    exact: Option<&str>,
) -> Result<BucketName, Problem> {
    let Some(existing) = class.and_then(brownfield_bucket) else {
        return Err(Problem::new(
            "ObjectBucketMissing",
            "the claim's ObjectBucket is gone and its StorageClass no longer names a bucket: restore the ObjectBucket or recreate the claim",
        ));
    };
    if let Some(exact) = exact.filter(|e| *e != existing) {
        return Err(Problem::new(
            "BucketNameMismatch",
            format!(
                "StorageClass {:?} grants access to the existing bucket {existing:?}, but spec.bucketName asks for {exact:?}: remove spec.bucketName, or use a class without a bucketName parameter to create a new bucket",
                o.claim.spec.storage_class_name
            ),
        ));
    }
    validated(existing, "StorageClass parameter bucketName")
}

fn validated(name: &str, source: &str) -> Result<BucketName, Problem> {
    names::validate_bucket_name(name)
        .map_err(|e| Problem::new("InvalidBucketName", format!("{source}: {e}")))?;
    Ok(BucketName::Known(name.to_owned()))
}

/// Annotation on a name record: the holder claim's `namespace/name`.
pub(crate) const HOLDER_CLAIM_ANNOTATION: &str = "objectbucket.io/claim";
/// Annotation on a name record: the bucket name it holds.
pub(crate) const BUCKET_NAME_ANNOTATION: &str = "objectbucket.io/bucket-name";

/// The name of the Lease that holds bucket name `bucket`. Valid for every
/// valid bucket name (lowercase letters, digits, '-' and '.', at most 63).
pub(crate) fn record_name(bucket: &str) -> String {
    format!("obc-bucket-{bucket}")
}
