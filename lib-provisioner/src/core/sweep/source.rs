//! What the sweep learns from each API family, in neutral terms: the
//! classes that reach a store ([`SweepClass`]) and the UIDs of the live
//! owners ([`Snapshot`]), through a [`SweepSource`] each family provides
//! from its caches (the controller) or from the API (the audit).

use std::collections::{BTreeMap, BTreeSet};

use async_trait::async_trait;

/// A class whose parameters reach a store: a StorageClass, a BucketClass
/// or a BucketAccessClass of this provisioner.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub struct SweepClass {
    /// Its kind (`StorageClass`, `BucketClass`, `BucketAccessClass`).
    pub kind: String,
    /// Its name.
    pub name: String,
    /// Its parameters (what the provisioner reads the store from).
    #[serde(skip)]
    pub parameters: BTreeMap<String, String>,
}

impl std::fmt::Display for SweepClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.kind, self.name)
    }
}

/// What one family sees now: its classes of this provisioner and the UIDs
/// of every object that owns something in a store.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// The classes that reach a store.
    pub classes: Vec<SweepClass>,
    /// The live owners' UIDs (claims, the claims bound ObjectBuckets and
    /// Buckets name, BucketAccesses), read from records a tenant cannot
    /// forge: the objects themselves, by UID.
    pub owners: BTreeSet<String>,
}

impl Snapshot {
    /// `self` and `other` together.
    pub fn merge(mut self, other: Snapshot) -> Snapshot {
        self.classes.extend(other.classes);
        self.classes.sort();
        self.classes
            .dedup_by(|a, b| a.kind == b.kind && a.name == b.name);
        self.owners.extend(other.owners);
        self
    }
}

/// One API family, as the sweep sees it.
#[async_trait]
pub trait SweepSource: Send + Sync + 'static {
    /// The family's name, for logs.
    fn family(&self) -> &'static str;

    /// What the family sees now. An error (caches not synced, a list
    /// refused) means "cannot see", never "gone": the round is skipped.
    async fn snapshot(&self) -> Result<Snapshot, String>;
}
