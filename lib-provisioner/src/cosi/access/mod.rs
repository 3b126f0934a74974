//! BucketAccesses: the binding role checks one against its class and its
//! claims and hands it to the driver ([`bind_plan`], [`bind_steps`]); the
//! driver role grants access and writes the Secrets ([`grant_plan`],
//! [`grant_steps`]); [`owner`] says which role a BucketAccess is with, and
//! [`reconcile`] runs that role's round.

mod bind_plan;
mod bind_steps;
mod grant_plan;
mod grant_steps;
mod owner;
#[cfg(test)]
mod plan_tests;
pub(crate) mod reconcile;

use super::api::BucketAccess;

/// Whether `access` is in `namespace` and names claim `claim`: what makes
/// a claim's deletion wait for it, and a claim's events reach it.
pub(crate) fn names_claim(access: &BucketAccess, namespace: &str, claim: &str) -> bool {
    access.metadata.namespace.as_deref() == Some(namespace)
        && access
            .spec
            .bucket_claims
            .iter()
            .any(|c| c.bucket_claim_name == claim)
}
