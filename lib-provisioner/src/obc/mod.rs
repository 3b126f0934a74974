//! The ObjectBucketClaim family (`objectbucket.io/v1alpha1`): its types and
//! the claim and ObjectBucket state machines, over the API-neutral
//! [`core`](crate::core).
//!
//! - [`api`]: the `objectbucket.io/v1alpha1` types.
//! - `reconcile` (private): the state machine, as a pure planner and small
//!   idempotent steps.
//! - `requests` (private): the provisioner's requests built from a claim
//!   and its ObjectBucket.
//! - `wiring` (private): the family's watches, caches and reconcilers, put
//!   together for the composition ([`crate::controller`]).
//! - `metrics` (private): `obc_claims`, the cached claims by phase.
//! - `writes` (private): every OBC Kubernetes write, one function each.

pub mod api;
mod metrics;
pub(crate) mod reconcile;
pub(crate) mod requests;
pub(crate) mod sweep;
pub(crate) mod wiring;
pub(crate) mod writes;

/// What the caches keep of a claim's Secret or ConfigMap. Public only so
/// that the project's benchmark can measure what each cache costs; not part
/// of the API.
#[doc(hidden)]
pub use reconcile::child_meta::CachedChild;

/// The cache of a claim's children (see [`ChildCache`]). Public only so
/// that the project's benchmark can measure what it costs; not part of
/// the API.
#[doc(hidden)]
pub use reconcile::child_cache::{ChildCache, ChildWatch};

/// What the caches keep of a claim and an ObjectBucket (see [`Compact`]).
/// Public only so that the project's benchmark can measure what each cache
/// costs; not part of the API.
#[doc(hidden)]
pub use crate::core::watch::compact::Compact;

/// A kind a watch can fill a cache with. Public only so that the project's
/// benchmark can build caches as the library does; not part of the API.
#[doc(hidden)]
pub use crate::core::watch::feeds::Watchable;

/// A claim as the caches keep it.
pub(crate) type CachedClaim = Compact<api::ObjectBucketClaim>;
/// An ObjectBucket as the caches keep it.
pub(crate) type CachedBucket = Compact<api::ObjectBucket>;
