//! BucketAccess: a namespace's request for credentials to its claims'
//! buckets.

use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::schema;
use super::{AuthenticationType, BucketAccessMode, ObjectProtocol, TimestampedError};

/// Access to the buckets of BucketClaims in the same namespace; each
/// claim's credentials land in the Secret it names.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "objectstorage.k8s.io",
    version = "v1alpha2",
    derive = "PartialEq",
    kind = "BucketAccess",
    plural = "bucketaccesses",
    singular = "bucketaccess",
    namespaced,
    status = "BucketAccessStatus",
    annotation(
        "api-approved.kubernetes.io",
        "unapproved, experimental v1alpha2 changes"
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [schema::fixed_presence("serviceAccountName", "serviceAccountName cannot be added or removed after creation")]))]
pub struct BucketAccessSpec {
    /// The claims (in this namespace) to reach, each with its mode and
    /// Secret.
    #[schemars(length(min = 1, max = 128), extend(
        "x-kubernetes-list-type" = "map",
        "x-kubernetes-list-map-keys" = ["bucketClaimName"],
        "x-kubernetes-validations" = schema::immutable("bucketClaims list is immutable")
    ))]
    pub bucket_claims: Vec<BucketClaimAccess>,
    /// The BucketAccessClass.
    #[schemars(length(min = 1, max = 253), extend("x-kubernetes-validations" = schema::immutable("bucketAccessClassName is immutable")))]
    pub bucket_access_class_name: String,
    /// The protocol of the credentials.
    #[schemars(extend("x-kubernetes-validations" = schema::immutable("protocol is immutable")))]
    pub protocol: ObjectProtocol,
    /// The workload's ServiceAccount (needed by `ServiceAccount` classes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253), extend("x-kubernetes-validations" = schema::immutable("serviceAccountName is immutable")))]
    pub service_account_name: Option<String>,
}

/// One claim a BucketAccess reaches.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BucketClaimAccess {
    /// A BucketClaim in the BucketAccess's namespace.
    #[schemars(length(min = 1, max = 253), extend("x-kubernetes-validations" = schema::resource_name()))]
    pub bucket_claim_name: String,
    /// How the bucket may be used.
    pub access_mode: BucketAccessMode,
    /// The Secret COSI writes the credentials into (it must not exist, or
    /// be this BucketAccess's).
    #[schemars(length(min = 1, max = 253), extend("x-kubernetes-validations" = schema::resource_name()))]
    pub access_secret_name: String,
}

/// Observed state of a BucketAccess.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = schema::no_removal(&["accountID", "accessedBuckets", "driverName", "authenticationType", "parameters"])))]
pub struct BucketAccessStatus {
    /// Whether the Secrets hold working credentials.
    pub ready_to_use: bool,
    /// The driver's id of the account (written by the driver role).
    #[serde(default, rename = "accountID", skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 2048), regex(pattern = schema::ID_PATTERN), extend("x-kubernetes-validations" = schema::immutable("accountId is immutable once set")))]
    pub account_id: Option<String>,
    /// The buckets reached, in `spec.bucketClaims` order (written by the
    /// binding role: the hand-off to the driver role).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 128), extend(
        "x-kubernetes-list-type" = "map",
        "x-kubernetes-list-map-keys" = ["bucketName"],
        "x-kubernetes-validations" = schema::immutable("accessedBuckets is immutable once set")
    ))]
    pub accessed_buckets: Option<Vec<AccessedBucket>>,
    /// The class's driver (the driver role selects on it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63), regex(pattern = schema::DRIVER_PATTERN), extend("x-kubernetes-validations" = schema::immutable("driverName is immutable once set")))]
    pub driver_name: Option<String>,
    /// The class's authentication type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = schema::immutable("authenticationType is immutable once set")))]
    pub authentication_type: Option<AuthenticationType>,
    /// The class's parameters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = schema::params_map, extend("x-kubernetes-validations" = schema::immutable("accessedBuckets is immutable once set")))]
    pub parameters: Option<BTreeMap<String, String>>,
    /// What went wrong last, and what to do.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<TimestampedError>,
}

/// A bucket a BucketAccess reaches.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AccessedBucket {
    /// The Bucket's name.
    #[schemars(length(min = 1, max = 253), extend("x-kubernetes-validations" = schema::resource_name()))]
    pub bucket_name: String,
    /// The store's id of the bucket.
    #[serde(rename = "bucketID")]
    #[schemars(length(min = 1, max = 2048), regex(pattern = schema::ID_PATTERN))]
    pub bucket_id: String,
    /// The claim it was reached through.
    #[schemars(length(min = 1, max = 253), extend("x-kubernetes-validations" = schema::resource_name()))]
    pub bucket_claim_name: String,
}
