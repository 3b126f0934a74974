//! Bucket: one bucket in the store (cluster-scoped).

use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::schema;
use super::{BucketDeletionPolicy, ObjectProtocol, TimestampedError};

/// A bucket in the store, bound to one BucketClaim. Named `bc-<claim
/// uid>` when provisioned for a claim; made by an administrator (with
/// `existingBucketID`) for a bucket that exists.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "objectstorage.k8s.io",
    version = "v1alpha2",
    derive = "PartialEq",
    kind = "Bucket",
    plural = "buckets",
    singular = "bucket",
    status = "BucketStatus",
    annotation(
        "api-approved.kubernetes.io",
        "unapproved, experimental v1alpha2 changes"
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = bucket_spec_rules()))]
pub struct BucketSpec {
    /// The driver that provisions this bucket.
    #[schemars(length(min = 1, max = 63), regex(pattern = schema::DRIVER_PATTERN), extend("x-kubernetes-validations" = schema::immutable("driverName is immutable")))]
    pub driver_name: String,
    /// What becomes of the bucket when its claim is deleted.
    pub deletion_policy: BucketDeletionPolicy,
    /// Opaque parameters for the driver (from the BucketClass).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = schema::params_map, extend("x-kubernetes-validations" = schema::immutable("parameters map is immutable")))]
    pub parameters: Option<BTreeMap<String, String>>,
    /// Protocols the bucket must support (from the claim).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 3), extend("x-kubernetes-list-type" = "set", "x-kubernetes-validations" = schema::immutable("protocols list is immutable")))]
    pub protocols: Option<Vec<ObjectProtocol>>,
    /// The claim this bucket is bound to.
    pub bucket_claim_ref: BucketClaimReference,
    /// The store's id of an existing bucket: set, the Bucket is static.
    #[serde(
        default,
        rename = "existingBucketID",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(length(min = 1, max = 2048), regex(pattern = schema::ID_PATTERN), extend("x-kubernetes-validations" = schema::immutable("existingBucketID is immutable")))]
    pub existing_bucket_id: Option<String>,
}

fn bucket_spec_rules() -> serde_json::Value {
    serde_json::json!([
        schema::fixed_presence(
            "parameters",
            "parameters map cannot be added or removed after creation"
        ),
        schema::fixed_presence(
            "protocols",
            "protocols list cannot be added or removed after creation"
        ),
        schema::fixed_presence(
            "existingBucketID",
            "existingBucketID cannot be added or removed after creation"
        ),
    ])
}

/// The BucketClaim a Bucket is bound to.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = schema::no_removal(&["namespace", "uid"])))]
pub struct BucketClaimReference {
    /// The claim's name.
    #[schemars(length(min = 1, max = 253), extend("x-kubernetes-validations" = schema::immutable_resource_name("name is immutable")))]
    pub name: String,
    /// The claim's namespace.
    #[schemars(length(min = 1, max = 63), extend("x-kubernetes-validations" = claim_namespace_rules()))]
    pub namespace: String,
    /// The claim's UID; empty on a static Bucket until a claim binds it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 36, max = 36), regex(pattern = schema::UID_PATTERN), extend("x-kubernetes-validations" = schema::rules(&[("oldSelf == '' || self == oldSelf", "uid is immutable once set")])))]
    pub uid: Option<String>,
}

fn claim_namespace_rules() -> serde_json::Value {
    schema::rules(&[
        (
            "!format.dns1123Label().validate(self).hasValue()",
            "namespace must be a valid namespace name",
        ),
        ("self == oldSelf", "namespace is immutable"),
    ])
}

/// Observed state of a Bucket.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = bucket_status_rules()))]
pub struct BucketStatus {
    /// Whether the bucket exists in the store.
    pub ready_to_use: bool,
    /// The store's id of the bucket.
    #[serde(default, rename = "bucketID", skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 2048), regex(pattern = schema::ID_PATTERN), extend("x-kubernetes-validations" = schema::immutable("boundBucketName is immutable once set")))]
    pub bucket_id: Option<String>,
    /// Protocols the driver reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 3), extend("x-kubernetes-list-type" = "set"))]
    pub protocols: Option<Vec<ObjectProtocol>>,
    /// Non-secret bucket details, in the Secret's key format.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minProperties" = 1, "maxProperties" = 128))]
    pub bucket_info: Option<BTreeMap<String, String>>,
    /// What went wrong last, and what to do.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<TimestampedError>,
}

fn bucket_status_rules() -> serde_json::Value {
    schema::rules(&[
        (
            "!has(oldSelf.bucketID) || has(self.bucketID)",
            "bucketID cannot be removed once set",
        ),
        (
            "!has(oldSelf.protocols) || has(self.protocols)",
            "protocols cannot be removed once set",
        ),
    ])
}
