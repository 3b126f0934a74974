//! Tenant attacks: what a claim's owner controls (the claim's spec,
//! annotations and labels, the Secret and ConfigMap in their namespace, the
//! timing of their edits) is used to reach another tenant's bucket, key or
//! data. Every test counts its attacks and what they reached in the
//! [`Summary`](obc_tests::reliability::Summary) (`attacks`,
//! `foreign_buckets`, `foreign_revocations`, `data_lost`); each of the last
//! three must stay 0. The threat model they prove is `docs/security.md`.
//! `cosi` does the same through COSI's BucketClaims and BucketAccesses.

mod after_bind;
mod cosi;
mod provision;
mod store;
