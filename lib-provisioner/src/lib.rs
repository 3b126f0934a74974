//! A framework for Kubernetes object bucket provisioners.
//!
//! Users create an `ObjectBucketClaim` naming a StorageClass; the library
//! binds it to a cluster-scoped `ObjectBucket` and gives the claim's
//! namespace a Secret (credentials) and a ConfigMap (endpoint) named after
//! the claim. A provisioner author implements [`Provisioner`] (four async
//! methods) and starts a [`ControllerBuilder`]; the library owns the state
//! machine, finalizers, reclaim policy, status, events, retries, leader
//! election and metrics, and resumes safely after a crash between any two of
//! its writes.
//!
//! Modules, one per concept:
//! - [`api`]: the `objectbucket.io/v1alpha1` types.
//! - [`provisioner`]: the trait and its contract.
//! - [`names`]: bucket name rules and generation.
//! - [`controller`]: the builder and the wiring.
//! - [`leader`], [`metrics`], [`failpoint`]: operations.
//! - `conformance` (feature `conformance`): a kit that tests a provisioner
//!   against the contract on its own store.
//! - [`cosi`]: Kubernetes COSI (`objectstorage.k8s.io/v1alpha2`) from the
//!   same provisioner: its types and controllers; `cosi::grpc` (feature
//!   `cosi-grpc`) serves a provisioner as a COSI gRPC driver.
//! - `reconcile` (private): the state machine, as small idempotent steps.
//! - `writes` (private): every Kubernetes write, one function each.

pub mod api;
#[cfg(feature = "conformance")]
pub mod conformance;
pub mod controller;
pub mod cosi;
pub mod error;
pub mod failpoint;
pub mod leader;
pub mod metrics;
pub mod names;
pub mod provisioner;
mod reconcile;
mod server;
mod writes;

pub use controller::{ControllerBuilder, DEFAULT_PROVISIONER_TIMEOUT, WatchScope};
pub use error::{Error, RunError};
pub use provisioner::{
    BucketAccess, BucketRequest, ClaimIdentity, Credentials, ProvisionError, Provisioner,
    Revocation, RotationRequest, TeardownRequest, UpdateRequest,
};
pub use reconcile::status::{
    BOUND_CONDITION, CONFIG_APPLIED_CONDITION, CREDENTIALS_ROTATED_CONDITION,
};
pub use server::WATCHES_DEAD_LIMIT;
