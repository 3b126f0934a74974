//! [`StoreProbe`]: what the kit needs to see of the store, implemented by
//! the provisioner's author.

use std::collections::BTreeSet;

use async_trait::async_trait;

use super::StoreSettings;
use crate::core::provisioner::{BucketAccess, Made};

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
    /// Delete an object (one that is not there: the store checks the
    /// permission before it looks, and no data is lost if it allows it).
    Delete,
    /// Start a multipart upload, and abort it again.
    Multipart,
}

impl Op {
    /// Every operation class, in the order the kit tries them.
    pub const ALL: [Op; 5] = [
        Self::List,
        Self::Read,
        Self::Write,
        Self::Delete,
        Self::Multipart,
    ];
}

impl std::fmt::Display for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Read => "read",
            Self::Write => "write",
            Self::List => "list",
            Self::Delete => "delete",
            Self::Multipart => "multipart-upload",
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
    /// What this probe is, as the report names it next to each verdict it
    /// produced (say whether it asks the store itself, or a record of
    /// yours: a probe answering from the provisioner's own records passes
    /// a provisioner whose calls never reach the store).
    fn name(&self) -> String {
        std::any::type_name::<Self>().to_owned()
    }

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

    /// Everything the store holds that credentials reach it by, or that
    /// decides what they reach: principals (users, keys, service
    /// accounts) and policies, by their names in the store (buckets come
    /// from [`list_buckets`](Self::list_buckets)). The kit lists them
    /// before and after each scenario: what the provisioner made and its
    /// teardown did not remove (a key minted on every repeat, a user left
    /// after revoke) fails the scenario. Leave out what the provisioner
    /// keeps for itself and what is always there.
    ///
    /// The default cannot list (`Ok(None)`): the report says "not
    /// verified" for every scenario.
    async fn inventory(&self) -> Result<Option<Vec<Made>>, ProbeError> {
        Ok(None)
    }

    /// Puts one object into `bucket` as the store's administrator (the
    /// claim's data, for the teardown-with-data scenarios); `Ok(false)`:
    /// this probe cannot (the default), and those scenarios are not
    /// exercised.
    async fn put_data(&self, bucket: &str) -> Result<bool, ProbeError> {
        let _ = bucket;
        Ok(false)
    }

    /// Whether `bucket` holds any object; `Ok(None)`: this probe cannot
    /// tell (the default), and the data a Retain keeps is not verified.
    async fn holds_data(&self, bucket: &str) -> Result<Option<bool>, ProbeError> {
        let _ = bucket;
        Ok(None)
    }

    /// Whether the store applies `config` (a claim's `additionalConfig`,
    /// as [`Kit::update_config`](super::Kit::update_config) gives it) to
    /// `bucket`, read back from the store; `Ok(None)`: this probe cannot
    /// tell (the default), and an update is checked only for not breaking
    /// access.
    async fn config_applied(
        &self,
        bucket: &str,
        config: &std::collections::BTreeMap<String, String>,
    ) -> Result<Option<bool>, ProbeError> {
        let _ = (bucket, config);
        Ok(None)
    }

    /// The settings `bucket` holds on the store (versioning, lifecycle
    /// rules, policy, object lock), read back as the administrator, for
    /// the `settings.applied` scenario. A setting the store cannot read at
    /// all goes in [`StoreSettings::unreadable`]; `Ok(None)`: this probe
    /// cannot read settings (the default), and that scenario is not
    /// exercised.
    ///
    /// ```
    /// # use std::collections::BTreeSet;
    /// # use lib_provisioner::conformance::{BucketSetting, ProbeError, StoreSettings};
    /// # struct Admin;
    /// # impl Admin { fn versioning(&self, _: &str) -> Option<String> { None } }
    /// # struct MyProbe { admin: Admin }
    /// # impl MyProbe {
    /// async fn bucket_settings(&self, bucket: &str) -> Result<Option<StoreSettings>, ProbeError> {
    ///     Ok(Some(StoreSettings {
    ///         versioning: self.admin.versioning(bucket),
    ///         // What this store's API cannot tell.
    ///         unreadable: BTreeSet::from([BucketSetting::Policy, BucketSetting::ObjectLock]),
    ///         ..Default::default()
    ///     }))
    /// }
    /// # }
    /// ```
    async fn bucket_settings(&self, bucket: &str) -> Result<Option<StoreSettings>, ProbeError> {
        let _ = bucket;
        Ok(None)
    }
}
