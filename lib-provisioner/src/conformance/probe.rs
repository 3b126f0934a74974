//! [`StoreProbe`]: what the kit needs to see of the store, implemented by
//! the provisioner's author.

use std::collections::BTreeSet;

use async_trait::async_trait;

use crate::core::provisioner::BucketAccess;

/// What a probe tries with a claim's credentials.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Op {
    /// Read an object (a missing object counts as allowed: the store let
    /// the request through and found nothing).
    Read,
    /// Write an object, and remove it again, so that the bucket is as it
    /// was (an empty bucket stays empty for a delete).
    Write,
    /// List the bucket's objects.
    List,
}

impl std::fmt::Display for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Read => "read",
            Self::Write => "write",
            Self::List => "list",
        })
    }
}

/// What the store answered to a [`StoreProbe::try_access`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// The store did it.
    Allowed,
    /// The store refused the credentials for it (access denied, unknown or
    /// revoked key): what it said.
    Denied(String),
}

/// The probe could not ask the store (unreachable, an unexpected answer):
/// the scenario fails with this message, as it cannot tell whether the
/// provisioner met the contract.
#[derive(Clone, Debug, thiserror::Error)]
#[error("{0}")]
pub struct ProbeError(String);

impl ProbeError {
    /// A failure described by `message`.
    pub fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }
}

/// The kit's view of the store, with credentials of the store's own
/// (an administrator's), never the provisioner's code: what the kit checks
/// must not depend on what it checks.
///
/// Keep it thin: each method is one or two calls of your store's client.
/// Against an S3 store: HeadBucket, ListBuckets, CreateBucket + PutObject,
/// DeleteObjects + DeleteBucket, and a client built from the credentials
/// for `try_access`.
///
/// ```
/// use std::collections::{BTreeMap, BTreeSet};
/// use std::sync::Mutex;
/// use async_trait::async_trait;
/// use lib_provisioner::BucketAccess;
/// use lib_provisioner::conformance::{Answer, Op, ProbeError, StoreProbe};
///
/// /// Buckets by name, and which bucket each access key may reach.
/// #[derive(Default)]
/// struct Memory { buckets: Mutex<BTreeSet<String>>, keys: Mutex<BTreeMap<String, String>> }
///
/// #[async_trait]
/// impl StoreProbe for Memory {
///     async fn bucket_exists(&self, bucket: &str) -> Result<bool, ProbeError> {
///         Ok(self.buckets.lock().expect("lock").contains(bucket))
///     }
///     async fn list_buckets(&self) -> Result<BTreeSet<String>, ProbeError> {
///         Ok(self.buckets.lock().expect("lock").clone())
///     }
///     async fn create_foreign_bucket(&self, bucket: &str) -> Result<(), ProbeError> {
///         self.buckets.lock().expect("lock").insert(bucket.to_owned());
///         Ok(())
///     }
///     async fn remove_bucket(&self, bucket: &str) -> Result<(), ProbeError> {
///         self.buckets.lock().expect("lock").remove(bucket);
///         Ok(())
///     }
///     async fn try_access(&self, access: &BucketAccess, bucket: &str, _op: Op) -> Result<Answer, ProbeError> {
///         let keys = self.keys.lock().expect("lock");
///         Ok(match keys.get(&access.credentials.access_key_id) {
///             Some(b) if b == bucket => Answer::Allowed,
///             _ => Answer::Denied("AccessDenied".into()),
///         })
///     }
/// }
/// ```
#[async_trait]
pub trait StoreProbe: Send + Sync + 'static {
    /// Whether `bucket` exists.
    async fn bucket_exists(&self, bucket: &str) -> Result<bool, ProbeError>;

    /// Every bucket that holds, or could hold, a claim's data. Leave out
    /// what the provisioner keeps for itself (a state bucket): the kit
    /// fails a scenario in which a bucket appears that no claim asked for.
    async fn list_buckets(&self) -> Result<BTreeSet<String>, ProbeError>;

    /// Creates `bucket` as someone other than the provisioner would (its
    /// owner's data: put one object in it), for the ownership scenarios.
    async fn create_foreign_bucket(&self, bucket: &str) -> Result<(), ProbeError>;

    /// Removes `bucket` and its objects, if it exists: the kit cleans up
    /// the foreign buckets it made and the buckets kept under Retain.
    async fn remove_bucket(&self, bucket: &str) -> Result<(), ProbeError>;

    /// Tries `op` on `bucket` with `access`'s credentials (at the store
    /// this probe reaches, or at `access.endpoint`).
    async fn try_access(
        &self,
        access: &BucketAccess,
        bucket: &str,
        op: Op,
    ) -> Result<Answer, ProbeError>;
}
