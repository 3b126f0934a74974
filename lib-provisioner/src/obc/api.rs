//! The `objectbucket.io/v1alpha1` API: ObjectBucketClaim and ObjectBucket.
//!
//! These types stay wire-compatible with the CRDs that Rook-Ceph and NooBaa
//! install (the Go `lib-bucket-provisioner`), so that claims provisioned there
//! can be taken over. Every field is optional or defaulted when read, because
//! objects written by older versions may lack any of them.
//!
//! ```
//! use lib_provisioner::api::{ObjectBucketClaim, ObjectBucketClaimSpec};
//!
//! let claim = ObjectBucketClaim::new("photos", ObjectBucketClaimSpec {
//!     storage_class_name: "s3-buckets".into(),
//!     generate_bucket_name: Some("photos".into()),
//!     ..Default::default()
//! });
//! assert_eq!(claim.spec.storage_class_name, "s3-buckets");
//! ```

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

// The connection details and the reclaim policy are neutral (COSI uses
// them too); they keep their paths here for the OBC API.
pub use crate::core::provisioner::{Endpoint, ReclaimPolicy};

/// API group of both resources.
pub const GROUP: &str = "objectbucket.io";
/// API version of both resources.
pub const VERSION: &str = "v1alpha1";
/// Finalizer the library puts on the claim, its ObjectBucket, Secret and
/// ConfigMap while the binding lives (the same one the Go library uses).
pub const FINALIZER: &str = "objectbucket.io/finalizer";
/// Label naming the provisioner on everything the library creates.
pub const PROVISIONER_LABEL: &str = "bucket-provisioner";
/// Annotation holding a bucket name generated from `generateBucketName`.
///
/// It is written (together with the finalizer) before the bucket is created,
/// so that a retry after a crash asks for the same bucket, never a second one.
pub const GENERATED_NAME_ANNOTATION: &str = "objectbucket.io/generated-bucket-name";
/// Annotation on an ObjectBucket recording whether its bucket was created for
/// the claim (`greenfield`) or already existed (`brownfield`).
///
/// Teardown reads it to choose Delete or Revoke even if the StorageClass has
/// changed or is gone since.
pub const BUCKET_ORIGIN_ANNOTATION: &str = "objectbucket.io/bucket-origin";

/// Annotation on an ObjectBucket created before its bucket, as the durable
/// record that a bucket may exist for the claim in its `claimRef`: if the
/// claim vanishes mid-provisioning, the ObjectBucket reconciler still knows
/// what to tear down. Removed when the provisioner's endpoint is recorded.
pub const RESERVED_ANNOTATION: &str = "objectbucket.io/reserved";
/// Annotation on an ObjectBucket recording its StorageClass's parameters at
/// bind, as a JSON object (StorageClass parameters are not secret; admin
/// credentials are referenced by name, never inlined).
///
/// Teardown and updates read this record rather than the class, so a
/// StorageClass edited or deleted after bind never changes what they do,
/// and never wedges a claim (or its namespace) in Terminating.
pub const CLASS_PARAMETERS_ANNOTATION: &str = "objectbucket.io/class-parameters";

/// Annotation on an ObjectBucket recording, as a JSON object, the claim's
/// `spec.additionalConfig` the provisioner last applied (at provisioning,
/// or by [`crate::core::provisioner::Provisioner::update`]). A claim whose config differs from
/// it is updated; `status.observedGeneration` advances only once it matches.
pub const APPLIED_CONFIG_ANNOTATION: &str = "objectbucket.io/applied-config";

/// Annotation on a claim naming the ObjectBucket chosen for it when the
/// default `obc-<namespace>-<name>` is taken by another claim or longer than
/// 253 characters: `obc-<claim uid>`. Written before the claim is
/// prepared, and copied into `spec.objectBucketName` with the finalizer,
/// before anything is created.
pub const OBJECT_BUCKET_NAME_ANNOTATION: &str = "objectbucket.io/object-bucket-name";

/// Annotation on the claim's Secret: the SHA-256 (hex) of the data the
/// library wrote. A Secret whose data no longer matches (edited by hand) is
/// restored with fresh credentials; the hash reveals nothing of them.
pub const SECRET_HASH_ANNOTATION: &str = "objectbucket.io/secret-hash";

/// Annotation on the claim's ConfigMap: the SHA-256 (hex) of the data the
/// library wrote. With the Secret's hash, it lets a restarted controller
/// tell from the watched metadata alone that a child still holds what the
/// library wrote (see `docs/design.md`, "Drift").
pub const CONFIG_MAP_HASH_ANNOTATION: &str = "objectbucket.io/configmap-hash";

/// Annotation a user sets on a Bound claim to rotate its credentials: any
/// new value (a timestamp, say: `kubectl annotate obc photos
/// objectbucket.io/rotate-credentials="$(date -u +%FT%TZ)" --overwrite`).
/// New credentials are issued, the Secret is switched to them, then the
/// previous ones are revoked; the `CredentialsRotated` condition and an
/// Event tell when it is done.
pub const ROTATE_ANNOTATION: &str = "objectbucket.io/rotate-credentials";

/// Annotation on an ObjectBucket: the rotation (the claim's
/// [`ROTATE_ANNOTATION`] value) under way. Written before new credentials
/// are issued, so a restart finishes it rather than starting another.
pub const ROTATION_PENDING_ANNOTATION: &str = "objectbucket.io/rotation-pending";

/// Annotation on an ObjectBucket: the access key id the pending rotation
/// replaces (not a secret), revoked once the Secret holds the new one.
/// Copied from [`ACCESS_KEY_ANNOTATION`] when the rotation starts, never
/// from the claim's Secret (which its tenant can write).
pub const ROTATION_PREVIOUS_KEY_ANNOTATION: &str = "objectbucket.io/rotation-previous-key";

/// Annotation on an ObjectBucket: the access key id the library gave the
/// claim's Secret (not a secret), recorded with the provisioner's
/// `additionalState` before every Secret write (bind, repair, rotation).
///
/// The ObjectBucket is cluster-scoped and tenants cannot edit it, so this
/// record, not the Secret, tells a rotation which key it replaces.
pub const ACCESS_KEY_ANNOTATION: &str = "objectbucket.io/access-key-id";

/// Annotation on an ObjectBucket: the last rotation done, or refused by the
/// provisioner (then the claim's `CredentialsRotated` condition says why).
pub const ROTATED_ANNOTATION: &str = "objectbucket.io/rotated";

/// StorageClass parameter that makes a class brownfield: the named bucket
/// exists and claims of the class only get access to it.
pub const BROWNFIELD_BUCKET_PARAMETER: &str = "bucketName";

/// Keys of the claim's Secret.
pub mod secret_keys {
    /// The access key id.
    pub const ACCESS_KEY_ID: &str = "AWS_ACCESS_KEY_ID";
    /// The secret access key.
    pub const SECRET_ACCESS_KEY: &str = "AWS_SECRET_ACCESS_KEY";
}

/// Keys of the claim's ConfigMap.
pub mod config_map_keys {
    /// Host name of the object store endpoint.
    pub const BUCKET_HOST: &str = "BUCKET_HOST";
    /// Port of the object store endpoint.
    pub const BUCKET_PORT: &str = "BUCKET_PORT";
    /// The bucket's name in the object store.
    pub const BUCKET_NAME: &str = "BUCKET_NAME";
    /// The bucket's region.
    pub const BUCKET_REGION: &str = "BUCKET_REGION";
    /// The bucket's sub-region.
    pub const BUCKET_SUBREGION: &str = "BUCKET_SUBREGION";
}

/// A request for a bucket, made in the namespace of the workload that uses it.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "objectbucket.io",
    version = "v1alpha1",
    kind = "ObjectBucketClaim",
    namespaced,
    shortname = "obc",
    shortname = "obcs",
    status = "ObjectBucketClaimStatus",
    printcolumn = r#"{"name":"StorageClass","type":"string","description":"StorageClass","jsonPath":".spec.storageClassName"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","description":"Phase","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Bucket","type":"string","description":"ObjectBucket bound to the claim","jsonPath":".spec.objectBucketName"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[kube(
    validation = pinned_once_bound("storageClassName", "the bucket lives in the store of the class it was provisioned from; create a new claim for another class"),
    validation = pinned_once_bound("bucketName", "the claim's bucket keeps its name; create a new claim for another bucket"),
    validation = pinned_once_bound("generateBucketName", "the bucket's name was generated from it once; create a new claim for another bucket"),
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = object_bucket_name_pinned()))]
pub struct ObjectBucketClaimSpec {
    /// StorageClass naming the provisioner and its parameters.
    #[serde(default)]
    pub storage_class_name: String,
    /// Exact name of the bucket. Caution: bucket names are global to the
    /// object store and may collide across namespaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bucket_name: Option<String>,
    /// Prefix of a generated bucket name (recommended): a hyphen and random
    /// characters are appended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generate_bucket_name: Option<String>,
    /// Name of the ObjectBucket this claim binds to; set by the provisioner
    /// when it first takes the claim, before anything is created (the
    /// claim is bound once its status says `Bound`). Cannot change once set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_bucket_name: Option<String>,
    /// Free-form settings handed to the provisioner (quotas, policies...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_config: Option<BTreeMap<String, String>>,
}

/// The apiserver's transition rule (CEL) on `spec.objectBucketName`: once
/// set, it cannot change, so a claim never moves to another ObjectBucket.
/// The provisioner sets it when it first protects the claim, before
/// anything exists; a user may set it when creating the claim; objects
/// written by the Go library or older versions are created as they are
/// (transition rules only judge updates).
fn object_bucket_name_pinned() -> serde_json::Value {
    serde_json::json!([{
        "rule": format!("!has(oldSelf.objectBucketName) || oldSelf.objectBucketName == '' || {}", same("objectBucketName")),
        "message": "spec.objectBucketName cannot change once set: the claim is bound, or being bound, to that ObjectBucket; create a new claim to get another bucket",
    }])
}

/// The apiserver's transition rule (CEL, on the whole claim: it reads the
/// status) on a field that chose the claim's bucket: it cannot change
/// while the claim's status says Bound. The status is the provisioner's
/// alone (tenants are not granted `objectbucketclaims/status`), and it is
/// written Bound only once the bucket, its ObjectBucket and the claim's
/// Secret and ConfigMap exist. Before that (a claim refused, or waiting),
/// the claim stays fixable: its class or bucket name can still change.
/// `spec.objectBucketName` no longer tells (it is set before anything
/// exists). A bound claim whose status shows a problem may be edited; the
/// provisioner still follows its ObjectBucket (a changed class is refused,
/// `StorageClassChanged`; a bucket name is the ObjectBucket's).
fn pinned_once_bound(field: &str, why: &str) -> kube::core::Rule {
    kube::core::Rule::new(format!(
        "!has(oldSelf.status) || !has(oldSelf.status.phase) || oldSelf.status.phase != 'Bound' || {}",
        same(&format!("spec.{field}"))
    ))
    .message(
        format!("spec.{field} cannot change after the claim is bound (its status is Bound): {why}")
            .as_str(),
    )
}

/// CEL: the field (a path from `self`) is the same in `self` and `oldSelf`,
/// an absent one counting as empty.
fn same(path: &str) -> String {
    let (parent, field) = path.rsplit_once('.').unwrap_or(("", path));
    let at = |root: &str| {
        let object = if parent.is_empty() {
            root.to_owned()
        } else {
            format!("{root}.{parent}")
        };
        format!("(has({object}.{field}) ? {object}.{field} : '')")
    };
    format!("{} == {}", at("self"), at("oldSelf"))
}

/// Observed state of a claim. Written only by the provisioner.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObjectBucketClaimStatus {
    /// `Pending`, `Bound`, `Released` or `Failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<ClaimPhase>,
    /// Why the claim is in its phase, and what to do about it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Conditions (`Bound`) with reason and message.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The `metadata.generation` the status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// Lifecycle phase of a claim.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum ClaimPhase {
    /// Waiting: for provisioning to finish, or for a fault to clear.
    Pending,
    /// The bucket exists and the Secret and ConfigMap are in place.
    Bound,
    /// The bucket was released (reclaim policy Retain).
    Released,
    /// The claim cannot be served as written; its message says how to fix it.
    Failed,
    /// A phase written by another tool; the library treats it as unset.
    #[serde(other)]
    Unknown,
}

impl ClaimPhase {
    /// The phase as written in the API.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "Pending",
            Self::Bound => "Bound",
            Self::Released => "Released",
            Self::Failed => "Failed",
            Self::Unknown => "Unknown",
        }
    }
}

/// A provisioned bucket and how to reach it. Cluster-scoped, named
/// `obc-<claim namespace>-<claim name>`.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "objectbucket.io",
    version = "v1alpha1",
    kind = "ObjectBucket",
    shortname = "ob",
    shortname = "obs",
    status = "ObjectBucketStatus",
    printcolumn = r#"{"name":"StorageClass","type":"string","description":"StorageClass","jsonPath":".spec.storageClassName"}"#,
    printcolumn = r#"{"name":"ClaimNamespace","type":"string","description":"ClaimNamespace","jsonPath":".spec.claimRef.namespace"}"#,
    printcolumn = r#"{"name":"ClaimName","type":"string","description":"ClaimName","jsonPath":".spec.claimRef.name"}"#,
    printcolumn = r#"{"name":"ReclaimPolicy","type":"string","description":"ReclaimPolicy","jsonPath":".spec.reclaimPolicy"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","description":"Phase","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Bucket","type":"string","description":"Bucket name in the object store","jsonPath":".spec.endpoint.bucketName"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ObjectBucketSpec {
    /// StorageClass the bucket was provisioned from.
    #[serde(default)]
    pub storage_class_name: String,
    /// What happens to the bucket when its claim is deleted.
    #[serde(default)]
    pub reclaim_policy: ReclaimPolicy,
    /// The claim this bucket is bound to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim_ref: Option<ObjectReference>,
    /// Where the bucket is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<Endpoint>,
    /// Provisioner-specific state kept for teardown (never credentials).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_state: Option<BTreeMap<String, String>>,
    /// Provisioner-specific authentication details written by other
    /// implementations. This library never stores credentials here: they
    /// live only in the claim's Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "free_form_object")]
    pub authentication: Option<serde_json::Value>,
}

fn free_form_object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true
    })
}

/// Observed state of an ObjectBucket.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObjectBucketStatus {
    /// `Bound`, `Released` or `Failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<BucketPhase>,
}

/// Lifecycle phase of an ObjectBucket.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum BucketPhase {
    /// Bound to its claim.
    Bound,
    /// Its claim is gone and the bucket was retained.
    Released,
    /// Teardown failed; see the claim's events.
    Failed,
    /// A phase written by another tool.
    #[serde(other)]
    Unknown,
}

/// Where the bucket of an ObjectBucket came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BucketOrigin {
    /// Created for the claim: teardown may delete it.
    Greenfield,
    /// Existed before the claim: teardown only revokes access.
    Brownfield,
}

impl BucketOrigin {
    /// The annotation value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Greenfield => "greenfield",
            Self::Brownfield => "brownfield",
        }
    }

    /// Parses the annotation value.
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "greenfield" => Some(Self::Greenfield),
            "brownfield" => Some(Self::Brownfield),
            _ => None,
        }
    }
}

impl ObjectBucket {
    /// The bucket's name in the object store, if recorded.
    pub fn bucket_name(&self) -> Option<&str> {
        self.spec
            .endpoint
            .as_ref()
            .map(|e| e.bucket_name.as_str())
            .filter(|n| !n.is_empty())
    }
}

/// The CRDs as YAML documents, keyed by file name under `crds/`. Needs the
/// `crd-yaml` feature (which brings `serde_yaml`); without it, render
/// `kube::CustomResourceExt::crd()` with the serializer of your choice.
///
/// ```
/// let files = lib_provisioner::api::crd_files();
/// assert!(files.iter().any(|(name, yaml)| name.contains("objectbucketclaims") && yaml.contains("objectBucketName")));
/// ```
#[cfg(feature = "crd-yaml")]
pub fn crd_files() -> Vec<(&'static str, String)> {
    use kube::CustomResourceExt;
    let render = |crd: k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition| {
        let yaml = serde_yaml::to_string(&crd).unwrap_or_else(|e| format!("# could not render: {e}\n"));
        format!(
            "# Generated from lib-provisioner/src/obc/api.rs by `cargo run -p obc-tests --bin crdgen`.\n# Do not edit: a test fails when this file drifts from the types.\n---\n{yaml}"
        )
    };
    vec![
        (
            "objectbucket.io_objectbucketclaims.yaml",
            render(ObjectBucketClaim::crd()),
        ),
        (
            "objectbucket.io_objectbuckets.yaml",
            render(ObjectBucket::crd()),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_phases_read_as_unknown() {
        let status: ObjectBucketClaimStatus =
            serde_json::from_value(serde_json::json!({"phase": "bound"})).expect("parses");
        assert_eq!(status.phase, Some(ClaimPhase::Unknown));
    }

    #[test]
    fn claims_written_by_older_versions_parse() {
        // No storageClassName, unknown status fields: still readable.
        let claim: ObjectBucketClaim = serde_json::from_value(serde_json::json!({
            "apiVersion": "objectbucket.io/v1alpha1",
            "kind": "ObjectBucketClaim",
            "metadata": {"name": "a", "namespace": "b"},
            "spec": {"generateBucketName": "x", "bucketName": "x-abcde"},
            "status": {"phase": "Bound", "legacy": true}
        }))
        .expect("parses");
        assert_eq!(claim.spec.bucket_name.as_deref(), Some("x-abcde"));
        assert_eq!(claim.spec.storage_class_name, "");
    }

    #[test]
    fn reclaim_policy_from_class() {
        assert_eq!(ReclaimPolicy::from_class(None), Ok(ReclaimPolicy::Delete));
        assert_eq!(
            ReclaimPolicy::from_class(Some("Retain")),
            Ok(ReclaimPolicy::Retain)
        );
        assert!(ReclaimPolicy::from_class(Some("Recycle")).is_err());
    }
}
