//! The store sweep: a store that reconciles itself. Every interval, while
//! leading and once every API family's caches have listed, the sweep asks
//! each class's provisioner what it made in the store
//! ([`Provisioner::inventory`](crate::core::provisioner::Provisioner::inventory)),
//! matches each thing against the live owners by UID, and removes
//! principals and policies that had none for longer than the grace period,
//! seen so in two rounds ([`Provisioner::remove_orphan`](crate::core::provisioner::Provisioner::remove_orphan)).
//! Buckets without an owner are reported; one is deleted only when its
//! store recorded reclaim policy `Delete` with it.
//!
//! - [`plan`]: the decisions, a pure function (tests beside it).
//! - [`source`]: what the families hand the sweep ([`SweepSource`]).
//! - `round` (private): one observation, shared by the sweep and the audit.
//! - `run` (private): the loop and its effects (removals, logs, metrics).
//! - [`audit`]: the same observation, read-only, from the API.

pub mod audit;
pub mod plan;
mod round;
pub(crate) mod run;
pub mod source;

use std::time::Duration;

pub use audit::{Audit, AuditError};
pub use plan::{Decision, Planned, SweepPlan};
pub use source::{Snapshot, SweepClass, SweepSource};

/// How often the sweep lists the stores unless
/// [`ControllerBuilder::sweep_interval`](crate::controller::ControllerBuilder::sweep_interval)
/// says otherwise.
pub const DEFAULT_SWEEP_INTERVAL: Duration = Duration::from_secs(300);
/// How long a principal may be without a live owner before the sweep
/// removes it, unless
/// [`ControllerBuilder::orphan_grace`](crate::controller::ControllerBuilder::orphan_grace)
/// says otherwise.
pub const DEFAULT_ORPHAN_GRACE: Duration = Duration::from_secs(600);

/// The sweep's timing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SweepSettings {
    /// Time between two rounds.
    pub interval: Duration,
    /// How long an orphan waits (at least one more round) before removal.
    pub grace: Duration,
}
