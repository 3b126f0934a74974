//! The tests that run a real node (`obc_tests::testenv::node`), in a binary
//! of their own beside `e2e`: cargo runs test binaries one after another, so
//! no other test's processes are about while these compare the host with
//! what it was before a node ran (`env.rs`).
//!
//! `cargo test -p obc-tests --test node -- env::` runs one file's tests.
//! They need root, the node's tools (`scripts/install-testenv`) and the
//! image archives (`scripts/build-image`, `scripts/build-app-image`).

mod chart;
mod env;
mod operations;

/// One test at a time holds the host, for its whole length: a node is one
/// per host anyway, and `env.rs`'s snapshots of the host before and after
/// must not see another test's node starting or stopping.
static HOST: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
