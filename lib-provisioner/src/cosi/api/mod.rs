//! The `objectstorage.k8s.io/v1alpha2` API (Kubernetes COSI): BucketClass,
//! BucketClaim, Bucket, BucketAccessClass and BucketAccess, wire- and
//! schema-compatible with upstream's CRDs (`crds/cosi/` is generated from
//! these types; a test fails on drift).
//!
//! ```
//! use lib_provisioner::cosi::api::{BucketClaim, BucketClaimSpec, ObjectProtocol};
//!
//! let claim = BucketClaim::new("photos", BucketClaimSpec {
//!     bucket_class_name: Some("s3-buckets".into()),
//!     protocols: Some(vec![ObjectProtocol::S3]),
//!     ..Default::default()
//! });
//! assert_eq!(claim.spec.bucket_class_name.as_deref(), Some("s3-buckets"));
//! ```

mod bucket;
mod bucket_access;
mod bucket_access_class;
mod bucket_claim;
mod bucket_class;
pub(crate) mod schema;
mod shared;

pub use bucket::{Bucket, BucketClaimReference, BucketSpec, BucketStatus};
pub use bucket_access::{
    AccessedBucket, BucketAccess, BucketAccessSpec, BucketAccessStatus, BucketClaimAccess,
};
pub use bucket_access_class::{BucketAccessClass, BucketAccessClassSpec};
pub use bucket_claim::{BucketClaim, BucketClaimSpec, BucketClaimStatus};
pub use bucket_class::{BucketClass, BucketClassSpec};
pub use shared::{
    AuthenticationType, BucketAccessMode, BucketDeletionPolicy, MultiBucketAccess, ObjectProtocol,
    TimestampedError,
};

/// API group of the five kinds.
pub const GROUP: &str = "objectstorage.k8s.io";
/// API version of the five kinds.
pub const VERSION: &str = "v1alpha2";

/// Finalizer on BucketClaims, Buckets, BucketAccesses and access Secrets.
pub const FINALIZER: &str = "objectstorage.k8s.io/protection";
/// Annotation on a Bucket whose claim is being deleted. The host is
/// `k8.io`, not `k8s.io`: upstream's code spells it so, and the two sides
/// must agree.
pub const BUCKETCLAIM_BEING_DELETED_ANNOTATION: &str =
    "objectstorage.k8.io/bucketclaim-being-deleted";
/// Annotation (value "") on a BucketClaim some BucketAccess references.
pub const HAS_BUCKETACCESS_REFERENCES_ANNOTATION: &str =
    "objectstorage.k8s.io/has-bucketaccess-references";
/// Annotation (value "") the driver role sets on a deleting BucketAccess
/// once its access is revoked: the binding role then removes its finalizer.
pub const SIDECAR_CLEANUP_FINISHED_ANNOTATION: &str =
    "objectstorage.k8s.io/sidecar-cleanup-finished";
/// Annotation whose presence on a BucketAccess keeps it with the binding
/// role (upstream's controller).
pub const CONTROLLER_MANAGEMENT_OVERRIDE_ANNOTATION: &str =
    "objectstorage.k8s.io/controller-management-override";
/// CRD annotation the apiserver requires for a `*.k8s.io` group.
pub const API_APPROVED_ANNOTATION: (&str, &str) = (
    "api-approved.kubernetes.io",
    "unapproved, experimental v1alpha2 changes",
);

/// Keys of a BucketAccess Secret (and of `Bucket.status.bucketInfo`), as
/// upstream's sidecar writes them.
pub mod secret_keys {
    /// S3: the bucket's name in the store.
    pub const S3_BUCKET_ID: &str = "COSI_S3_BUCKET_ID";
    /// S3: the endpoint URL.
    pub const S3_ENDPOINT: &str = "COSI_S3_ENDPOINT";
    /// S3: the region.
    pub const S3_REGION: &str = "COSI_S3_REGION";
    /// S3: `path` or `virtual`.
    pub const S3_ADDRESSING_STYLE: &str = "COSI_S3_ADDRESSING_STYLE";
    /// S3: the access key id.
    pub const S3_ACCESS_KEY_ID: &str = "COSI_S3_ACCESS_KEY_ID";
    /// S3: the secret access key.
    pub const S3_ACCESS_SECRET_KEY: &str = "COSI_S3_ACCESS_SECRET_KEY";
}

/// Dynamic Bucket name of a claim: `bc-<claim uid>`.
pub fn bucket_name_for_claim(claim_uid: &str) -> String {
    format!("bc-{claim_uid}")
}

/// Account name of a BucketAccess handed to the provisioner: `ba-<uid>`.
pub fn account_name_for_access(access_uid: &str) -> String {
    format!("ba-{access_uid}")
}

/// The object UID a COSI id names: `<uid>` of `bc-<uid>` (a dynamic
/// Bucket's name, its claim's UID) or `ba-<uid>` (an account name, its
/// BucketAccess's UID); any other id is its own owner (a static bucket's
/// name in the store).
///
/// Both driver modes key what they make by it: the in-process driver role
/// hands the provisioner the claim's and the BucketAccess's UIDs, and the
/// gRPC driver, which learns only ids, recovers the same UIDs from them. So
/// a bucket or a user made in one mode is the same claim's or principal's
/// in the other, and an operator can switch modes over live objects.
///
/// ```
/// use lib_provisioner::cosi::api::owner_uid_of_id;
/// let uid = "0b1f6c1e-2a3b-4c5d-8e9f-0123456789ab";
/// assert_eq!(owner_uid_of_id(&format!("bc-{uid}")), uid);
/// assert_eq!(owner_uid_of_id(&format!("ba-{uid}")), uid);
/// assert_eq!(owner_uid_of_id("photos"), "photos");
/// assert_eq!(owner_uid_of_id("bc-photos"), "bc-photos");
/// ```
pub fn owner_uid_of_id(id: &str) -> &str {
    match id.strip_prefix("bc-").or_else(|| id.strip_prefix("ba-")) {
        Some(uid) if is_uid(uid) => uid,
        _ => id,
    }
}

/// Whether `s` has the shape of a Kubernetes UID (a UUID, 8-4-4-4-12 hex).
fn is_uid(s: &str) -> bool {
    let groups: Vec<&str> = s.split('-').collect();
    groups.iter().map(|g| g.len()).eq([8, 4, 4, 4, 12])
        && groups
            .iter()
            .all(|g| g.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// The five CRDs as YAML documents, keyed by file name under `crds/cosi/`.
/// Needs the `crd-yaml` feature.
///
/// ```
/// let files = lib_provisioner::cosi::api::crd_files();
/// assert_eq!(files.len(), 5);
/// assert!(files.iter().any(|(name, yaml)| name.contains("bucketaccesses") && yaml.contains("accessSecretName")));
/// ```
#[cfg(feature = "crd-yaml")]
pub fn crd_files() -> Vec<(&'static str, String)> {
    use kube::CustomResourceExt;
    let render = |crd: k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition| {
        let yaml = serde_yaml::to_string(&crd).unwrap_or_else(|e| format!("# could not render: {e}\n"));
        format!(
            "# Generated from lib-provisioner/src/cosi/api/ by `cargo run -p obc-tests --bin crdgen`.\n# Do not edit: a test fails when this file drifts from the types.\n---\n{yaml}"
        )
    };
    vec![
        (
            "objectstorage.k8s.io_bucketclasses.yaml",
            render(BucketClass::crd()),
        ),
        (
            "objectstorage.k8s.io_bucketclaims.yaml",
            render(BucketClaim::crd()),
        ),
        ("objectstorage.k8s.io_buckets.yaml", render(Bucket::crd())),
        (
            "objectstorage.k8s.io_bucketaccessclasses.yaml",
            render(BucketAccessClass::crd()),
        ),
        (
            "objectstorage.k8s.io_bucketaccesses.yaml",
            render(BucketAccess::crd()),
        ),
    ]
}
