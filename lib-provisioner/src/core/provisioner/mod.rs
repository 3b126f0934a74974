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
//! - [`Provisioner::provision`] and [`Provisioner::grant`] with
//!   [`BucketRequest::reissue`] set: the claim is bound to the bucket
//!   already (its ObjectBucket, which only the library writes, says so) and
//!   its Secret is being restored after a user deleted or edited it. Issue
//!   its credentials again without the ownership checks a new claim needs
//!   (a bucket taken over from the Go library carries no marker of yours),
//!   and never create the bucket: if it is gone, return
//!   [`ProvisionError::permanent`].
//! - [`Provisioner::grant`]: if the claim already has access, return it again.
//! - [`Provisioner::delete`] and [`Provisioner::revoke`]: if the bucket or the
//!   access is already gone, return `Ok(())`.
//!
//! Anything a teardown needs later (a user name, a policy name) goes into
//! [`BucketAccess::additional_state`]: the library stores it in the
//! ObjectBucket and hands it back in [`TeardownRequest`].
//!
//! Every call runs under a timeout
//! ([`ControllerBuilder::provisioner_timeout`](crate::ControllerBuilder::provisioner_timeout)),
//! and with leader election never past the replica's lease: a call cut off
//! by either is retried like a [`ProvisionError::retryable`], so it must be
//! safe to abandon at any `.await`.
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
//!         let owner = buckets.entry(req.bucket_name.clone()).or_insert_with(|| req.claim.uid.clone());
//!         if *owner != req.claim.uid {
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

pub mod access;
pub mod error;
pub mod request;
pub mod revocation;

use std::sync::Arc;

use async_trait::async_trait;

pub use access::{BucketAccess, Credentials};
pub use error::{BoxError, ErrorKind, ProvisionError};
pub use request::{BucketRequest, ClaimIdentity, RotationRequest, TeardownRequest, UpdateRequest};
pub use revocation::Revocation;

/// An object store backend. See the [module docs](self) for the contract.
///
/// Implemented for `Arc<P>` and `Box<P>` (including `Box<dyn Provisioner>`),
/// so a provisioner picked at run time can be handed to the builder as is.
#[async_trait]
pub trait Provisioner: Send + Sync + 'static {
    /// Greenfield: create `req.bucket_name` and credentials for the claim.
    /// With [`BucketRequest::reissue`]: only credentials, for the bucket the
    /// claim is bound to (see the [module docs](self)).
    async fn provision(&self, req: &BucketRequest) -> Result<BucketAccess, ProvisionError>;

    /// Brownfield: give the claim credentials for the existing bucket named
    /// by the StorageClass (recorded at bind when
    /// [`BucketRequest::reissue`] is set).
    async fn grant(&self, req: &BucketRequest) -> Result<BucketAccess, ProvisionError>;

    /// Greenfield teardown under reclaim policy Delete: delete the bucket
    /// and the claim's credentials.
    async fn delete(&self, req: &TeardownRequest) -> Result<(), ProvisionError>;

    /// Remove the claim's credentials and keep the bucket: brownfield
    /// teardown, and greenfield teardown under reclaim policy Retain.
    async fn revoke(&self, req: &TeardownRequest) -> Result<(), ProvisionError>;

    /// Apply a Bound claim's changed `spec.additionalConfig` to its bucket
    /// (a quota, say). Called once per change, and again after a crash
    /// before the library recorded the result: it must be idempotent.
    ///
    /// Return a permanent error for a change the store cannot make, saying
    /// what is refused and what the user can do: the claim stays Bound with
    /// a `ConfigApplied=False` condition and an Event carrying the message,
    /// and `status.observedGeneration` stays at the last applied spec. A
    /// retryable error is retried with backoff.
    ///
    /// The default applies nothing and says so.
    async fn update(&self, req: &UpdateRequest) -> Result<(), ProvisionError> {
        let _ = req;
        Err(ProvisionError::unsupported(
            "this provisioner does not apply changes to spec.additionalConfig after the bucket is provisioned: restore the previous value, or create a new claim with the config you need",
        ))
    }

    /// Issue new credentials for a Bound claim's bucket while the previous
    /// ones (`req.previous_access_key_id`) keep working: the library records
    /// their access key id and `additional_state` on the ObjectBucket,
    /// writes them into the claim's Secret, then calls
    /// [`revoke_previous_key`](Self::revoke_previous_key). Called again
    /// after a crash before the Secret was switched (with the same
    /// `req.rotation`): credentials issued by the earlier call and never
    /// handed out may be replaced.
    ///
    /// Return a new access key id: one equal to the previous cannot be
    /// revoked without cutting the claim off, so the library then writes
    /// the returned secret, revokes nothing, and ends the rotation with
    /// `CredentialsRotated=False` (reason `KeyIdUnchanged`).
    ///
    /// The default cannot rotate and says so: the claim gets a
    /// `CredentialsRotated=False` condition and an Event.
    async fn rotate(&self, req: &RotationRequest) -> Result<BucketAccess, ProvisionError> {
        let _ = req;
        Err(ProvisionError::unsupported(
            "this provisioner cannot rotate credentials: delete the claim's Secret to have credentials issued anew (the old ones are revoked when the claim is deleted), or remove the annotation",
        ))
    }

    /// Revoke `req.previous_access_key_id`, which the claim's Secret no
    /// longer holds. Idempotent: called again after a crash. The default
    /// does nothing (for provisioners that cannot rotate).
    ///
    /// The library calls [`revoke_previous_key`](Self::revoke_previous_key),
    /// whose default calls this one; implement that one instead to say
    /// what was revoked.
    async fn revoke_previous(&self, req: &RotationRequest) -> Result<(), ProvisionError> {
        let _ = req;
        Ok(())
    }

    /// Revoke `req.previous_access_key_id` as
    /// [`revoke_previous`](Self::revoke_previous) does, and say what
    /// happened to it: revoked now, already gone (a repeat after a crash),
    /// or kept (and why). The claim's `CredentialsRotated` condition and
    /// Event say exactly that; a kept key shows `CredentialsRotated=False`.
    ///
    /// The key is the one the library recorded for the claim (its own
    /// record on the ObjectBucket, never the tenant's Secret); still,
    /// revoke only keys this provisioner issued for `req.bucket.claim`.
    ///
    /// The default calls `revoke_previous` and reports
    /// [`Revocation::Unreported`].
    async fn revoke_previous_key(
        &self,
        req: &RotationRequest,
    ) -> Result<Revocation, ProvisionError> {
        self.revoke_previous(req)
            .await
            .map(|()| Revocation::Unreported)
    }
}

macro_rules! forward {
    ($($ptr:ident),*) => {$(
        #[async_trait]
        impl<P: Provisioner + ?Sized> Provisioner for $ptr<P> {
            async fn provision(&self, req: &BucketRequest) -> Result<BucketAccess, ProvisionError> {
                (**self).provision(req).await
            }
            async fn grant(&self, req: &BucketRequest) -> Result<BucketAccess, ProvisionError> {
                (**self).grant(req).await
            }
            async fn delete(&self, req: &TeardownRequest) -> Result<(), ProvisionError> {
                (**self).delete(req).await
            }
            async fn revoke(&self, req: &TeardownRequest) -> Result<(), ProvisionError> {
                (**self).revoke(req).await
            }
            async fn update(&self, req: &UpdateRequest) -> Result<(), ProvisionError> {
                (**self).update(req).await
            }
            async fn rotate(&self, req: &RotationRequest) -> Result<BucketAccess, ProvisionError> {
                (**self).rotate(req).await
            }
            async fn revoke_previous(&self, req: &RotationRequest) -> Result<(), ProvisionError> {
                (**self).revoke_previous(req).await
            }
            async fn revoke_previous_key(&self, req: &RotationRequest) -> Result<Revocation, ProvisionError> {
                (**self).revoke_previous_key(req).await
            }
        }
    )*};
}
forward!(Arc, Box);
