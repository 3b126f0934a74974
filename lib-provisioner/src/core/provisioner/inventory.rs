//! What a store holds that a provisioner made: [`Made`], listed by
//! [`Provisioner::inventory`](super::Provisioner::inventory) for the store
//! sweep, and by the conformance kit's probe for its own count.
//!
//! One shape for both readers, so that what the sweep trusts and what the
//! kit checks are the same thing: a principal (a store user, a key), a
//! policy, or a bucket, by the name the store knows it by, and the owner it
//! was made for when that can be told from the store itself.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use super::ReclaimPolicy;

/// What kind of thing a store holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum MadeKind {
    /// Something that holds credentials: a user, an access key, a service
    /// account. Revoked by [`Provisioner::remove_orphan`](super::Provisioner::remove_orphan).
    Principal,
    /// A policy document attached to a principal or a bucket.
    Policy,
    /// A bucket.
    Bucket,
}

impl fmt::Display for MadeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Principal => "principal",
            Self::Policy => "policy",
            Self::Bucket => "bucket",
        })
    }
}

/// One thing a store holds, as listed from the store.
///
/// ```
/// use lib_provisioner::provisioner::{Made, MadeKind};
/// let user = Made::new(MadeKind::Principal, "http://127.0.0.1:9000", "cosi0b1f6c1e2a3b4c5d")
///     .owned_by("0b1f6c1e-2a3b-4c5d-8e9f-0123456789ab");
/// assert_eq!(user.owner_uid.as_deref(), Some("0b1f6c1e-2a3b-4c5d-8e9f-0123456789ab"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[non_exhaustive]
pub struct Made {
    /// Principal, policy or bucket.
    pub kind: MadeKind,
    /// Which store holds it (its endpoint, say): the same store reached
    /// through two classes is listed twice and counted once.
    pub store: String,
    /// Its name in the store (a user's access key, a policy's name, a
    /// bucket's name). Never a secret.
    pub name: String,
    /// The UID of the object it was made for (an ObjectBucketClaim, a
    /// BucketClaim, a BucketAccess), when the store says so: a tag, or a
    /// name derived from one of [`InventoryRequest::owners`]. `None`: made
    /// by this provisioner for an owner that is not among them.
    pub owner_uid: Option<String>,
    /// For a bucket: the reclaim policy recorded with it *in the store* at
    /// creation, if any. Only a recorded `Delete` lets the sweep delete an
    /// orphaned bucket; without a record it is reported and kept.
    pub reclaim: Option<ReclaimPolicy>,
}

impl Made {
    /// `kind` named `name` in `store`, with no owner and no recorded policy.
    pub fn new(kind: MadeKind, store: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            kind,
            store: store.into(),
            name: name.into(),
            owner_uid: None,
            reclaim: None,
        }
    }

    /// Made for the object with UID `uid`.
    pub fn owned_by(mut self, uid: impl Into<String>) -> Self {
        self.owner_uid = Some(uid.into());
        self
    }

    /// A bucket whose recorded reclaim policy is `policy`.
    pub fn with_reclaim(mut self, policy: ReclaimPolicy) -> Self {
        self.reclaim = Some(policy);
        self
    }
}

impl fmt::Display for Made {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} on {}", self.kind, self.name, self.store)?;
        match &self.owner_uid {
            Some(uid) => write!(f, " (made for UID {uid})"),
            None => f.write_str(" (no live owner)"),
        }
    }
}

/// What [`Provisioner::inventory`](super::Provisioner::inventory) lists:
/// the store one class's parameters reach.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct InventoryRequest {
    /// The class (StorageClass, BucketClass or BucketAccessClass) whose
    /// parameters name the store.
    pub class_name: String,
    /// Its parameters.
    pub parameters: BTreeMap<String, String>,
    /// Its kind (`StorageClass`, `BucketClass`, `BucketAccessClass`; empty
    /// if not told). List what you make for objects served through this
    /// kind of class: a family the library does not serve in this process
    /// (COSI served by upstream's sidecar, say) lends no classes, so what
    /// you made for it is never listed, and never taken for an orphan.
    pub class_kind: String,
    /// The UIDs of every live owner the library knows (claims,
    /// ObjectBuckets' claims, BucketClaims, BucketAccesses): a provisioner
    /// whose names are derived from a UID (a digest, say) resolves them
    /// against these. Everything the provisioner made whose owner is not
    /// here is listed with `owner_uid: None`, or with the UID its tag names.
    pub owners: BTreeSet<String>,
}

impl InventoryRequest {
    /// The store reached by `class_name`'s `parameters`.
    pub fn new(class_name: impl Into<String>, parameters: BTreeMap<String, String>) -> Self {
        Self {
            class_name: class_name.into(),
            parameters,
            class_kind: String::new(),
            owners: BTreeSet::new(),
        }
    }

    /// Of a class of kind `kind`.
    pub fn with_class_kind(mut self, kind: impl Into<String>) -> Self {
        self.class_kind = kind.into();
        self
    }

    /// With the live owners' UIDs.
    pub fn with_owners(mut self, owners: BTreeSet<String>) -> Self {
        self.owners = owners;
        self
    }
}

/// What [`Provisioner::remove_orphan`](super::Provisioner::remove_orphan)
/// removes: one principal or policy the sweep found without a live owner
/// past its grace period (or a bucket whose store recorded reclaim policy
/// `Delete`), on the store `parameters` reach.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct OrphanRemoval {
    /// The class it was listed through.
    pub class_name: String,
    /// Its parameters.
    pub parameters: BTreeMap<String, String>,
    /// Its kind, as in [`InventoryRequest::class_kind`].
    pub class_kind: String,
    /// What to remove, as [`Provisioner::inventory`](super::Provisioner::inventory) listed it.
    pub made: Made,
}

impl OrphanRemoval {
    /// Remove `made`, listed through `request`'s class.
    pub fn new(request: &InventoryRequest, made: Made) -> Self {
        Self {
            class_name: request.class_name.clone(),
            parameters: request.parameters.clone(),
            class_kind: request.class_kind.clone(),
            made,
        }
    }
}
