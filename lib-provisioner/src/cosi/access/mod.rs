//! BucketAccesses: the binding role checks one against its class and its
//! claims and hands it to the driver ([`bind_plan`]); the driver role
//! grants access and writes the Secrets ([`grant_plan`]); [`owner`] says
//! which role a BucketAccess is with.

pub(crate) mod bind_plan;
pub(crate) mod grant_plan;
mod grant_steps;
pub(crate) mod owner;
#[cfg(test)]
mod plan_tests;
pub(crate) mod steps;
