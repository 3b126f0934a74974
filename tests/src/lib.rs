//! Test support for the object-bucket provisioner workspace: a local environment
//! with etcd, a real kube-apiserver and an S3 server ([`testenv::TestEnv`]), and
//! RustFS, an S3 store with MinIO's admin API ([`rustfs::RustFs`]); the setup
//! the tests, the benchmark and the demo share ([`setup`]); the RBAC check
//! against the audit log ([`rbac`]); the chart installed on a real node and
//! an application Pod using a claim ([`node_chart`]).

pub mod cosi;
pub mod cosi_e2e;
pub mod cosi_recording;
pub mod layout;
pub mod lease;
pub mod node_chart;
pub mod protogen;
pub mod rbac;
pub mod recording;
pub mod reliability;
pub mod rustfs;
pub mod scoped_tracing;
pub mod setup;
pub mod testenv;

pub use testenv::{TestEnv, wait_for};
