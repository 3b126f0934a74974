//! The API-neutral core: what every API family (OBC's `objectbucket.io`,
//! COSI's `objectstorage.k8s.io`) shares.
//!
//! - [`provisioner`]: the trait an author implements and its contract.
//! - [`leader`]: leader election and the lease-bounded call limit.
//! - [`metrics`] and the health server (`server`, private).
//! - [`failpoint`]: named crash points for the reliability suite.
//! - [`names`]: bucket name rules and generation.
//! - [`error`]: the library's error types.
//! - [`events`]: which Events the controllers send.
//! - `calls` (private): how every provisioner call runs (timeout, lease,
//!   metrics).
//! - `runtime` (private): what the composition hands each family
//!   (`Shared`: client, metrics, health, leadership, stop) and what each
//!   family's reconcile context keeps of it (`Runtime`: act only while
//!   leading, timed provisioner calls, cache readiness).
//! - `backoff`, `watch`, `log` (private): what both families' controllers
//!   are built from: per-object retry backoff and the error policy, watch
//!   retries and trigger gates, and the log of controller errors.
//! - `ids` (private): UIDs and resource versions packed for per-object maps.
//! - [`sweep`]: the store sweep (orphaned principals found and removed
//!   after a grace period, orphaned buckets reported) and its audit.
//! - `writes` (private): what every Kubernetes write shares (field manager,
//!   patch parameters).
//!
//! Nothing here names an API family's kinds: a change here reaches both.

pub(crate) mod backoff;
pub(crate) mod calls;
pub mod error;
pub mod events;
pub mod failpoint;
pub(crate) mod ids;
pub mod leader;
pub(crate) mod log;
pub mod metrics;
pub mod names;
pub mod provisioner;
pub(crate) mod runtime;
pub(crate) mod server;
pub mod sweep;
pub(crate) mod watch;
pub(crate) mod writes;
