//! A cached object whose labels and annotations are kept as plain pairs.
//!
//! Decoded, an object's label map and annotation map are `BTreeMap`s: each
//! allocates a node with room for eleven entries even when it holds one,
//! about 550 bytes. A claim and its ObjectBucket carry four such maps, a
//! fifth of the controller's memory per claim at 100,000 claims. A
//! [`Compact`] keeps the object without them and the pairs in a boxed
//! slice; [`Compact::object`] gives a decision the object as it was
//! decoded.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use serde::{Deserialize, Deserializer};

/// A map's entries in key order; `None` where the object had no map.
type Pairs = Option<Box<[(Box<str>, Box<str>)]>>;

/// An object of kind `K` as a cache keeps it: the object without its label
/// and annotation maps, and their entries beside it.
///
/// What reads a cache reads the whole object with [`Compact::object`] (one
/// copy per pass), or, where a scan over every cached object would copy
/// them all, reads [`Compact::without_maps`] and [`Compact::annotation`].
/// The [`Resource`] metadata a store and a controller see has no labels or
/// annotations.
pub struct Compact<K> {
    /// The object; its metadata has no label or annotation map.
    object: K,
    labels: Pairs,
    annotations: Pairs,
}

impl<K: Resource> From<K> for Compact<K> {
    fn from(mut object: K) -> Self {
        let meta = object.meta_mut();
        let labels = pairs(meta.labels.take());
        let annotations = pairs(meta.annotations.take());
        Self {
            object,
            labels,
            annotations,
        }
    }
}

fn pairs(map: Option<BTreeMap<String, String>>) -> Pairs {
    map.map(|m| m.into_iter().map(|(k, v)| (k.into(), v.into())).collect())
}

fn map(pairs: &Pairs) -> Option<BTreeMap<String, String>> {
    pairs.as_ref().map(|p| {
        p.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    })
}

fn lookup<'a>(pairs: &'a Pairs, key: &str) -> Option<&'a str> {
    let pairs = pairs.as_deref()?;
    let at = pairs.binary_search_by(|(k, _)| (**k).cmp(key)).ok()?;
    Some(&pairs[at].1)
}

impl<K: Resource + Clone> Compact<K> {
    /// The object as it was decoded, labels and annotations included.
    pub fn object(&self) -> K {
        let mut object = self.object.clone();
        let meta = object.meta_mut();
        meta.labels = map(&self.labels);
        meta.annotations = map(&self.annotations);
        object
    }
}

impl<K> Compact<K> {
    /// The object **without labels and annotations**: for scans over a
    /// whole cache that read only other fields, and must not copy every
    /// object.
    pub fn without_maps(&self) -> &K {
        &self.object
    }

    /// The value of annotation `key`, as the object holds it.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        lookup(&self.annotations, key)
    }

    /// The value of label `key`, as the object holds it.
    pub fn label(&self, key: &str) -> Option<&str> {
        lookup(&self.labels, key)
    }
}

impl<K: Clone> Clone for Compact<K> {
    fn clone(&self) -> Self {
        Self {
            object: self.object.clone(),
            labels: self.labels.clone(),
            annotations: self.annotations.clone(),
        }
    }
}

impl<K: fmt::Debug> fmt::Debug for Compact<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Compact")
            .field("object", &self.object)
            .field("labels", &self.labels)
            .field("annotations", &self.annotations)
            .finish()
    }
}

/// Decoded as `K`, then compacted: what a controller over a cache of
/// compact objects needs.
impl<'de, K: Resource + Deserialize<'de>> Deserialize<'de> for Compact<K> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        K::deserialize(d).map(Self::from)
    }
}

/// The kind's, so that stores, object references and owner triggers treat
/// a compact object as the object it stands for. Its metadata has no labels
/// or annotations.
impl<K: Resource> Resource for Compact<K> {
    type DynamicType = K::DynamicType;
    type Scope = K::Scope;

    fn kind(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::kind(dt)
    }
    fn group(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::group(dt)
    }
    fn version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::version(dt)
    }
    fn plural(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::plural(dt)
    }
    fn meta(&self) -> &ObjectMeta {
        self.object.meta()
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        self.object.meta_mut()
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;

    use super::*;

    fn config_map(
        labels: Option<BTreeMap<String, String>>,
        annotations: Option<BTreeMap<String, String>>,
    ) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some("c".into()),
                namespace: Some("ns".into()),
                uid: Some("u".into()),
                labels,
                annotations,
                ..ObjectMeta::default()
            },
            data: Some(BTreeMap::from([("k".into(), "v".into())])),
            ..ConfigMap::default()
        }
    }

    fn map(entries: &[(&str, &str)]) -> BTreeMap<String, String> {
        entries
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect()
    }

    #[test]
    fn the_object_comes_back_as_it_was_decoded() {
        for (labels, annotations) in [
            (None, None),
            (Some(BTreeMap::new()), None),
            (None, Some(BTreeMap::new())),
            (
                Some(map(&[("b", "2"), ("a", "1")])),
                Some(map(&[("z", ""), ("m", "x"), ("a", "y")])),
            ),
        ] {
            let cm = config_map(labels, annotations);
            assert_eq!(Compact::from(cm.clone()).object(), cm);
        }
    }

    #[test]
    fn lookups_find_each_entry_and_nothing_else() {
        let cached = Compact::from(config_map(
            Some(map(&[("b", "2"), ("a", "1")])),
            Some(map(&[("z", ""), ("m", "x"), ("a", "y")])),
        ));
        assert_eq!(cached.label("a"), Some("1"));
        assert_eq!(cached.label("b"), Some("2"));
        assert_eq!(cached.label("m"), None);
        assert_eq!(cached.annotation("z"), Some(""));
        assert_eq!(cached.annotation("m"), Some("x"));
        assert_eq!(cached.annotation("a"), Some("y"));
        assert_eq!(cached.annotation("b"), None);
        assert_eq!(Compact::from(config_map(None, None)).annotation("a"), None);
    }

    #[test]
    fn the_store_sees_the_kind_and_metadata_without_maps() {
        let cached = Compact::from(config_map(Some(map(&[("a", "1")])), None));
        assert_eq!(Compact::<ConfigMap>::kind(&()), "ConfigMap");
        assert_eq!(Compact::<ConfigMap>::plural(&()), "configmaps");
        assert_eq!(cached.meta().name.as_deref(), Some("c"));
        assert_eq!(cached.meta().labels, None);
        assert_eq!(cached.without_maps().data, config_map(None, None).data);
    }

    #[test]
    fn it_decodes_as_the_kind() {
        let json = r#"{"apiVersion":"v1","kind":"ConfigMap",
            "metadata":{"name":"c","labels":{"a":"1"}},"data":{"k":"v"}}"#;
        let cached: Compact<ConfigMap> = serde_json::from_str(json).expect("decodes");
        assert_eq!(cached.label("a"), Some("1"));
        assert_eq!(cached.object().data, Some(map(&[("k", "v")])));
    }
}
