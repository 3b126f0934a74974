//! Writes of the claim's Secret and ConfigMap: built from the claim, written
//! (created or made to match), adopted, released.
//!
//! They carry the claim's owner reference (controller, blockOwnerDeletion)
//! and our label, not our finalizer: the garbage collector deletes them once
//! the claim is gone, and drift repair writes again one deleted while the
//! claim lives. Children that older versions (and the Go library) wrote with
//! `objectbucket.io/finalizer` lose it when adopted, and when their claim
//! goes, so they never hang in Terminating (see `docs/design.md`).

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, Patch};
use kube::{Client, Resource, ResourceExt};

use super::{owner_reference, params, post_params, release_patch};
use crate::core::error::{Error, Result, is_status};
use crate::core::provisioner::Credentials;
use crate::obc::api::{
    CONFIG_MAP_HASH_ANNOTATION, Endpoint, ObjectBucketClaim, PROVISIONER_LABEL,
    SECRET_HASH_ANNOTATION, config_map_keys, secret_keys,
};

/// A child object (Secret or ConfigMap) named after the claim.
pub(crate) trait Child:
    Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
    + Clone
    + serde::Serialize
    + serde::de::DeserializeOwned
    + std::fmt::Debug
    + Send
    + Sync
    + 'static
{
    const KIND: &'static str;
    /// Whether the object's payload equals that of `desired`.
    fn same_payload(&self, desired: &Self) -> bool;
    /// Moves the payload of `desired` into `self`.
    fn take_payload(&mut self, desired: Self);
}

impl Child for Secret {
    const KIND: &'static str = "Secret";
    fn same_payload(&self, desired: &Self) -> bool {
        self.data == desired.data
            && hash_of(self, SECRET_HASH_ANNOTATION) == hash_of(desired, SECRET_HASH_ANNOTATION)
    }
    fn take_payload(&mut self, desired: Self) {
        take_hash(self, &desired, SECRET_HASH_ANNOTATION);
        self.data = desired.data;
        self.string_data = None;
    }
}

/// The data hash annotation `key` of `child`.
fn hash_of<'a>(child: &'a impl Resource, key: &str) -> Option<&'a str> {
    child
        .meta()
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

/// Copies `desired`'s data hash annotation `key` onto `child`.
fn take_hash(child: &mut impl Resource, desired: &impl Resource, key: &str) {
    if let Some(hash) = hash_of(desired, key) {
        child
            .meta_mut()
            .annotations
            .get_or_insert_default()
            .insert(key.to_owned(), hash.to_owned());
    }
}

/// SHA-256 (hex) of a Secret's data: keys and values, each followed by a
/// NUL, in key order.
pub(crate) fn data_hash(data: Option<&BTreeMap<String, ByteString>>) -> String {
    hash_pairs(
        data.into_iter()
            .flatten()
            .map(|(k, v)| (k.as_str(), v.0.as_slice())),
    )
}

/// SHA-256 (hex) of a ConfigMap's data, as [`data_hash`] of a Secret's.
pub(crate) fn text_hash(data: Option<&BTreeMap<String, String>>) -> String {
    hash_pairs(
        data.into_iter()
            .flatten()
            .map(|(k, v)| (k.as_str(), v.as_bytes())),
    )
}

fn hash_pairs<'a>(pairs: impl Iterator<Item = (&'a str, &'a [u8])>) -> String {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    for (key, value) in pairs {
        hasher.update(key.as_bytes());
        hasher.update([0]);
        hasher.update(value);
        hasher.update([0]);
    }
    hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

impl Child for ConfigMap {
    const KIND: &'static str = "ConfigMap";
    fn same_payload(&self, desired: &Self) -> bool {
        self.data == desired.data
            && hash_of(self, CONFIG_MAP_HASH_ANNOTATION)
                == hash_of(desired, CONFIG_MAP_HASH_ANNOTATION)
    }
    fn take_payload(&mut self, desired: Self) {
        take_hash(self, &desired, CONFIG_MAP_HASH_ANNOTATION);
        self.data = desired.data;
    }
}

fn child_meta(claim: &ObjectBucketClaim, label: &str) -> Result<ObjectMeta> {
    Ok(ObjectMeta {
        name: claim.metadata.name.clone(),
        namespace: claim.metadata.namespace.clone(),
        labels: Some(BTreeMap::from([(
            PROVISIONER_LABEL.to_owned(),
            label.to_owned(),
        )])),
        owner_references: Some(vec![owner_reference(claim)?]),
        ..Default::default()
    })
}

/// The claim's Secret.
pub(crate) fn secret(
    claim: &ObjectBucketClaim,
    label: &str,
    credentials: &Credentials,
) -> Result<Secret> {
    let mut secret = Secret {
        metadata: child_meta(claim, label)?,
        type_: Some("Opaque".to_owned()),
        data: Some(BTreeMap::from([
            (
                secret_keys::ACCESS_KEY_ID.to_owned(),
                ByteString(credentials.access_key_id.clone().into_bytes()),
            ),
            (
                secret_keys::SECRET_ACCESS_KEY.to_owned(),
                ByteString(credentials.secret_access_key.clone().into_bytes()),
            ),
        ])),
        ..Default::default()
    };
    let hash = data_hash(secret.data.as_ref());
    secret.metadata.annotations = Some(BTreeMap::from([(SECRET_HASH_ANNOTATION.to_owned(), hash)]));
    Ok(secret)
}

/// The claim's ConfigMap, from the ObjectBucket's endpoint.
pub(crate) fn config_map(
    claim: &ObjectBucketClaim,
    label: &str,
    endpoint: &Endpoint,
) -> Result<ConfigMap> {
    let mut data: BTreeMap<String, String> = endpoint.additional_config.clone();
    data.extend([
        (
            config_map_keys::BUCKET_HOST.to_owned(),
            endpoint.bucket_host.clone(),
        ),
        (
            config_map_keys::BUCKET_PORT.to_owned(),
            endpoint.bucket_port.to_string(),
        ),
        (
            config_map_keys::BUCKET_NAME.to_owned(),
            endpoint.bucket_name.clone(),
        ),
        (
            config_map_keys::BUCKET_REGION.to_owned(),
            endpoint.region.clone(),
        ),
        (
            config_map_keys::BUCKET_SUBREGION.to_owned(),
            endpoint.sub_region.clone(),
        ),
    ]);
    let mut metadata = child_meta(claim, label)?;
    metadata.annotations = Some(BTreeMap::from([(
        CONFIG_MAP_HASH_ANNOTATION.to_owned(),
        text_hash(Some(&data)),
    )]));
    Ok(ConfigMap {
        metadata,
        data: Some(data),
        ..Default::default()
    })
}

/// Creates the child, or makes an existing one that this claim owns carry
/// the desired payload. An update replaces the payload in one atomic write,
/// so a reader sees either the old credentials or the new, never none.
pub(crate) async fn write_child<K: Child>(
    client: &Client,
    claim: &ObjectBucketClaim,
    desired: K,
) -> Result<ObjectMeta> {
    let ns = claim
        .namespace()
        .ok_or(Error::MissingField("claim namespace"))?;
    let api: Api<K> = Api::namespaced(client.clone(), &ns);
    let name = claim.name_any();
    match api.create(&post_params(), &desired).await {
        Ok(created) => return Ok(created.meta().clone()),
        Err(e) if is_status(&e, 409) => {}
        Err(e) => return Err(Error::kube("create the claim's Secret or ConfigMap")(e)),
    }
    let mut existing = api
        .get(&name)
        .await
        .map_err(Error::kube("read the claim's existing Secret or ConfigMap"))?;
    if !crate::obc::reconcile::plan::owned_by(existing.meta(), claim) {
        return Err(Error::InvalidClaim(format!(
            "a {} named {name:?} exists and does not belong to this claim: rename or delete it",
            K::KIND
        )));
    }
    if existing.same_payload(&desired) {
        return Ok(existing.meta().clone());
    }
    existing.take_payload(desired);
    api.replace(&name, &post_params(), &existing)
        .await
        .map(|k| k.meta().clone())
        .map_err(Error::kube("update the claim's Secret or ConfigMap"))
}

/// Gives an existing child our label and takes our finalizer off it (older
/// versions put it there), in one patch guarded by `resourceVersion`.
pub(crate) async fn adopt_child<K: Child>(
    client: &Client,
    meta: &ObjectMeta,
    label: &str,
) -> Result<ObjectMeta> {
    let ns = meta
        .namespace
        .as_deref()
        .ok_or(Error::MissingField("namespace"))?;
    let name = meta.name.as_deref().ok_or(Error::MissingField("name"))?;
    let mut patch = release_patch(meta);
    patch["metadata"]["labels"] = serde_json::json!({ PROVISIONER_LABEL: label });
    Api::<K>::namespaced(client.clone(), ns)
        .patch(name, &params(), &Patch::Merge(patch))
        .await
        .map(|k| k.meta().clone())
        .map_err(Error::kube("take over the claim's Secret or ConfigMap"))
}

/// Removes the finalizer an older version put on a child, so that the
/// garbage collector can delete it once its claim is gone (or, if a user
/// deleted it, it goes now). Nothing is deleted here: the owner reference
/// does that.
pub(crate) async fn release_child<K: Child>(client: &Client, meta: &ObjectMeta) -> Result<()> {
    let ns = meta
        .namespace
        .as_deref()
        .ok_or(Error::MissingField("namespace"))?;
    let name = meta.name.as_deref().ok_or(Error::MissingField("name"))?;
    let api = Api::<K>::namespaced(client.clone(), ns);
    if !crate::obc::reconcile::plan::has_finalizer(meta) {
        return Ok(());
    }
    match api
        .patch(name, &params(), &Patch::Merge(release_patch(meta)))
        .await
    {
        Err(e) if is_status(&e, 404) => Ok(()),
        other => other.map(|_| ()).map_err(Error::kube(
            "remove the finalizer of the claim's Secret or ConfigMap",
        )),
    }
}
