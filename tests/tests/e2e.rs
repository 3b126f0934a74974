//! Every test of the `obc-tests` crate, in one binary: one link instead of
//! one per file (a debug test binary links the whole dependency graph, some
//! 80 MB each), and `--test-threads` runs tests of different files side by
//! side instead of one file's few tests after another's.
//!
//! A module a file, named as the file: `cargo test -p obc-tests --test e2e
//! -- reliability::` runs one theme, `-- --list` lists them all. Most of
//! them start their own etcd, kube-apiserver and S3 server (see
//! `obc_tests::TestEnv`). The tests that run a real node are in the `node`
//! binary (`tests/node/main.rs`), which cargo runs after this one. A test
//! that reads its own log uses `obc_tests::scoped_tracing`: only one
//! subscriber of the process can be global.

mod after_bind;
mod after_bind_safety;
mod bucket_settings;
mod chart;
mod conformance;
mod cosi;
mod cosi_binary;
mod cosi_crash_points;
mod cosi_crds;
mod cosi_grpc;
mod cosi_proto;
mod cosi_rbac;
mod cosi_rustfs;
mod cosi_sample;
mod cosi_tenancy;
mod cosi_tenant_roles;
/// `examples/downstream` as it stands, compiled in for its tests (the
/// conformance kit on its in-memory store and on flawed variants of it):
/// `.ci/run` only lints the example in its own workspace, and a build of
/// its own to run them would compile every dependency again.
#[allow(dead_code)] // its `main`, which only the example's binary runs
#[path = "../../examples/downstream/src/main.rs"]
mod downstream;
mod health;
mod image;
mod layout;
mod leader;
mod leader_partition;
mod library;
mod local_env;
mod namespaced;
mod namespaces;
mod provision_safety;
mod provisioner_calls;
mod reconnect_log;
mod reliability;
mod reliability_after_bind;
mod reliability_per_claim;
mod rustfs;
mod sample;
mod store_sweep;
mod tenant_roles;
mod testenv;
