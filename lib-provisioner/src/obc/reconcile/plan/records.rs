//! What the ObjectBucket records, so that later decisions never depend on
//! a StorageClass that may have changed or gone, nor on what a tenant wrote:
//! the class's parameters and the claim's `additionalConfig` last applied
//! (at bind), the access key id the Secret was given and the provisioner's
//! state (before every Secret write).

use std::collections::BTreeMap;

use k8s_openapi::api::storage::v1::StorageClass;

use super::meta::{annotation, holds_bucket_of};
use super::{ClassState, Observed};
use crate::obc::api::{
    ACCESS_KEY_ANNOTATION, APPLIED_CONFIG_ANNOTATION, CLASS_PARAMETERS_ANNOTATION, ObjectBucket,
    ObjectBucketClaim,
};

/// Annotations to write on an ObjectBucket: key and value.
pub(crate) type Records = Vec<(&'static str, String)>;

/// A string map as the JSON object the annotations hold (keys sorted, so
/// the same map always gives the same text).
pub(crate) fn encode(map: &BTreeMap<String, String>) -> String {
    serde_json::to_string(map).unwrap_or_else(|_| "{}".to_owned())
}

fn decode(ob: &ObjectBucket, key: &str) -> Option<BTreeMap<String, String>> {
    serde_json::from_str(annotation(&ob.metadata, key)?).ok()
}

/// The class parameters recorded on the ObjectBucket, if any.
pub(crate) fn recorded_parameters(ob: &ObjectBucket) -> Option<BTreeMap<String, String>> {
    decode(ob, CLASS_PARAMETERS_ANNOTATION)
}

/// The parameters a teardown (or an update) of `ob` uses: its record, else
/// the class if it is still ours (ObjectBuckets bound by older versions),
/// else `None`: unknown, the class is gone and nothing recorded them.
pub(crate) fn parameters_for(
    ob: Option<&ObjectBucket>,
    class: &ClassState,
) -> Option<BTreeMap<String, String>> {
    if let Some(recorded) = ob.and_then(recorded_parameters) {
        return Some(recorded);
    }
    match (class, ob) {
        // Only the class the ObjectBucket was made from: a claim whose
        // storageClassName was edited names another store.
        (ClassState::Ours(class), Some(ob)) if !is_class_of(class, ob) => None,
        (ClassState::Ours(class), _) => Some(class.parameters.clone().unwrap_or_default()),
        _ => None,
    }
}

fn is_class_of(class: &StorageClass, ob: &ObjectBucket) -> bool {
    class.metadata.name.as_deref() == Some(ob.spec.storage_class_name.as_str())
}

/// The claim's `additionalConfig` (empty if unset).
pub(crate) fn wanted_config(claim: &ObjectBucketClaim) -> BTreeMap<String, String> {
    claim.spec.additional_config.clone().unwrap_or_default()
}

/// The `additionalConfig` last applied to `ob`'s bucket, if recorded.
pub(crate) fn applied_config(ob: &ObjectBucket) -> Option<BTreeMap<String, String>> {
    decode(ob, APPLIED_CONFIG_ANNOTATION)
}

/// The records a new ObjectBucket starts with: its class's parameters and
/// the config provisioning applies.
pub(crate) fn initial(claim: &ObjectBucketClaim, class: &ClassState) -> Records {
    let mut records = vec![(APPLIED_CONFIG_ANNOTATION, encode(&wanted_config(claim)))];
    if let ClassState::Ours(class) = class {
        records.push((
            CLASS_PARAMETERS_ANNOTATION,
            encode(&class.parameters.clone().unwrap_or_default()),
        ));
    }
    records
}

/// Records an ObjectBucket written by an older version lacks and that can
/// be known now: the class's parameters while the class is still ours, and
/// the claim's config as the one applied (it was, when the bucket was
/// provisioned; nothing better is known).
pub(crate) fn missing(ob: &ObjectBucket, claim: &ObjectBucketClaim, class: &ClassState) -> Records {
    let mut records = Records::new();
    if annotation(&ob.metadata, APPLIED_CONFIG_ANNOTATION).is_none() {
        records.push((APPLIED_CONFIG_ANNOTATION, encode(&wanted_config(claim))));
    }
    if let ClassState::Ours(class) = class
        && is_class_of(class, ob)
        && annotation(&ob.metadata, CLASS_PARAMETERS_ANNOTATION).is_none()
    {
        records.push((
            CLASS_PARAMETERS_ANNOTATION,
            encode(&class.parameters.clone().unwrap_or_default()),
        ));
    }
    records
}

/// The access key id the library gave the claim's Secret, as recorded on
/// the ObjectBucket; `None` for ObjectBuckets of older versions.
pub(crate) fn recorded_key(ob: &ObjectBucket) -> Option<&str> {
    annotation(&ob.metadata, ACCESS_KEY_ANNOTATION)
}

/// Access obtained in this pass is about to be written into the Secret and
/// the ObjectBucket does not record it yet (its key id, or exactly its
/// state): it is recorded first, so that a crash after the Secret's write
/// never leaves the ObjectBucket naming credentials the claim no longer has.
pub(crate) fn access_unrecorded(o: &Observed, ob: &ObjectBucket) -> bool {
    let Some(access) = o.access.as_ref().filter(|_| !o.secret_synced) else {
        return false;
    };
    let state = ob.spec.additional_state.clone().unwrap_or_default();
    recorded_key(ob) != Some(access.credentials.access_key_id.as_str())
        || state != access.additional_state
}

/// Whether the bucket has the claim's current `additionalConfig`: nothing
/// recorded (older ObjectBuckets) counts as applied.
pub(crate) fn config_applied(o: &Observed) -> bool {
    o.ob.as_ref()
        .and_then(applied_config)
        .is_none_or(|applied| applied == wanted_config(&o.claim))
}

/// The claim's status keeps the `observedGeneration` it has: the claim is
/// bound and its current `additionalConfig` is not applied (refused,
/// pending, or not tried yet). A problem shown meanwhile (an API error, a
/// failed Secret repair), or the Bound status written after it, must not
/// say that spec was observed, nor that its config is applied.
///
/// Bound is read from the ObjectBucket (its bucket made for this claim),
/// not from `spec.objectBucketName`, which this version writes before
/// anything exists and which the claim's tenant may write.
pub(crate) fn holds_generation(o: &Observed) -> bool {
    o.ob.as_ref()
        .is_some_and(|ob| holds_bucket_of(ob, &o.claim))
        && !config_applied(o)
}
