//! Every Kubernetes write of the COSI controllers, one function each, each
//! idempotent on its own. Every patch computed from what was read is
//! guarded by that read's `resourceVersion` (a 409 re-plans), as the OBC
//! writes are: an object deleted and re-created under the same name (a new
//! UID, another spec) never receives what was decided for the old one.
//! Deletions carry the UID. (A status patch cannot carry a UID
//! precondition: the apiserver copies `metadata` from the stored object on
//! the status subresource; a resourceVersion is unique across objects, so
//! it covers the UID too.)

use kube::api::{Api, DeleteParams, Patch, Preconditions};
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;
use tracing::debug;

use crate::core::error::{Error, is_status};
use crate::core::writes::{params, post_params};
use crate::cosi::answer;
use crate::cosi::api::FINALIZER;

/// Bounds every COSI object type the writes take.
pub(crate) trait Object:
    Resource<DynamicType = ()> + Clone + DeserializeOwned + Serialize + std::fmt::Debug + Send + 'static
{
}
impl<K> Object for K where
    K: Resource<DynamicType = ()>
        + Clone
        + DeserializeOwned
        + Serialize
        + std::fmt::Debug
        + Send
        + 'static
{
}

fn logged(action: &'static str, name: &str) {
    // The marker the replica tests count: every write, failed ones too.
    debug!(act = "kubernetes-write", action, object = name, "writing");
}

/// Adds COSI's finalizer.
pub(crate) async fn add_finalizer<K: Object>(
    api: &Api<K>,
    obj: &K,
    action: &'static str,
) -> Result<(), Error> {
    let mut list = obj.finalizers().to_vec();
    if list.iter().any(|f| f == FINALIZER) {
        return Ok(());
    }
    list.push(FINALIZER.to_owned());
    patch_finalizers(api, obj, list, action).await
}

/// Removes COSI's finalizer; gone already is done.
pub(crate) async fn remove_finalizer<K: Object>(
    api: &Api<K>,
    obj: &K,
    action: &'static str,
) -> Result<(), Error> {
    let list: Vec<String> = obj
        .finalizers()
        .iter()
        .filter(|f| *f != FINALIZER)
        .cloned()
        .collect();
    match patch_finalizers(api, obj, list, action).await {
        Err(Error::Kube { source, .. }) if is_status(&source, 404) => Ok(()),
        other => other,
    }
}

async fn patch_finalizers<K: Object>(
    api: &Api<K>,
    obj: &K,
    list: Vec<String>,
    action: &'static str,
) -> Result<(), Error> {
    let patch =
        json!({"metadata": {"finalizers": list, "resourceVersion": obj.resource_version()}});
    patch_raw(api, &obj.name_any(), &patch, action).await
}

/// Sets an annotation (merge patch; guarded by resourceVersion).
pub(crate) async fn annotate<K: Object>(
    api: &Api<K>,
    obj: &K,
    key: &str,
    value: &str,
    action: &'static str,
) -> Result<(), Error> {
    let patch = json!({"metadata": {"annotations": {key: value}, "resourceVersion": obj.resource_version()}});
    patch_raw(api, &obj.name_any(), &patch, action).await
}

/// A merge patch of `spec` fields, guarded by resourceVersion.
pub(crate) async fn patch_spec<K: Object>(
    api: &Api<K>,
    obj: &K,
    spec: serde_json::Value,
    action: &'static str,
) -> Result<(), Error> {
    let patch = json!({"metadata": {"resourceVersion": obj.resource_version()}, "spec": spec});
    patch_raw(api, &obj.name_any(), &patch, action).await
}

/// A merge patch of the status subresource of `obj` as it was read,
/// guarded by its resourceVersion.
pub(crate) async fn patch_status<K: Object>(
    api: &Api<K>,
    obj: &K,
    patch: &serde_json::Value,
    action: &'static str,
) -> Result<(), Error> {
    let patch = guarded(obj, patch);
    merge(api, &obj.name_any(), Part::Status, &patch, action).await
}

/// `patch` with `obj`'s resourceVersion as its precondition.
pub(crate) fn guarded<K: Object>(obj: &K, patch: &serde_json::Value) -> serde_json::Value {
    let mut patch = patch.clone();
    if let Some(map) = patch.as_object_mut() {
        let meta = map.entry("metadata").or_insert_with(|| json!({}));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert("resourceVersion".into(), json!(obj.resource_version()));
        }
    }
    patch
}

/// Creates an object; one that exists already is left to the next plan
/// (which checks whose it is).
pub(crate) async fn create<K: Object>(
    api: &Api<K>,
    obj: &K,
    action: &'static str,
) -> Result<(), Error> {
    logged(action, &obj.name_any());
    let created = api.create(&post_params(), obj).await.map(answer::offer);
    settled(created, 409, action)
}

/// Deletes the object of this UID; gone already is done.
pub(crate) async fn delete<K: Object>(
    api: &Api<K>,
    obj: &K,
    action: &'static str,
) -> Result<(), Error> {
    let name = obj.name_any();
    logged(action, &name);
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: obj.uid(),
            resource_version: None,
        }),
        ..Default::default()
    };
    // What this pass last wrote of it is no longer what is stored; one
    // that waits for its finalizers is what is (deleting: the next read of
    // it is a GET, not a second delete on a cache that lags).
    answer::forget_other::<K>(obj.namespace().as_deref(), &name);
    let deleted = api.delete(&name, &params).await;
    settled(deleted.map(|d| d.map_left(answer::offer)), 404, action)
}

/// A write's result, where status `already` says it was done already.
fn settled<T>(
    result: Result<T, kube::Error>,
    already: u16,
    action: &'static str,
) -> Result<(), Error> {
    match result {
        Err(e) if is_status(&e, already) => Ok(()),
        other => other.map(|_| ()).map_err(Error::kube(action)),
    }
}

/// Reads an object; absent is `None`.
pub(crate) async fn get<K: Object>(
    api: &Api<K>,
    name: &str,
    action: &'static str,
) -> Result<Option<K>, Error> {
    api.get_opt(name).await.map_err(Error::kube(action))
}

/// A merge patch of a whole object (a Secret's data, say); every other
/// patch of an object's metadata or spec here goes through it.
pub(crate) async fn patch_raw<K: Object>(
    api: &Api<K>,
    name: &str,
    patch: &serde_json::Value,
    action: &'static str,
) -> Result<(), Error> {
    merge(api, name, Part::Object, patch, action).await
}

/// What a merge patch writes: the object, or its status subresource.
enum Part {
    Object,
    Status,
}

/// Every merge patch of the COSI controllers; its answer is offered to
/// the pass ([`answer::offer`]).
async fn merge<K: Object>(
    api: &Api<K>,
    name: &str,
    part: Part,
    patch: &serde_json::Value,
    action: &'static str,
) -> Result<(), Error> {
    logged(action, name);
    let (params, patch) = (params(), Patch::Merge(patch));
    match part {
        Part::Object => api.patch(name, &params, &patch).await,
        Part::Status => api.patch_status(name, &params, &patch).await,
    }
    .map(answer::offer)
    .map_err(Error::kube(action))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cosi::api::BucketAccess;

    /// Issue 36, item 4: a status write decided on one read of an object
    /// is refused (409) by any other version of it, a replacement under
    /// the same name included.
    #[test]
    fn a_status_patch_carries_the_resource_version_it_was_decided_on() {
        let mut access = BucketAccess::new(
            "a",
            serde_json::from_value(json!({
                "bucketClaims": [], "bucketAccessClassName": "c", "protocol": "S3"
            }))
            .expect("spec"),
        );
        access.metadata.resource_version = Some("41".into());
        let patch = guarded(&access, &json!({"status": {"readyToUse": true}}));
        assert_eq!(
            patch,
            json!({"metadata": {"resourceVersion": "41"}, "status": {"readyToUse": true}})
        );
    }
}
