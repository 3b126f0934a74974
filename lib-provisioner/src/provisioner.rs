//! The trait a provisioner author implements, and what goes in and out of it.
//!
//! # The idempotency contract
//!
//! The controller may die between any two of its API calls, so every method
//! may be called again for the same bucket after a crash, a conflict or a
//! retry. Each method must then return the same result and must not fail
//! because its own earlier work exists:
//!
//! - [`Provisioner::provision`]: if the bucket already exists *and was
//!   created by this provisioner for this claim*, return its access again
//!   (same or freshly rotated credentials). If it exists and belongs to
//!   someone else, return [`ProvisionError::permanent`].
//! - [`Provisioner::grant`]: if the claim already has access, return it again.
//! - [`Provisioner::delete`] and [`Provisioner::revoke`]: if the bucket or the
//!   access is already gone, return `Ok(())`.
//!
//! Anything a teardown needs later (a user name, a policy name) goes into
//! [`BucketAccess::additional_state`]: the library stores it in the
//! ObjectBucket and hands it back in [`TeardownRequest`].
//!
//! # Example
//!
//! ```
//! use std::collections::BTreeMap;
//! use std::sync::Mutex;
//! use async_trait::async_trait;
//! use lib_provisioner::provisioner::*;
//!
//! /// Keeps buckets in memory: shows the contract, not a real store.
//! #[derive(Default)]
//! struct MemoryStore { buckets: Mutex<BTreeMap<String, String>> }
//!
//! #[async_trait]
//! impl Provisioner for MemoryStore {
//!     async fn provision(&self, req: &BucketRequest) -> Result<BucketAccess, ProvisionError> {
//!         let mut buckets = self.buckets.lock().expect("lock");
//!         let owner = buckets.entry(req.bucket_name.clone()).or_insert_with(|| req.claim_uid.clone());
//!         if *owner != req.claim_uid {
//!             return Err(ProvisionError::permanent(format!(
//!                 "bucket {} belongs to another claim; choose another bucketName", req.bucket_name)));
//!         }
//!         Ok(BucketAccess::new("store.example", 443, Credentials::new("key", "secret")))
//!     }
//!     async fn grant(&self, req: &BucketRequest) -> Result<BucketAccess, ProvisionError> {
//!         if !self.buckets.lock().expect("lock").contains_key(&req.bucket_name) {
//!             return Err(ProvisionError::permanent(format!("bucket {} does not exist", req.bucket_name)));
//!         }
//!         Ok(BucketAccess::new("store.example", 443, Credentials::new("key", "secret")))
//!     }
//!     async fn delete(&self, req: &TeardownRequest) -> Result<(), ProvisionError> {
//!         self.buckets.lock().expect("lock").remove(&req.bucket_name); // gone already: fine
//!         Ok(())
//!     }
//!     async fn revoke(&self, _req: &TeardownRequest) -> Result<(), ProvisionError> {
//!         Ok(())
//!     }
//! }
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use async_trait::async_trait;

use crate::api::{Endpoint, ObjectBucket, ObjectBucketClaim};

/// An object store backend. See the [module docs](self) for the contract.
#[async_trait]
pub trait Provisioner: Send + Sync + 'static {
    /// Greenfield: create `req.bucket_name` and credentials for the claim.
    async fn provision(&self, req: &BucketRequest) -> Result<BucketAccess, ProvisionError>;

    /// Brownfield: give the claim credentials for the existing bucket named
    /// by the StorageClass.
    async fn grant(&self, req: &BucketRequest) -> Result<BucketAccess, ProvisionError>;

    /// Greenfield teardown under reclaim policy Delete: delete the bucket
    /// and the claim's credentials.
    async fn delete(&self, req: &TeardownRequest) -> Result<(), ProvisionError>;

    /// Remove the claim's credentials and keep the bucket: brownfield
    /// teardown, and greenfield teardown under reclaim policy Retain.
    async fn revoke(&self, req: &TeardownRequest) -> Result<(), ProvisionError>;
}

/// What the library knows about a claim when it asks for a bucket or access.
#[derive(Clone, Debug)]
pub struct BucketRequest {
    /// The claim's namespace.
    pub claim_namespace: String,
    /// The claim's name.
    pub claim_name: String,
    /// The claim's UID: stable across retries, unique per claim.
    pub claim_uid: String,
    /// The bucket's name in the object store.
    pub bucket_name: String,
    /// Name of the ObjectBucket the library will create for it.
    pub object_bucket_name: String,
    /// The StorageClass name.
    pub storage_class_name: String,
    /// The StorageClass `parameters`.
    pub parameters: BTreeMap<String, String>,
    /// The claim's `spec.additionalConfig`.
    pub additional_config: BTreeMap<String, String>,
}

impl BucketRequest {
    pub(crate) fn for_claim(
        claim: &ObjectBucketClaim,
        bucket_name: String,
        class_name: &str,
        parameters: BTreeMap<String, String>,
    ) -> Self {
        let namespace = claim.metadata.namespace.clone().unwrap_or_default();
        let name = claim.metadata.name.clone().unwrap_or_default();
        Self {
            object_bucket_name: crate::names::object_bucket_name(&namespace, &name),
            claim_namespace: namespace,
            claim_name: name,
            claim_uid: claim.metadata.uid.clone().unwrap_or_default(),
            bucket_name,
            storage_class_name: class_name.to_owned(),
            parameters,
            additional_config: claim.spec.additional_config.clone().unwrap_or_default(),
        }
    }
}

/// What the library knows when it tears a bucket or its access down.
///
/// Teardown may be asked for a bucket whose provisioning died half-way (the
/// bucket may or may not exist, `object_bucket` is `None`): delete only what
/// this provisioner created for `claim_uid`, and succeed if there is nothing.
#[derive(Clone, Debug)]
pub struct TeardownRequest {
    /// The claim's namespace.
    pub claim_namespace: String,
    /// The claim's name.
    pub claim_name: String,
    /// The UID of the claim the bucket was provisioned for.
    pub claim_uid: String,
    /// The bucket's name in the object store.
    pub bucket_name: String,
    /// The StorageClass name.
    pub storage_class_name: String,
    /// The StorageClass `parameters`, or empty if the class is gone.
    pub parameters: BTreeMap<String, String>,
    /// What [`BucketAccess::additional_state`] held at provisioning.
    pub additional_state: BTreeMap<String, String>,
    /// The ObjectBucket being released, if it was created.
    pub object_bucket: Option<ObjectBucket>,
}

impl TeardownRequest {
    /// The request for an ObjectBucket, with its class's parameters.
    pub(crate) fn for_object_bucket(
        ob: &ObjectBucket,
        parameters: BTreeMap<String, String>,
    ) -> Self {
        let r = ob.spec.claim_ref.clone().unwrap_or_default();
        Self {
            claim_namespace: r.namespace.unwrap_or_default(),
            claim_name: r.name.unwrap_or_default(),
            claim_uid: r.uid.unwrap_or_default(),
            bucket_name: ob.bucket_name().unwrap_or_default().to_owned(),
            storage_class_name: ob.spec.storage_class_name.clone(),
            parameters,
            additional_state: ob.spec.additional_state.clone().unwrap_or_default(),
            object_bucket: Some(ob.clone()),
        }
    }
}

/// Access to a bucket: where it is and the credentials for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BucketAccess {
    /// Connection details; `bucket_name` is filled in by the library.
    pub endpoint: Endpoint,
    /// Credentials, written only into the claim's Secret.
    pub credentials: Credentials,
    /// State the provisioner needs at teardown (stored in the ObjectBucket,
    /// which is readable cluster-wide: never put secrets here).
    pub additional_state: BTreeMap<String, String>,
}

impl BucketAccess {
    /// Access at `host:port` with the given credentials.
    ///
    /// ```
    /// use lib_provisioner::provisioner::{BucketAccess, Credentials};
    /// let access = BucketAccess::new("s3.local", 9000, Credentials::new("id", "secret"))
    ///     .with_region("eu-west-1");
    /// assert_eq!(access.endpoint.region, "eu-west-1");
    /// ```
    pub fn new(host: impl Into<String>, port: i32, credentials: Credentials) -> Self {
        Self {
            endpoint: Endpoint {
                bucket_host: host.into(),
                bucket_port: port,
                ..Default::default()
            },
            credentials,
            additional_state: BTreeMap::new(),
        }
    }

    /// Sets the region.
    pub fn with_region(mut self, region: impl Into<String>) -> Self {
        self.endpoint.region = region.into();
        self
    }

    /// Adds teardown state.
    pub fn with_state(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.additional_state.insert(key.into(), value.into());
        self
    }
}

/// An access key pair. Its `Debug` output never shows the secret.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// The access key id.
    pub access_key_id: String,
    /// The secret access key.
    pub secret_access_key: String,
}

impl Credentials {
    /// A key pair.
    pub fn new(access_key_id: impl Into<String>, secret_access_key: impl Into<String>) -> Self {
        Self {
            access_key_id: access_key_id.into(),
            secret_access_key: secret_access_key.into(),
        }
    }
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &"<redacted>")
            .finish()
    }
}

/// A provisioner's failure, telling the library whether to retry.
///
/// ```
/// use lib_provisioner::provisioner::ProvisionError;
/// let err = ProvisionError::permanent("parameter endpoint is missing: add it to the StorageClass");
/// assert!(!err.is_retryable());
/// ```
#[derive(Debug, thiserror::Error)]
pub enum ProvisionError {
    /// The request cannot succeed as written (bad parameters, a name owned by
    /// someone else): the claim is marked Failed with this message, which
    /// should say how to fix it. The library still retries, slowly, in case
    /// the cause is fixed elsewhere (a class or Secret edited).
    #[error("{message}")]
    Permanent {
        /// What is wrong and how to fix it.
        message: String,
    },
    /// A passing fault (store unreachable, throttled): the claim stays
    /// Pending with this message and is retried with backoff.
    #[error("{message}")]
    Retryable {
        /// What failed.
        message: String,
        /// Retry no sooner than this, if the backend said so.
        retry_after: Option<Duration>,
    },
}

impl ProvisionError {
    /// A failure the user must fix.
    pub fn permanent(message: impl Into<String>) -> Self {
        Self::Permanent {
            message: message.into(),
        }
    }

    /// A passing failure, retried with backoff.
    pub fn retryable(message: impl Into<String>) -> Self {
        Self::Retryable {
            message: message.into(),
            retry_after: None,
        }
    }

    /// Whether retrying the same request can succeed without a change.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::Retryable { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_the_secret() {
        let c = Credentials::new("AKID", "very-secret-value");
        let shown = format!("{c:?} {:?}", BucketAccess::new("h", 1, c.clone()));
        assert!(shown.contains("AKID"));
        assert!(!shown.contains("very-secret-value"), "{shown}");
    }
}
