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
//! The layout, one concept per module:
//! - [`core`]: what every API family shares: the [`provisioner`] trait and
//!   its contract, [`leader`] election, [`metrics`], [`failpoint`]s,
//!   [`names`], [`error`]s, the health server and the write helpers.
//! - [`obc`]: the `objectbucket.io/v1alpha1` family: its [`api`] types and
//!   its state machines.
//! - [`controller`]: the builder, which starts the families' controllers
//!   under one leader election, one health server and one metrics registry.
//! - `conformance` (feature `conformance`): a kit that tests a provisioner
//!   against the contract on its own store.
//! - [`cosi`]: the `objectstorage.k8s.io/v1alpha2` family (Kubernetes
//!   COSI) from the same provisioner: its types and controllers;
//!   `cosi::grpc` (feature `cosi-grpc`) serves a provisioner as a COSI gRPC
//!   driver.

#[cfg(feature = "conformance")]
pub mod conformance;
pub mod controller;
pub mod core;
pub mod cosi;
pub mod obc;

// The public API keeps the paths it had before the split into families
// (`lib_provisioner::provisioner`, `::api`, ...). Inside the crate, modules
// use their real paths (`crate::core::...`, `crate::obc::...`): these
// re-exports are for users only.
pub use crate::core::{error, failpoint, leader, metrics, names, provisioner, sweep};
pub use crate::obc::api;

pub use crate::core::server::WATCHES_DEAD_LIMIT;
pub use crate::obc::reconcile::status::{
    BOUND_CONDITION, CONFIG_APPLIED_CONDITION, CREDENTIALS_ROTATED_CONDITION,
};
pub use controller::{
    ControllerBuilder, DEFAULT_CONFIG_CHECK_INTERVAL, DEFAULT_PROVISIONER_TIMEOUT, EventLevel,
    WatchScope,
};
pub use error::{Error, RunError};
pub use provisioner::{
    BucketAccess, BucketRequest, ClaimIdentity, Credentials, ProvisionError, Provisioner,
    Revocation, RotationRequest, TeardownRequest, UpdateRequest,
};
