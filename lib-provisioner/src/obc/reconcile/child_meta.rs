//! What the caches keep of a claim's Secret or ConfigMap: the metadata the
//! decisions read (`plan::meta`, `drift`, the owner trigger), and nothing
//! else.
//!
//! Every claim has two children, so their cache entries are a third of the
//! controller's memory per claim. Kept as `PartialObjectMeta`, each held a
//! label map and an annotation map: a `BTreeMap` allocates a node for up to
//! eleven entries even when it holds one, about 550 bytes each. Here the
//! provisioner label and the library's hash annotations are kept as plain
//! values, and the owner reference the library writes (one claim of the
//! child's name, as controller) as the claim's UID alone: a `Vec` and four
//! strings, about 250 bytes, for 48. [`CachedChild::object_meta`] gives the
//! decisions the same metadata they read before.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::marker::PhantomData;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::Resource;
use kube::core::PartialObjectMeta;

use crate::obc::api::{CONFIG_MAP_HASH_ANNOTATION, PROVISIONER_LABEL, SECRET_HASH_ANNOTATION};
use crate::obc::writes::claim_owner_reference;

/// The annotations a decision reads on a child.
const KEPT_ANNOTATIONS: [&str; 2] = [SECRET_HASH_ANNOTATION, CONFIG_MAP_HASH_ANNOTATION];

/// A cached Secret or ConfigMap (`K`): its name, namespace, UID, version,
/// deletion, finalizers, owner references and managed fields (as the watch
/// reduced them), its provisioner label and the library's hash annotations.
#[derive(Debug)]
pub struct CachedChild<K> {
    /// The kept fields; no label or annotation map, no owner references.
    meta: ObjectMeta,
    owners: Owners,
    /// The `bucket-provisioner` label's value.
    label: Option<Box<str>>,
    /// The values of [`KEPT_ANNOTATIONS`], in order.
    annotations: [Option<Box<str>>; 2],
    kind: PhantomData<fn() -> K>,
}

impl<K> Clone for CachedChild<K> {
    fn clone(&self) -> Self {
        Self {
            meta: self.meta.clone(),
            owners: self.owners.clone(),
            label: self.label.clone(),
            annotations: self.annotations.clone(),
            kind: PhantomData,
        }
    }
}

impl<K> From<PartialObjectMeta<K>> for CachedChild<K> {
    fn from(object: PartialObjectMeta<K>) -> Self {
        let m = object.metadata;
        let label = m
            .labels
            .as_ref()
            .and_then(|l| l.get(PROVISIONER_LABEL))
            .map(|v| v.as_str().into());
        let annotations = KEPT_ANNOTATIONS.map(|key| {
            m.annotations
                .as_ref()
                .and_then(|a| a.get(key))
                .map(|v| v.as_str().into())
        });
        let name = m.name.as_deref().unwrap_or_default();
        let owners = Owners::new(m.owner_references, name);
        Self {
            meta: ObjectMeta {
                name: m.name,
                namespace: m.namespace,
                uid: m.uid,
                resource_version: m.resource_version,
                deletion_timestamp: m.deletion_timestamp,
                finalizers: m.finalizers,
                managed_fields: m.managed_fields,
                ..ObjectMeta::default()
            },
            owners,
            label,
            annotations,
            kind: PhantomData,
        }
    }
}

impl<K> CachedChild<K> {
    /// The child's metadata as the decisions read it: the kept fields, with
    /// the label and the hash annotations back in their maps.
    pub(crate) fn object_meta(&self) -> ObjectMeta {
        let mut meta = self.meta.clone();
        meta.owner_references = self.owner_references();
        meta.labels = self
            .label
            .as_ref()
            .map(|v| BTreeMap::from([(PROVISIONER_LABEL.to_owned(), v.to_string())]));
        let annotations: BTreeMap<String, String> = KEPT_ANNOTATIONS
            .iter()
            .zip(&self.annotations)
            .filter_map(|(key, v)| Some(((*key).to_owned(), v.as_deref()?.to_owned())))
            .collect();
        meta.annotations = (!annotations.is_empty()).then_some(annotations);
        meta
    }
}

impl<K> CachedChild<K> {
    /// The child's owner references, as the apiserver sent them.
    pub(crate) fn owner_references(&self) -> Option<Vec<OwnerReference>> {
        match &self.owners {
            Owners::Unset => None,
            Owners::Claim { uid } => Some(vec![claim_owner_reference(
                self.meta.name.clone().unwrap_or_default(),
                uid.to_string(),
            )]),
            Owners::Listed(refs) => Some(refs.clone()),
        }
    }
}

/// A child's owner references: usually the one the library writes.
#[derive(Clone, Debug)]
enum Owners {
    /// None given.
    Unset,
    /// Exactly the library's `writes::claim_owner_reference` for the
    /// child's name and this UID.
    Claim { uid: Box<str> },
    /// Any other list, as given.
    Listed(Vec<OwnerReference>),
}

impl Owners {
    fn new(refs: Option<Vec<OwnerReference>>, child_name: &str) -> Self {
        match refs {
            None => Self::Unset,
            Some(refs) => match refs.as_slice() {
                [only]
                    if *only == claim_owner_reference(child_name.to_owned(), only.uid.clone()) =>
                {
                    Self::Claim {
                        uid: only.uid.as_str().into(),
                    }
                }
                _ => Self::Listed(refs),
            },
        }
    }
}

/// The kind's, so that stores and object references treat a cached child
/// as the object it stands for. Its `meta()` has no labels, annotations or
/// owner references: read those through [`CachedChild::object_meta`] or
/// [`CachedChild::owner_references`].
impl<K: Resource<DynamicType = ()>> Resource for CachedChild<K> {
    type DynamicType = ();
    type Scope = K::Scope;

    fn kind(dt: &()) -> Cow<'_, str> {
        K::kind(dt)
    }
    fn group(dt: &()) -> Cow<'_, str> {
        K::group(dt)
    }
    fn version(dt: &()) -> Cow<'_, str> {
        K::version(dt)
    }
    fn plural(dt: &()) -> Cow<'_, str> {
        K::plural(dt)
    }
    fn meta(&self) -> &ObjectMeta {
        &self.meta
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.meta
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Secret;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
        ManagedFieldsEntry, OwnerReference, Time,
    };

    use super::*;
    use crate::obc::api::ObjectBucketClaim;

    fn full() -> ObjectMeta {
        ObjectMeta {
            name: Some("c".into()),
            namespace: Some("ns".into()),
            uid: Some("u".into()),
            resource_version: Some("7".into()),
            deletion_timestamp: Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)),
            finalizers: Some(vec!["objectbucket.io/finalizer".into(), "other".into()]),
            owner_references: Some(vec![OwnerReference {
                kind: "ObjectBucketClaim".into(),
                uid: "claim".into(),
                ..OwnerReference::default()
            }]),
            managed_fields: Some(vec![ManagedFieldsEntry {
                manager: Some("kubectl-edit".into()),
                ..ManagedFieldsEntry::default()
            }]),
            labels: Some(BTreeMap::from([
                (PROVISIONER_LABEL.into(), "p".into()),
                ("team".into(), "a".into()),
            ])),
            annotations: Some(BTreeMap::from([
                (SECRET_HASH_ANNOTATION.into(), "h".into()),
                ("note".into(), "x".into()),
            ])),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn the_decisions_read_what_they_read_before() {
        let full = full();
        let cached = CachedChild::<Secret>::from(PartialObjectMeta {
            types: None,
            metadata: full.clone(),
            _phantom: PhantomData,
        });
        let meta = cached.object_meta();
        let expected = ObjectMeta {
            labels: Some(BTreeMap::from([(PROVISIONER_LABEL.into(), "p".into())])),
            annotations: Some(BTreeMap::from([(
                SECRET_HASH_ANNOTATION.into(),
                "h".into(),
            )])),
            ..full
        };
        assert_eq!(meta, expected);
        assert_eq!(cached.meta().name.as_deref(), Some("c"));
        assert_eq!(CachedChild::<Secret>::kind(&()), "Secret");
        assert_eq!(CachedChild::<Secret>::plural(&()), "secrets");
    }

    #[test]
    fn a_child_without_label_or_annotations_keeps_no_maps() {
        let cached = CachedChild::<Secret>::from(PartialObjectMeta {
            types: None,
            metadata: ObjectMeta {
                name: Some("c".into()),
                ..ObjectMeta::default()
            },
            _phantom: PhantomData,
        });
        let meta = cached.object_meta();
        assert_eq!(meta.labels, None);
        assert_eq!(meta.annotations, None);
        assert_eq!(meta.owner_references, None);
    }

    fn cached_with(owners: Option<Vec<OwnerReference>>) -> CachedChild<Secret> {
        CachedChild::from(PartialObjectMeta {
            types: None,
            metadata: ObjectMeta {
                name: Some("c".into()),
                owner_references: owners,
                ..ObjectMeta::default()
            },
            _phantom: PhantomData,
        })
    }

    #[test]
    fn the_librarys_owner_reference_is_kept_as_the_uid_and_comes_back_whole() {
        let mut claim = ObjectBucketClaim::new("c", Default::default());
        claim.metadata.uid = Some("claim-uid".into());
        let written = crate::obc::writes::owner_reference(&claim).expect("the claim has a UID");
        // What the library writes is kube's controller reference.
        assert_eq!(claim.controller_owner_ref(&()), Some(written.clone()));
        let cached = cached_with(Some(vec![written.clone()]));
        assert!(matches!(&cached.owners, Owners::Claim { uid } if &**uid == "claim-uid"));
        assert_eq!(cached.meta().owner_references, None);
        assert_eq!(
            cached.object_meta().owner_references,
            Some(vec![written.clone()])
        );

        // Anything else is kept as it came: another name, not controller,
        // a second owner, an empty list.
        let other_name = OwnerReference {
            name: "d".into(),
            ..written.clone()
        };
        let not_controller = OwnerReference {
            controller: None,
            ..written.clone()
        };
        for refs in [
            vec![other_name],
            vec![not_controller],
            vec![written.clone(), written.clone()],
            vec![],
        ] {
            let cached = cached_with(Some(refs.clone()));
            assert!(matches!(cached.owners, Owners::Listed(_)), "{refs:?}");
            assert_eq!(cached.owner_references(), Some(refs));
        }
    }
}
