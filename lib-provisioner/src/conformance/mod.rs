//! The conformance kit: tests *your* provisioner against the contract, on
//! *your* store (feature `conformance`).
//!
//! The library's crash safety rests on the provisioner: every method
//! idempotent, safe to drop at any `.await` (the timeout), never failing
//! because its own earlier work exists, refusing what is not the claim's.
//! [`Kit`] calls your [`Provisioner`](crate::core::provisioner::Provisioner) directly (no
//! Kubernetes needed) in the orders a crash produces, and checks the
//! outcome on the store through a [`StoreProbe`] (does this bucket exist,
//! which buckets are there, what may these credentials do on this bucket,
//! which principals and policies are there). For S3 stores, feature
//! `conformance-s3` gives a ready one, `S3Probe`, which asks the store with
//! real S3 requests; write your own only for other stores, and make it ask
//! the store, never your provisioner's records. Each call the kit drops is
//! polled by hand and dropped after its k-th `Pending`, for every k: a real
//! cancellation at every point where the call waits.
//!
//! After every scenario the kit
//! compares the store's buckets, and the principals and policies
//! [`StoreProbe::inventory`] lists, with what was there before: what the
//! provisioner made and its teardown left fails the scenario, named.
//! Credentials are checked as a matrix: every [`Op`] class on their own
//! bucket (as the access mode allows), another claim's, a stranger's, and
//! look-alike names sharing a prefix or a suffix with it (none).
//!
//! The [`Report`] names the probe, lists what was not exercised or not
//! verified and why, then each [`Scenario`] (stable names such as
//! `provision.abandoned`), whether it passed, the check that failed, what
//! the provisioner and the store answered, and the [`Rule`] it checks with
//! a link to its section of `docs/provisioner-guide.md`.
//!
//! A provisioner serving bucket settings through `additionalConfig`
//! (versioning, lifecycle rules, a bucket policy, object lock) gives the
//! kit [`SettingsCases`] ([`Kit::bucket_settings`]): `settings.applied`
//! reads them back from the store ([`StoreProbe::bucket_settings`]) after
//! provisioning, its retry, a re-issue, an update and its repeat.
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
#[cfg(feature = "conformance-s3")]
mod s3;
mod scenario;
mod scenarios;
mod settings;

pub use kit::Kit;
pub use probe::{Answer, Op, ProbeError, StoreProbe};
pub use report::{NotExercised, Outcome, Report, ScenarioReport};
pub use rule::Rule;
#[cfg(feature = "conformance-s3")]
pub use s3::{ConfigReader, PrincipalLister, S3Probe};
pub use scenario::Scenario;
pub use settings::{BucketSetting, Expect, ExpectedSettings, SettingsCases, StoreSettings};
