//! The conformance kit: tests *your* provisioner against the contract, on
//! *your* store (feature `conformance`).
//!
//! The library's crash safety rests on the provisioner: every method
//! idempotent, safe to drop at any `.await` (the timeout), never failing
//! because its own earlier work exists, refusing what is not the claim's.
//! [`Kit`] calls your [`Provisioner`](crate::core::provisioner::Provisioner) directly (no
//! Kubernetes needed) in the orders a crash produces, and checks the
//! outcome on the store through a [`StoreProbe`] you write (does this
//! bucket exist, which buckets are there, do these credentials reach this
//! bucket). Each call the kit drops is polled by hand and dropped after its
//! k-th `Pending`, for every k: a real cancellation at every point where the
//! call waits.
//!
//! The [`Report`] lists each [`Scenario`] (stable names such as
//! `provision.abandoned`), whether it passed, what the provisioner and the
//! store answered, and the [`Rule`] it checks with a link to its section of
//! `docs/provisioner-guide.md`.
//!
//! Every name is unique to the run (buckets `kit<run>-…`, claims in
//! namespace `kit-<run>` with fresh UIDs), and each scenario cleans up, so
//! a store can be reused; it should not be changed by anyone else during
//! the run (a bucket appearing or disappearing fails the scenario).
//!
//! ```no_run
//! use std::collections::BTreeMap;
//! use lib_provisioner::Provisioner;
//! use lib_provisioner::conformance::{Kit, StoreProbe};
//!
//! async fn conformance(provisioner: impl Provisioner, probe: impl StoreProbe) {
//!     let report = Kit::new(provisioner, probe)
//!         .parameter("endpoint", "http://127.0.0.1:9000")
//!         .read_only_config(BTreeMap::from([("accessMode".into(), "read-only".into())]))
//!         .run()
//!         .await;
//!     assert!(report.passed(), "{report}");
//! }
//! ```

mod calls;
mod checks;
mod ctx;
mod drive;
mod kit;
mod probe;
mod report;
mod rule;
mod scenario;
mod scenarios;

pub use kit::Kit;
pub use probe::{Answer, Op, ProbeError, StoreProbe};
pub use report::{Outcome, Report, ScenarioReport};
pub use rule::Rule;
pub use scenario::Scenario;
