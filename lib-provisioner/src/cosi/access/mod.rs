//! BucketAccesses: the binding role checks one against its class and its
//! claims and hands it to the driver ([`bind_plan`], [`bind_steps`]); the
//! driver role grants access and writes the Secrets ([`grant_plan`],
//! [`grant_steps`]); [`owner`] says which role a BucketAccess is with, and
//! [`reconcile`] runs that role's round. [`by_claim`] finds the accesses
//! that name a claim.

mod bind_plan;
mod bind_steps;
pub(crate) mod by_claim;
mod grant_plan;
mod grant_steps;
mod owner;
#[cfg(test)]
mod plan_tests;
pub(crate) mod reconcile;
