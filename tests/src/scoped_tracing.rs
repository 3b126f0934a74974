//! A test that reads its own log: its tracing output goes to a subscriber
//! of its own, while the other tests of the binary, running beside it,
//! keep logging through the global one ([`crate::testenv::init_tracing`]).

use std::future::Future;

use tracing::Dispatch;

/// Runs `test` to completion on a multi-thread tokio runtime of its own
/// (`worker_threads` workers) on which every thread (the workers, the
/// blocking pool and the caller's, which blocks on it) sends its tracing
/// events to `dispatch`.
///
/// A scoped default is per thread, and a controller spawns its tasks on
/// whichever worker is free: only a default on each of the runtime's
/// threads catches all of them. The global subscriber cannot serve here, as
/// one binary holds every test and only one can be global.
///
/// ```no_run
/// # fn main() -> anyhow::Result<()> {
/// let subscriber = tracing_subscriber::fmt().with_writer(std::io::sink).finish();
/// obc_tests::scoped_tracing::block_on(subscriber.into(), 2, async {
///     tracing::info!("only this test's subscriber sees this");
///     Ok(())
/// })
/// # }
/// ```
pub fn block_on<F: Future>(dispatch: Dispatch, worker_threads: usize, test: F) -> F::Output {
    let for_threads = dispatch.clone();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(worker_threads)
        .enable_all()
        .on_thread_start(move || {
            // Kept for the thread's life: the guard would restore the global
            // subscriber when dropped.
            std::mem::forget(tracing::dispatcher::set_default(&for_threads));
        })
        .build()
        .expect("a tokio runtime for the test");
    tracing::dispatcher::with_default(&dispatch, || runtime.block_on(test))
}
