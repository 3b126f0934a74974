//! Kubernetes COSI (`objectstorage.k8s.io/v1alpha2`) served from the same
//! [`Provisioner`](crate::core::provisioner::Provisioner) as ObjectBucketClaims.
//!
//! [`ControllerBuilder::cosi`](crate::controller::ControllerBuilder::cosi) starts two
//! roles beside the OBC controllers, sharing their leader election,
//! metrics, health and provisioner timeout:
//!
//! - the **binding role** (upstream's COSI controller): BucketClaims get a
//!   Bucket (`bc-<claim uid>` from their BucketClass, or the static Bucket
//!   they name), BucketAccesses are checked against their class and handed
//!   to the driver with the buckets of their claims. It serves every
//!   driver; turn it off ([`CosiOptions::without_binding`]) where upstream's
//!   controller runs.
//! - the **driver role** (upstream's sidecar): Buckets and BucketAccesses of
//!   this driver become [`Provisioner::create_bucket`](crate::core::provisioner::Provisioner::create_bucket),
//!   [`existing_bucket`](crate::core::provisioner::Provisioner::existing_bucket),
//!   [`grant_access`](crate::core::provisioner::Provisioner::grant_access) and their teardowns;
//!   credentials land in one Secret per claim of a BucketAccess.
//!
//! Each kind follows a pure planner (`claim/plan.rs`, `bucket/plan.rs`,
//! `access/bind_plan.rs`, `access/grant_plan.rs`) that picks the next step
//! from what exists; each step is one write or one provisioner call, so a
//! restart after any of them takes the same decision again
//! ([`failpoint::POINTS`] names the crash points). One loop (`pass.rs`)
//! runs every kind: read the object, plan, take the step, again.
//!
//! `grpc` (feature `cosi-grpc`) is the other way in: the provisioner as a
//! COSI gRPC driver behind upstream's own sidecar.

mod access;
mod answer;
pub mod api;
mod bucket;
mod claim;
mod context;
pub mod failpoint;
mod fresh;
mod keys;
mod options;
mod pace;
mod pass;
mod plan;
mod refusals;
mod show;
pub(crate) mod sweep;
pub(crate) mod wiring;
mod writes;

pub use options::{CosiOptions, InvalidDriverName};
#[cfg(feature = "cosi-grpc")]
pub mod grpc;
