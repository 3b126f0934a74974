//! BucketClaim: a namespace's request for a bucket.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::schema;
use super::{ObjectProtocol, TimestampedError};

/// A request for a bucket, new (`bucketClassName`) or existing
/// (`existingBucketName`: a Bucket an administrator made).
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "objectstorage.k8s.io",
    version = "v1alpha2",
    derive = "PartialEq",
    kind = "BucketClaim",
    plural = "bucketclaims",
    singular = "bucketclaim",
    namespaced,
    status = "BucketClaimStatus",
    annotation(
        "api-approved.kubernetes.io",
        "unapproved, experimental v1alpha2 changes"
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1, "x-kubernetes-validations" = claim_spec_rules()))]
pub struct BucketClaimSpec {
    /// The BucketClass of a new bucket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253), extend("x-kubernetes-validations" = schema::immutable_resource_name("bucketClassName is immutable")))]
    pub bucket_class_name: Option<String>,
    /// The name of an existing Bucket (not a bucket id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253), extend("x-kubernetes-validations" = schema::immutable_resource_name("existingBucketName is immutable")))]
    pub existing_bucket_name: Option<String>,
    /// Protocols the bucket must support.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 3), extend("x-kubernetes-list-type" = "set", "x-kubernetes-validations" = schema::immutable("protocols list is immutable")))]
    pub protocols: Option<Vec<ObjectProtocol>>,
}

fn claim_spec_rules() -> serde_json::Value {
    serde_json::json!([
        {
            "rule": "[has(self.bucketClassName),has(self.existingBucketName)].filter(x,x==true).size() == 1",
            "message": "exactly one of the fields in [bucketClassName existingBucketName] must be set"
        },
        schema::fixed_presence("bucketClassName", "bucketClassName cannot be added or removed after creation"),
        schema::fixed_presence("existingBucketName", "existingBucketName cannot be added or removed after creation"),
        schema::fixed_presence("protocols", "protocols list cannot be added or removed after creation"),
    ])
}

/// Observed state of a BucketClaim.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = schema::no_removal(&["boundBucketName", "protocols"])))]
pub struct BucketClaimStatus {
    /// The Bucket this claim is bound to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253), extend("x-kubernetes-validations" = schema::immutable_resource_name("boundBucketName is immutable once set")))]
    pub bound_bucket_name: Option<String>,
    /// Whether the bucket can be used.
    pub ready_to_use: bool,
    /// Protocols the bucket supports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 3), extend("x-kubernetes-list-type" = "set"))]
    pub protocols: Option<Vec<ObjectProtocol>>,
    /// What went wrong last, and what to do.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<TimestampedError>,
}
