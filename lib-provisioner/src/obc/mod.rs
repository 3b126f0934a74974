//! The ObjectBucketClaim family (`objectbucket.io/v1alpha1`): its types and
//! the claim and ObjectBucket state machines, over the API-neutral
//! [`core`](crate::core).
//!
//! - [`api`]: the `objectbucket.io/v1alpha1` types.
//! - `reconcile` (private): the state machine, as a pure planner and small
//!   idempotent steps.
//! - `writes` (private): every OBC Kubernetes write, one function each.

pub mod api;
pub(crate) mod reconcile;
pub(crate) mod writes;
