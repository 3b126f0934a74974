//! A Kubernetes COSI driver (`objectstorage.k8s.io/v1alpha2`, gRPC package
//! `sigs.k8s.io.cosi.v1alpha2`) serving any [`Provisioner`]: run
//! [`CosiDriver`] on the socket the COSI sidecar talks to, and the same
//! provisioner that serves ObjectBucketClaims serves BucketClaims and
//! BucketAccesses.
//!
//! ```no_run
//! # async fn demo(my_provisioner: impl lib_provisioner::Provisioner) -> Result<(), Box<dyn std::error::Error>> {
//! use lib_provisioner::cosi::grpc::{CosiDriver, DEFAULT_ENDPOINT, ENDPOINT_ENV, Protocol, socket_path};
//!
//! let endpoint = std::env::var(ENDPOINT_ENV).unwrap_or_else(|_| DEFAULT_ENDPOINT.to_owned());
//! CosiDriver::new(my_provisioner, "s3.example.com", [Protocol::S3])?
//!     .serve(socket_path(&endpoint)?)
//!     .await?;
//! # Ok(()) }
//! ```
//!
//! # What each call becomes
//!
//! | RPC | [`Provisioner`] method | with |
//! |---|---|---|
//! | `DriverGetInfo` | — | the name and protocols given to [`CosiDriver::new`] |
//! | `DriverCreateBucket` | [`create_bucket`](crate::core::provisioner::Provisioner::create_bucket) | `bucket_name` = `name` (the Bucket object's name, `bc-<BucketClaim UID>`), returned as the bucket id |
//! | `DriverGetExistingBucket` | [`existing_bucket`](crate::core::provisioner::Provisioner::existing_bucket) | `bucket_name` = `existing_bucket_id`, returned as the bucket id |
//! | `DriverGetBucket` (upstream's newer name for `DriverGetExistingBucket`) | [`existing_bucket`](crate::core::provisioner::Provisioner::existing_bucket) | `bucket_name` = `bucket_id`, returned as the bucket id; answers exactly as `DriverGetExistingBucket` |
//! | `DriverDeleteBucket` | [`delete`](crate::core::provisioner::Provisioner::delete) | `bucket_name` = `bucket_id` |
//! | `DriverGrantBucketAccess` | [`grant_access`](crate::core::provisioner::Provisioner::grant_access) | `account_name`, each `bucket_id` with its mode; the returned `account_id` goes back |
//! | `DriverRevokeBucketAccess` | [`revoke_access`](crate::core::provisioner::Provisioner::revoke_access) | `account_id` and the bucket ids |
//!
//! Every call carries the class's `parameters` as the request's
//! `parameters`; class names are unknown (empty). Only S3 and
//! authentication type `Key` are served (a provisioner issues key pairs):
//! `ServiceAccount`, another protocol, or a missing access mode is
//! `INVALID_ARGUMENT` saying so. Errors map as [`status_of`] says, except
//! that a permanent error of a deletion or revocation (a bucket that still
//! holds objects) is `FAILED_PRECONDITION`, which the sidecar retries: the
//! deletion resumes once the user has fixed the cause.
//!
//! # Only ids come back
//!
//! The sidecar keeps nothing of a driver's but the bucket id and the
//! account id: `DriverDeleteBucket` and `DriverRevokeBucketAccess` carry
//! those and the class parameters, never the `additional_state` a
//! provisioner returned. So on this path the claim or principal of every
//! request is named by the id the sidecar sends (the bucket name for bucket
//! calls, `account_name` at grant and `account_id` at revocation), and its
//! UID is the one that id names: `<uid>` of `bc-<uid>` and `ba-<uid>`
//! ([`owner_uid_of_id`](crate::cosi::api::owner_uid_of_id)), the id itself
//! otherwise. That is the UID the in-process driver role hands the
//! provisioner for the same BucketClaim or BucketAccess, so what one mode
//! made the other finds as the same owner's, and an operator can move
//! between upstream's sidecar and the in-process mode over live Buckets
//! and BucketAccesses. A provisioner that keys what it makes on
//! `claim.uid` / `principal.uid` and returns `account_name` as the account
//! id (the default [`grant_access`](crate::core::provisioner::Provisioner::grant_access) does) finds
//! its work again from the ids alone; the sample provisioner derives its
//! user and policy names from them (and still finds what versions before
//! this one made on this path, keyed by the whole id).
//!
//! # Version
//!
//! The API is COSI's at upstream commit `ee00c269` (March 2026), plus
//! `DriverGetBucket`: upstream renamed `DriverGetExistingBucket` to it
//! (PR #356, `existing_bucket_id` → `bucket_id`), and both names are served
//! with the same behaviour, so a sidecar from before or after the rename
//! finds its RPC. The new messages keep the old ones' field numbers
//! (assumed: no upstream `cosi.proto` after the rename was readable).
//!
//! Not served: `DriverGenerateBucketId`, an open upstream proposal
//! (PR #384). Should it be merged as proposed, it maps with no provisioner
//! call: the bucket id is the bucket's name in the store, which today is
//! the Bucket object's name (`bc-<BucketClaim UID>`) that
//! `DriverCreateBucket` receives as `name`; so `DriverGenerateBucketId`
//! would check `name` and `protocols` as `DriverCreateBucket` does and
//! return `name` as `bucket_id`, and `DriverCreateBucket`, then carrying
//! `bucket_id` instead of `name`, would call `create_bucket` with
//! `bucket_name` = `bucket_id`. Ids recorded before the change stay
//! valid: they are the same strings.
//!
//! The messages and service traits in [`proto`] are generated from
//! `proto/cosi.proto` and checked in (no protoc needed to build).
//!
//! [`Provisioner`]: crate::core::provisioner::Provisioner

mod access;
mod buckets;
mod driver;
mod endpoint;
mod protocol;
mod redact;
mod service;
mod status;

/// The COSI messages, clients and service traits, generated from
/// `proto/cosi.proto`.
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod proto {
    include!("generated.rs");
}

pub use driver::{CosiDriver, DriverError};
pub use endpoint::{DEFAULT_ENDPOINT, ENDPOINT_ENV, EndpointError, socket_path};
pub use protocol::{DEFAULT_REGION, Protocol};
pub use status::status_of;
