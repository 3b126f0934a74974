//! What the ObjectBucket records at bind, so that later decisions never
//! depend on a StorageClass that may have changed or gone: the class's
//! parameters, and the claim's `additionalConfig` last applied.

use std::collections::BTreeMap;

use k8s_openapi::api::storage::v1::StorageClass;

use super::ClassState;
use super::meta::annotation;
use crate::api::{
    APPLIED_CONFIG_ANNOTATION, CLASS_PARAMETERS_ANNOTATION, ObjectBucket, ObjectBucketClaim,
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
