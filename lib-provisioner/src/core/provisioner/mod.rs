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
//! # Buckets without credentials, static buckets, access by principal
//!
//! Kubernetes COSI (and any API where buckets and access are separate
//! objects) calls four more methods. Each has a default built from the
//! methods above, so a provisioner serves both APIs unchanged; override
//! them to do better. The same rules hold:
//!
//! - [`Provisioner::create_bucket`]: keyed by [`BucketRequest::bucket_name`]
//!   (COSI: `bc-<BucketClaim UID>`, sent again on every reconcile) and
//!   `claim.uid`. Exists and was made by you for this claim: return it again.
//!   Exists otherwise: [`ProvisionError::already_exists`]. Create no
//!   credentials if you can help it (the default calls `provision` and
//!   drops the credentials it returns; [`Provisioner::delete`] removes them
//!   with the bucket).
//! - [`Provisioner::existing_bucket`]: `bucket_name` is the id an
//!   administrator gave for a bucket that exists already. Never create it:
//!   missing is [`ProvisionError::not_found`] (retried); a bucket you cannot
//!   serve is [`ProvisionError::already_exists`]. Default: not supported.
//! - [`Provisioner::grant_access`]: keyed by [`AccessRequest::account_name`]
//!   and the principal's UID: called again after a crash, return the same
//!   account (same or fresh credentials), never a second one. Give each
//!   bucket exactly its [`AccessMode`], and never create a bucket: one that
//!   is missing is [`ProvisionError::not_found`]. Which buckets are in the
//!   request is the library's decision, made from records a tenant cannot
//!   write: grant exactly those, and never let parameters, labels or
//!   annotations widen them. A mode you cannot give is
//!   [`ProvisionError::unsupported_access_mode`]; several buckets under one
//!   credential when you cannot is [`ProvisionError::multi_bucket_unsupported`].
//! - [`Provisioner::revoke_access`]: already gone is `Ok(())`. Remove only
//!   what you made for this principal (a user whose record names another
//!   principal, or a claim, stays).
//! - The COSI gRPC driver learns only ids: `DriverDeleteBucket` and
//!   `DriverRevokeBucketAccess` carry the bucket id and account id you
//!   returned, and the class parameters, never `additional_state`. So
//!   [`Provisioner::delete`] and [`Provisioner::revoke_access`] must work
//!   from [`TeardownRequest::bucket_name`] and [`AccessRevocation::account_id`]
//!   alone (derive user and policy names from them); `additional_state` is
//!   a hint when a caller kept it.
//!
//! The defaults map access onto the claim methods with the principal
//! standing for the claim: [`Provisioner::grant_access`] calls
//! [`Provisioner::grant`] with a [`BucketRequest`] whose `claim` is
//! [`AccessRequest::principal`] (so what `grant` makes is keyed by the
//! principal's UID and never shared with a claim or another principal) and
//! returns `account_name` as the account id; only one bucket in
//! [`AccessMode::ReadWrite`] is accepted. [`Provisioner::revoke_access`]
//! calls [`Provisioner::revoke`] for each bucket with the same principal.
//!
//! # What you made, listed from the store
//!
//! [`Provisioner::inventory`] lists what the provisioner made in the store
//! one class reaches (principals, policies, buckets), each with the owner's
//! UID when the store says it. The library's sweep matches them against
//! the live objects (by UID, from records a tenant cannot write) and, after
//! a grace period, removes principals without an owner through
//! [`Provisioner::remove_orphan`]; buckets without an owner are reported,
//! and deleted only when the store recorded reclaim policy `Delete` with
//! them. Both default to "not supported": the sweep then reports the class
//! as not swept.
//!
//! Every call runs under a timeout
//! ([`ControllerBuilder::provisioner_timeout`](crate::controller::ControllerBuilder::provisioner_timeout)),
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
pub mod access_mode;
pub mod allow_list;
pub mod bucket_info;
pub mod config_check;
mod defaults;
pub mod endpoint;
pub mod error;
pub mod grant;
pub mod inventory;
pub mod reason;
pub mod reclaim;
pub mod request;
pub mod revocation;

use std::sync::Arc;

use async_trait::async_trait;

pub use access::{BucketAccess, Credentials};
pub use access_mode::{AccessMode, UnknownAccessMode};
pub use allow_list::ConfigAllowList;
pub use bucket_info::{AddressingStyle, BucketInfo, StoreEndpoint};
pub use config_check::ConfigCheck;
pub use endpoint::Endpoint;
pub use error::{BoxError, ErrorKind, ProvisionError};
pub use grant::{AccessGrant, AccessRequest, AccessRevocation, AccessedBucket};
pub use inventory::{InventoryRequest, Made, MadeKind, OrphanRemoval};
pub use reason::ErrorReason;
pub use reclaim::ReclaimPolicy;
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
    /// teardown, and greenfield teardown under reclaim policy Retain. COSI
    /// calls it too (no credentials: a Bucket's keys belong to its
    /// BucketAccesses) for a dynamic Bucket deleted under deletionPolicy
    /// `Retain`, once per pass while that deletion is refused, with
    /// `reclaim_policy` `Retain`: a provisioner that records the policy in
    /// its store for [`inventory`](Self::inventory) records the change
    /// there (the policy is mutable on ObjectBuckets and Buckets).
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

    /// Compare a Bound claim's bucket with the config recorded as applied
    /// (`req.bucket.additional_config`, equal to `req.previous_config`) and
    /// put back what someone changed on the store behind the claim's back.
    /// The library calls it at most once per
    /// [`ControllerBuilder::config_check_interval`](crate::ControllerBuilder::config_check_interval)
    /// per claim, spread over that interval (never all at once after a
    /// restart). Idempotent; it must never widen what the claim was given.
    ///
    /// [`ConfigCheck::Restored`] gives the claim a Warning Event naming what
    /// was put back; an error shows `ConfigApplied=False` (reason
    /// `ConfigDrifted`) and an Event with its message, and is retried with
    /// backoff until a check passes.
    ///
    /// The default checks nothing.
    async fn check_config(&self, req: &UpdateRequest) -> Result<ConfigCheck, ProvisionError> {
        let _ = req;
        Ok(ConfigCheck::NotChecked)
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

    /// Create `req.bucket_name` for `req.claim`, with no credentials (COSI
    /// `DriverCreateBucket`). Idempotent, keyed by bucket name and claim UID
    /// (see the [module docs](self)).
    ///
    /// The default calls [`provision`](Self::provision) and drops the
    /// credentials it made; [`delete`](Self::delete) removes them later
    /// with the bucket. Override it to make none.
    async fn create_bucket(&self, req: &BucketRequest) -> Result<BucketInfo, ProvisionError> {
        defaults::create_bucket(self, req).await
    }

    /// Look up a bucket an administrator made: `req.bucket_name` is its id
    /// in the store (COSI `DriverGetExistingBucket`). Never create it: a
    /// missing bucket is [`ProvisionError::not_found`].
    ///
    /// The default refuses: not supported (a permanent error the user sees).
    async fn existing_bucket(&self, req: &BucketRequest) -> Result<BucketInfo, ProvisionError> {
        Err(defaults::existing_bucket(req))
    }

    /// Give one principal one credential for the request's buckets, each in
    /// its own [`AccessMode`] (COSI `DriverGrantBucketAccess`). Idempotent,
    /// keyed by `account_name` and the principal's UID; never creates a
    /// bucket (see the [module docs](self)).
    ///
    /// The default accepts one bucket in [`AccessMode::ReadWrite`] and calls
    /// [`grant`](Self::grant) with the principal as the claim; any other
    /// mode is [`ProvisionError::unsupported_access_mode`], more than one
    /// bucket [`ProvisionError::multi_bucket_unsupported`].
    async fn grant_access(&self, req: &AccessRequest) -> Result<AccessGrant, ProvisionError> {
        defaults::grant_access(self, req).await
    }

    /// End a principal's access (COSI `DriverRevokeBucketAccess`). Already
    /// gone is `Ok(())`; must work from `req.account_id` alone.
    ///
    /// The default calls [`revoke`](Self::revoke) for each bucket with the
    /// principal as the claim.
    async fn revoke_access(&self, req: &AccessRevocation) -> Result<(), ProvisionError> {
        defaults::revoke_access(self, req).await
    }

    /// List what this provisioner made in the store `req`'s class reaches:
    /// principals, policies and buckets, each with the owner's UID when the
    /// store records it or a name derived from one of
    /// [`InventoryRequest::owners`] says so. Read-only; called by the
    /// library's sweep (and an audit) under the call timeout.
    ///
    /// List only what you made (by your names and tags), never what an
    /// administrator or another provisioner keeps in the same store.
    ///
    /// The default cannot list and says so: the store is not swept.
    async fn inventory(&self, req: &InventoryRequest) -> Result<Vec<Made>, ProvisionError> {
        let _ = req;
        Err(ProvisionError::unsupported(
            "this provisioner cannot list what it made in the store, so nothing there is checked against live owners: implement Provisioner::inventory to have orphaned users and buckets found",
        ))
    }

    /// Remove one principal or policy [`inventory`](Self::inventory)
    /// listed and the sweep found without a live owner for longer than its
    /// grace period (a principal's policy with it), or a bucket the store
    /// recorded reclaim policy `Delete` with. Already gone is `Ok(())`.
    /// Remove nothing but `req.made`, and re-check from the store that it
    /// is still what you listed (a bucket: still recorded `Delete`).
    ///
    /// The default removes nothing and says so.
    async fn remove_orphan(&self, req: &OrphanRemoval) -> Result<(), ProvisionError> {
        let _ = req;
        Err(ProvisionError::unsupported(
            "this provisioner cannot remove a principal it listed: implement Provisioner::remove_orphan, or remove it by hand",
        ))
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
            async fn check_config(&self, req: &UpdateRequest) -> Result<ConfigCheck, ProvisionError> {
                (**self).check_config(req).await
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
            async fn create_bucket(&self, req: &BucketRequest) -> Result<BucketInfo, ProvisionError> {
                (**self).create_bucket(req).await
            }
            async fn existing_bucket(&self, req: &BucketRequest) -> Result<BucketInfo, ProvisionError> {
                (**self).existing_bucket(req).await
            }
            async fn grant_access(&self, req: &AccessRequest) -> Result<AccessGrant, ProvisionError> {
                (**self).grant_access(req).await
            }
            async fn revoke_access(&self, req: &AccessRevocation) -> Result<(), ProvisionError> {
                (**self).revoke_access(req).await
            }
            async fn inventory(&self, req: &InventoryRequest) -> Result<Vec<Made>, ProvisionError> {
                (**self).inventory(req).await
            }
            async fn remove_orphan(&self, req: &OrphanRemoval) -> Result<(), ProvisionError> {
                (**self).remove_orphan(req).await
            }
        }
    )*};
}
forward!(Arc, Box);

#[cfg(test)]
#[path = "defaults_tests.rs"]
mod defaults_tests;
