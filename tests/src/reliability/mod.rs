//! Support for the reliability suite (`tests/tests/reliability/`):
//! provisioner processes that can be crashed, killed, frozen and restarted,
//! a fixture with the sample S3 provisioner's RBAC, admin Secret and
//! classes, a check that the cluster and the S3 store agree exactly, a scan
//! of every captured log for credentials, and the summary table.

mod agreement;
mod logs;
mod principals;
mod process;
mod sample;
mod store;
mod suite;
mod summary;
mod wait;

pub use agreement::{Agreement, Deleted, Expectations, agreement, bucket_of};
pub use logs::{
    Leak, assert_no_leaks, log_root, register_claim_secrets, register_env_secrets, register_secret,
    registered_secrets, scan_logs,
};
pub use principals::ownerless_users;
pub use process::{ACT_MARKERS, Launch, Proc, acts, count_operations, ensure_no_acts, is_act};
pub use sample::{Classes, Kind, create_classes, install_sample, sample_params};
pub use store::{Intent, store_buckets, store_intents};
pub use suite::{RUSTFS_ADMIN_SECRET, SampleSuite, claim_bucket, claim_keys, walked_settings};
pub use summary::{Counts, REPORT_ENV, Record, Summary, suite_table};
pub use wait::{converge, wait_all_bound, wait_all_gone};

pub use crate::setup::{create_class, events_for, wait_event};

/// The provisioner name of `deploy/` (and of the RBAC's Lease name).
pub const PROVISIONER: &str = "objectbucket.io/sample-s3";
/// Namespace of the deployment, the admin Secret and the Lease.
pub const SYSTEM_NAMESPACE: &str = "obc-system";
/// Name of the admin Secret the classes name.
pub const ADMIN_SECRET: &str = "s3-admin";
/// The Lease `deploy/rbac.yaml` lets the provisioner renew.
pub const LEASE_NAME: &str = "objectbucket.io-sample-s3";
/// The brownfield bucket the fixture creates (with data).
pub const SHARED_BUCKET: &str = "shared-data";
