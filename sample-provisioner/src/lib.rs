//! A sample object bucket provisioner for S3-compatible stores, built on
//! `lib-provisioner`.
//!
//! - [`access`]: credentials mode, access mode and quota options.
//! - [`admin`]: a client for the MinIO admin API (users, policies, quotas).
//! - [`bucket_config`]: versioning, lifecycle, bucket policy and object
//!   lock, from a claim's `additionalConfig` and its class.
//! - [`bucket_records`]: what a grant takes from its buckets' records (their
//!   store, read-only).
//! - [`params`]: the StorageClass parameters, parsed and checked.
//! - [`store`]: bucket operations and the ownership record (tag or marker).
//! - [`credentials`]: who gets which credentials ([`credentials::CredentialIssuer`]).
//! - [`intents`]: creation intents as ConfigMaps (stores with bucket tags).
//! - [`errors`]: store failures, classified retryable or permanent.
//! - [`s3`]: [`S3Provisioner`], the `lib_provisioner::Provisioner`, which
//!   also serves Kubernetes COSI: buckets without users, and one user per
//!   access principal ([`credentials::per_principal`]); `--cosi-driver`
//!   serves it to the COSI sidecar over gRPC.
//! - [`serve`]: COSI's controllers in-process beside ObjectBucketClaims
//!   (`--cosi`, on when COSI's CRDs are installed).
//!
//! See `docs/sample-provisioner.md` for parameters, credentials modes and
//! deployment.

pub mod access;
pub mod admin;
pub mod bucket_config;
pub mod bucket_records;
pub mod credentials;
pub mod errors;
pub mod http;
pub mod intents;
mod ownership;
pub mod params;
pub mod s3;
pub mod serve;
pub mod store;

pub use s3::S3Provisioner;
