//! The driver role for Buckets: the bucket in the store for each Bucket of
//! this driver, and its deletion under policy Delete.

pub(crate) mod plan;
#[cfg(test)]
mod plan_tests;
pub(crate) mod steps;
