//! What the caches keep of a claim's Secret or ConfigMap: the metadata the
//! decisions read (`plan::meta`, `drift`, the owner trigger), and nothing
//! else, packed.
//!
//! Every claim has two children, so their cache entries were a third of the
//! controller's memory per claim. Kept as `PartialObjectMeta` in a
//! kube-runtime store, each cost about 2.5 KB: an `ObjectMeta` (360 bytes
//! inline, most of it empty), a label map and an annotation map (a
//! `BTreeMap` node has room for eleven entries), an owner reference of four
//! strings, and the store's key, four more strings. Here a child is its
//! `namespace/name` key (the [`ChildCache`](super::child_cache::ChildCache)
//! keys by it, so no second copy), its UID and version as numbers
//! ([`core::ids`](crate::core::ids)), the owner reference the library
//! writes as the claim's UID alone, and the label and hash annotations as
//! plain values. [`CachedChild::object_meta`] gives the decisions the same
//! metadata they read before.

use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    ManagedFieldsEntry, ObjectMeta, OwnerReference, Time,
};
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::ObjectRef;

use crate::core::ids::{Uid, Version};
use crate::core::watch::keys;
use crate::obc::CachedClaim;
use crate::obc::api::{CONFIG_MAP_HASH_ANNOTATION, PROVISIONER_LABEL, SECRET_HASH_ANNOTATION};
use crate::obc::writes::claim_owner_reference;

/// The annotations a decision reads on a child.
const KEPT_ANNOTATIONS: [&str; 2] = [SECRET_HASH_ANNOTATION, CONFIG_MAP_HASH_ANNOTATION];

/// A cached Secret or ConfigMap (`K`): its name, namespace, UID, version,
/// deletion, finalizers, owner references and managed fields (as the watch
/// reduced them: the other writers' names), its provisioner label and the
/// library's hash annotations.
#[derive(Debug)]
pub struct CachedChild<K> {
    /// `namespace/name` ([`keys::packed`]).
    key: Box<str>,
    uid: Option<Uid>,
    version: Option<Version>,
    /// Rare: boxed, so that a child not being deleted pays 8 bytes.
    deletion: Option<Box<Time>>,
    finalizers: Option<Box<[String]>>,
    /// The managers of the kept managedFields entries.
    writers: Option<Box<[Option<Box<str>>]>>,
    owners: Owners,
    /// The `bucket-provisioner` label's value; one allocation shared by
    /// every child of a cache ([`CachedChild::share_label`]).
    label: Option<Arc<str>>,
    /// The values of [`KEPT_ANNOTATIONS`], in order.
    annotations: [Option<Box<str>>; 2],
    kind: PhantomData<fn() -> K>,
}

impl<K> From<PartialObjectMeta<K>> for CachedChild<K> {
    fn from(object: PartialObjectMeta<K>) -> Self {
        let m = object.metadata;
        let name = m.name.unwrap_or_default();
        let key = keys::packed(m.namespace.as_deref(), &name);
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
        let writers = m.managed_fields.map(|entries| {
            entries
                .into_iter()
                .map(|e| e.manager.map(String::into_boxed_str))
                .collect()
        });
        Self {
            owners: Owners::new(m.owner_references, &name),
            key: key.into(),
            uid: m.uid.as_deref().map(Uid::new),
            version: m.resource_version.as_deref().map(Version::new),
            deletion: m.deletion_timestamp.map(Box::new),
            finalizers: m.finalizers.map(Vec::into_boxed_slice),
            writers,
            label,
            annotations,
            kind: PhantomData,
        }
    }
}

impl<K> CachedChild<K> {
    /// `namespace/name`, the cache's key.
    pub(crate) fn key(&self) -> &str {
        &self.key
    }

    /// The child's namespace ("" if it had none).
    pub(crate) fn namespace(&self) -> &str {
        keys::unpacked(&self.key).0.unwrap_or_default()
    }

    /// The child's name.
    pub(crate) fn name(&self) -> &str {
        keys::unpacked(&self.key).1
    }

    /// Makes the label's value `shared` if it is the same text, so that a
    /// cache holds one copy of it.
    pub(crate) fn share_label(&mut self, shared: &Arc<str>) {
        if self.label.as_ref().is_some_and(|l| l == shared) {
            self.label = Some(shared.clone());
        }
    }

    /// The keys of the claims among the child's owners (the owner trigger).
    pub(crate) fn owner_keys(&self) -> Vec<ObjectRef<CachedClaim>> {
        let refs = self.owner_references().unwrap_or_default();
        keys::owner_keys(Some(self.namespace()), &refs)
    }

    /// The child's metadata as the decisions read it: the kept fields, with
    /// the label and the hash annotations back in their maps.
    pub(crate) fn object_meta(&self) -> ObjectMeta {
        let annotations: BTreeMap<String, String> = KEPT_ANNOTATIONS
            .iter()
            .zip(&self.annotations)
            .filter_map(|(key, v)| Some(((*key).to_owned(), v.as_deref()?.to_owned())))
            .collect();
        ObjectMeta {
            name: Some(self.name().to_owned()),
            namespace: Some(self.namespace().to_owned()).filter(|ns| !ns.is_empty()),
            uid: self.uid.as_ref().map(Uid::to_string),
            resource_version: self.version.as_ref().map(Version::to_string),
            deletion_timestamp: self.deletion.as_deref().cloned(),
            finalizers: self.finalizers.as_deref().map(<[String]>::to_vec),
            managed_fields: self.writers.as_deref().map(|writers| {
                writers
                    .iter()
                    .map(|manager| ManagedFieldsEntry {
                        manager: manager.as_deref().map(str::to_owned),
                        ..ManagedFieldsEntry::default()
                    })
                    .collect()
            }),
            owner_references: self.owner_references(),
            labels: self
                .label
                .as_ref()
                .map(|v| BTreeMap::from([(PROVISIONER_LABEL.to_owned(), v.to_string())])),
            annotations: (!annotations.is_empty()).then_some(annotations),
            ..ObjectMeta::default()
        }
    }

    /// The child's owner references, as the apiserver sent them.
    pub(crate) fn owner_references(&self) -> Option<Vec<OwnerReference>> {
        match &self.owners {
            Owners::Unset => None,
            Owners::Claim(bits) => Some(vec![claim_owner_reference(
                self.name().to_owned(),
                Uid::Uuid(*bits).to_string(),
            )]),
            Owners::Listed(refs) => Some(refs.to_vec()),
        }
    }
}

/// A child's owner references: usually the one the library writes.
#[derive(Clone, Debug)]
enum Owners {
    /// None given.
    Unset,
    /// Exactly the library's `writes::claim_owner_reference` for the
    /// child's name and a UID in the apiserver's form, as its bits.
    Claim(u128),
    /// Any other list, as given.
    Listed(Box<[OwnerReference]>),
}

impl Owners {
    fn new(refs: Option<Vec<OwnerReference>>, child_name: &str) -> Self {
        let Some(refs) = refs else {
            return Self::Unset;
        };
        if let [only] = refs.as_slice()
            && let Uid::Uuid(bits) = Uid::new(&only.uid)
            && *only == claim_owner_reference(child_name.to_owned(), only.uid.clone())
        {
            return Self::Claim(bits);
        }
        Self::Listed(refs.into_boxed_slice())
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
    use kube::Resource;

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
        assert_eq!((cached.namespace(), cached.name()), ("ns", "c"));
        assert_eq!(cached.key(), "ns/c");
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
        assert_eq!(meta.managed_fields, None, "unknown stays unknown");
        assert_eq!(meta.namespace, None);
    }

    #[test]
    fn uuids_and_numeric_versions_come_back_as_they_came() {
        let uid = "638ffacd-f666-4402-ba10-7848c66ef576";
        let cached = CachedChild::<Secret>::from(PartialObjectMeta {
            types: None,
            metadata: ObjectMeta {
                name: Some("c".into()),
                namespace: Some("ns".into()),
                uid: Some(uid.into()),
                resource_version: Some("123456".into()),
                managed_fields: Some(vec![]),
                ..ObjectMeta::default()
            },
            _phantom: PhantomData,
        });
        assert!(matches!(cached.uid, Some(Uid::Uuid(_))));
        let meta = cached.object_meta();
        assert_eq!(meta.uid.as_deref(), Some(uid));
        assert_eq!(meta.resource_version.as_deref(), Some("123456"));
        assert_eq!(meta.managed_fields, Some(vec![]), "known: no other writer");
    }

    #[test]
    fn a_shared_label_is_one_allocation() {
        let shared: Arc<str> = "p".into();
        let mut cached = CachedChild::<Secret>::from(PartialObjectMeta {
            types: None,
            metadata: full(),
            _phantom: PhantomData,
        });
        cached.share_label(&shared);
        assert!(Arc::ptr_eq(
            cached.label.as_ref().expect("labelled"),
            &shared
        ));
        let other: Arc<str> = "q".into();
        cached.share_label(&other);
        assert_eq!(cached.label.as_deref(), Some("p"), "another value stays");
    }

    fn cached_with(owners: Option<Vec<OwnerReference>>) -> CachedChild<Secret> {
        CachedChild::from(PartialObjectMeta {
            types: None,
            metadata: ObjectMeta {
                name: Some("c".into()),
                namespace: Some("ns".into()),
                owner_references: owners,
                ..ObjectMeta::default()
            },
            _phantom: PhantomData,
        })
    }

    #[test]
    fn the_librarys_owner_reference_is_kept_as_the_uid_and_comes_back_whole() {
        let mut claim = ObjectBucketClaim::new("c", Default::default());
        claim.metadata.uid = Some("638ffacd-f666-4402-ba10-7848c66ef576".into());
        let written = crate::obc::writes::owner_reference(&claim).expect("the claim has a UID");
        // What the library writes is kube's controller reference.
        assert_eq!(claim.controller_owner_ref(&()), Some(written.clone()));
        let cached = cached_with(Some(vec![written.clone()]));
        assert!(matches!(
            cached.owners,
            Owners::Claim(0x638ffacd_f666_4402_ba10_7848c66ef576)
        ));
        assert_eq!(
            cached.owner_keys(),
            vec![ObjectRef::<CachedClaim>::new("c").within("ns")]
        );
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
        let text_uid = OwnerReference {
            uid: "claim-uid".into(),
            ..written.clone()
        };
        for refs in [
            vec![text_uid],
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
