//! The binding role for BucketClaims: a Bucket for each claim, the claim's
//! status from its Bucket, and deletion by the Bucket's policy.

pub(crate) mod plan;
#[cfg(test)]
mod plan_tests;
pub(crate) mod steps;
