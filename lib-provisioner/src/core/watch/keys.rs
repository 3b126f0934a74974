//! The keys triggers hand a controller's scheduler: name and namespace only.
//!
//! kube-runtime's own triggers make heavier keys. `trigger_self` and
//! `reconcile_all_on` copy the object's resourceVersion and UID into its
//! `ObjectRef`; `owns` and `watches` also box the related object's erased
//! reference (its kind's five names, its own four strings) as the reason.
//! The scheduler keeps two copies of each key it waits on (its map and its
//! delay queue), and at a restart or a takeover it waits on every cached
//! object at once: at 100,000 claims the heavy keys were most of the
//! memory beyond the caches at that peak. The library's reconcilers look
//! every object up in their cache by name and namespace and read no reason,
//! so their triggers all go through `reconcile_on` with these keys.

use futures::stream::{self, Stream, StreamExt};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::Resource;
use kube::runtime::reflector::{ObjectRef, Store};

/// `obj`'s key: its name and namespace, no version, UID or reason.
pub(crate) fn key_of<K, O>(obj: &O) -> ObjectRef<K>
where
    K: Resource<DynamicType = ()>,
    O: Resource,
{
    let meta = obj.meta();
    named(
        meta.name.as_deref().unwrap_or_default(),
        meta.namespace.as_deref(),
    )
}

/// The key of `name` in `ns` (`None`: cluster-scoped).
fn named<K: Resource<DynamicType = ()>>(name: &str, ns: Option<&str>) -> ObjectRef<K> {
    let key = ObjectRef::new(name);
    match ns {
        Some(ns) => key.within(ns),
        None => key,
    }
}

/// An object's name and namespace as one string: `namespace/name`, or
/// `name` for a cluster-scoped object (neither may hold a `/`). What the
/// library keeps per object where an `ObjectRef`'s four strings cost too
/// much ([`crate::core::watch::meter`], the OBC children's cache).
pub(crate) fn packed(ns: Option<&str>, name: &str) -> String {
    match ns {
        Some(ns) => format!("{ns}/{name}"),
        None => name.to_owned(),
    }
}

/// The namespace (`None`: cluster-scoped) and name of a [`packed`] key.
pub(crate) fn unpacked(key: &str) -> (Option<&str>, &str) {
    match key.split_once('/') {
        Some((ns, name)) => (Some(ns), name),
        None => (None, key),
    }
}

/// The keys of the owners of kind `Owner` among a child's owner
/// references `refs` (in the child's namespace `ns`), as kube-runtime's
/// `owns` finds them.
pub(crate) fn owner_keys<Owner>(ns: Option<&str>, refs: &[OwnerReference]) -> Vec<ObjectRef<Owner>>
where
    Owner: Resource<DynamicType = ()>,
{
    let (kind, api_version) = (Owner::kind(&()), Owner::api_version(&()));
    refs.iter()
        .filter(|r| r.kind == kind && r.api_version == api_version)
        .map(|r| named(&r.name, ns))
        .collect()
}

/// Every object in `store`, each time `signal` fires (kube-runtime's
/// `reconcile_all_on`, with these keys).
pub(crate) fn all_keys_on<K>(
    signal: impl Stream<Item = ()> + Send + 'static,
    store: Store<K>,
) -> impl Stream<Item = ObjectRef<K>> + Send + 'static
where
    K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
{
    signal.flat_map(move |()| {
        let keys: Vec<ObjectRef<K>> = store.state().iter().map(|o| key_of(o.as_ref())).collect();
        stream::iter(keys)
    })
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::runtime::reflector;
    use kube::runtime::watcher;

    use super::*;

    fn map(name: &str, ns: Option<&str>) -> ConfigMap {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(name.into());
        cm.metadata.namespace = ns.map(Into::into);
        cm.metadata.uid = Some("u-1".into());
        cm.metadata.resource_version = Some("7".into());
        cm
    }

    #[test]
    fn a_key_holds_name_and_namespace_only() {
        let key: ObjectRef<ConfigMap> = key_of(&map("a", Some("ns")));
        assert_eq!(
            (key.name.as_str(), key.namespace.as_deref()),
            ("a", Some("ns"))
        );
        assert_eq!(key.extra.uid, None);
        assert_eq!(key.extra.resource_version, None);
        // The same entry as kube-runtime's full reference.
        assert_eq!(key, ObjectRef::from_obj(&map("a", Some("ns"))));
        let cluster: ObjectRef<ConfigMap> = key_of(&map("b", None));
        assert_eq!(cluster.namespace, None);
    }

    #[test]
    fn a_packed_key_unpacks_to_its_namespace_and_name() {
        assert_eq!(packed(Some("ns"), "a"), "ns/a");
        assert_eq!(unpacked("ns/a"), (Some("ns"), "a"));
        assert_eq!(packed(None, "a"), "a");
        assert_eq!(unpacked("a"), (None, "a"));
    }

    #[test]
    fn owners_of_the_kind_are_found_in_the_childs_namespace() {
        let owner = |kind: &str, api_version: &str, name: &str| OwnerReference {
            api_version: api_version.into(),
            kind: kind.into(),
            name: name.into(),
            uid: "x".into(),
            ..OwnerReference::default()
        };
        let refs = [
            owner("ConfigMap", "v1", "mine"),
            owner("ConfigMap", "apps/v1", "wrong-group"),
            owner("Secret", "v1", "wrong-kind"),
            owner("ConfigMap", "v1", "also-mine"),
        ];
        let keys: Vec<ObjectRef<ConfigMap>> = owner_keys(Some("ns"), &refs);
        let names: Vec<_> = keys
            .iter()
            .map(|k| (k.name.as_str(), k.namespace.as_deref()))
            .collect();
        assert_eq!(names, [("mine", Some("ns")), ("also-mine", Some("ns"))]);
        assert!(owner_keys::<ConfigMap>(Some("ns"), &[]).is_empty());
    }

    #[tokio::test]
    async fn every_cached_object_each_time_the_signal_fires() {
        let (store, mut writer) = reflector::store::<ConfigMap>();
        for name in ["a", "b"] {
            writer.apply_watcher_event(&watcher::Event::Apply(map(name, Some("ns"))));
        }
        let keys: Vec<_> = all_keys_on(stream::iter([(), ()]), store).collect().await;
        let mut names: Vec<_> = keys.iter().map(|k| k.name.as_str()).collect();
        names.sort();
        assert_eq!(names, ["a", "a", "b", "b"]);
        assert!(keys.iter().all(|k| k.extra.uid.is_none()));
    }
}
