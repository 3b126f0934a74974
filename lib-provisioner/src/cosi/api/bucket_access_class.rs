//! BucketAccessClass: how access to buckets is granted (cluster-scoped).

use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::schema;
use super::{AuthenticationType, BucketAccessMode, MultiBucketAccess};

/// A class of bucket access. Its spec never changes.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "objectstorage.k8s.io",
    version = "v1alpha2",
    derive = "PartialEq",
    kind = "BucketAccessClass",
    plural = "bucketaccessclasses",
    singular = "bucketaccessclass",
    annotation(
        "api-approved.kubernetes.io",
        "unapproved, experimental v1alpha2 changes"
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = schema::immutable("BucketAccessClass spec is immutable")))]
pub struct BucketAccessClassSpec {
    /// The driver that grants access of this class.
    #[schemars(length(min = 1, max = 63), regex(pattern = schema::DRIVER_PATTERN))]
    pub driver_name: String,
    /// Keys in the Secret, or the workload's ServiceAccount.
    pub authentication_type: AuthenticationType,
    /// Opaque parameters for the driver.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = schema::params_map)]
    pub parameters: Option<BTreeMap<String, String>>,
    /// Access modes a BucketAccess of this class may not ask for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 3), extend("x-kubernetes-list-type" = "set"))]
    pub disallowed_bucket_access_modes: Option<Vec<BucketAccessMode>>,
    /// Whether one BucketAccess may reach several buckets (omitted:
    /// `SingleBucket`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multi_bucket_access: Option<MultiBucketAccess>,
}

impl BucketAccessClassSpec {
    /// Whether a BucketAccess of this class may name several claims.
    pub fn allows_multiple_buckets(&self) -> bool {
        self.multi_bucket_access == Some(MultiBucketAccess::MultipleBuckets)
    }
}
