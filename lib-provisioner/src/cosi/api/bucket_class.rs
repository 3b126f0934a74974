//! BucketClass: how Buckets of a class are provisioned (cluster-scoped).

use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::BucketDeletionPolicy;
use super::schema;

/// A class of dynamically provisioned buckets. Its spec never changes.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "objectstorage.k8s.io",
    version = "v1alpha2",
    derive = "PartialEq",
    kind = "BucketClass",
    plural = "bucketclasses",
    singular = "bucketclass",
    annotation(
        "api-approved.kubernetes.io",
        "unapproved, experimental v1alpha2 changes"
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = schema::immutable("BucketClass spec is immutable")))]
pub struct BucketClassSpec {
    /// The driver that provisions Buckets of this class.
    #[schemars(length(min = 1, max = 63), regex(pattern = schema::DRIVER_PATTERN))]
    pub driver_name: String,
    /// What becomes of a Bucket's bucket when its claim is deleted
    /// (copied to the Bucket).
    pub deletion_policy: BucketDeletionPolicy,
    /// Opaque parameters for the driver (copied to the Bucket).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = schema::params_map)]
    pub parameters: Option<BTreeMap<String, String>>,
}
