//! Polling a provisioner's future by hand, to drop it after its k-th
//! `Pending`: a real cancellation at a real `.await`, as the library's
//! timeout does it, where a `tokio::time::timeout` in a test would only
//! fire if the store happened to be slow.

use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::task::ArcWake;
use tokio::sync::Notify;
use tokio::time::Instant;

/// How a driven call ended.
#[derive(Debug)]
pub(crate) enum Driven<T> {
    /// It finished, after returning `Pending` this many times.
    Done { output: T, pendings: usize },
    /// It was dropped after its `Pending` number `at`.
    Abandoned { at: usize },
    /// It was still pending at the deadline (then dropped).
    TimedOut { pendings: usize },
}

/// Wakes the driver: a `Notify` keeps one permit, so a wake that comes
/// while the future is being polled is not lost.
struct Signal(Notify);

impl ArcWake for Signal {
    fn wake_by_ref(arc_self: &Arc<Self>) {
        arc_self.0.notify_one();
    }
}

/// Polls `fut` until it is ready, or until it has returned `Pending`
/// `abandon_at` times: then waits `settle` (so that a request it sent
/// reaches the store, as when a process dies after sending) and drops it.
/// Between polls it waits for the future's waker, so the store's I/O
/// progresses as it would under the library; `limit` bounds the whole call.
pub(crate) async fn drive<F: Future>(
    fut: F,
    abandon_at: Option<usize>,
    settle: Duration,
    limit: Duration,
) -> Driven<F::Output> {
    let signal = Arc::new(Signal(Notify::new()));
    let waker = futures::task::waker(signal.clone());
    let mut cx = Context::from_waker(&waker);
    let mut fut = Box::pin(fut);
    let deadline = Instant::now() + limit;
    let mut pendings = 0;
    loop {
        if let Poll::Ready(output) = fut.as_mut().poll(&mut cx) {
            return Driven::Done { output, pendings };
        }
        pendings += 1;
        if abandon_at == Some(pendings) {
            tokio::time::sleep(settle).await;
            drop(fut);
            return Driven::Abandoned { at: pendings };
        }
        if tokio::time::timeout_at(deadline, signal.0.notified())
            .await
            .is_err()
        {
            drop(fut);
            return Driven::TimedOut { pendings };
        }
    }
}

/// The points to abandon a call at, given that a full call returned
/// `Pending` `n` times: all of them, or `max` spread evenly over them
/// (first and last included; `max` is at least 2).
pub(crate) fn points(n: usize, max: usize) -> Vec<usize> {
    let max = max.max(2);
    if n <= max {
        return (1..=n).collect();
    }
    let mut out: Vec<usize> = (0..max).map(|i| 1 + i * (n - 1) / (max - 1)).collect();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Counts its steps; `Drop` records that it was dropped.
    struct Steps {
        done: Arc<AtomicUsize>,
        dropped: Arc<AtomicUsize>,
    }

    impl Drop for Steps {
        fn drop(&mut self) {
            self.dropped.fetch_add(1, Ordering::SeqCst);
        }
    }

    async fn three_awaits(s: Steps) -> usize {
        for _ in 0..3 {
            tokio::time::sleep(Duration::from_millis(1)).await;
            s.done.fetch_add(1, Ordering::SeqCst);
        }
        s.done.load(Ordering::SeqCst)
    }

    fn steps() -> (Steps, Arc<AtomicUsize>, Arc<AtomicUsize>) {
        let (done, dropped) = (Arc::default(), Arc::default());
        let s = Steps {
            done: Arc::clone(&done),
            dropped: Arc::clone(&dropped),
        };
        (s, done, dropped)
    }

    const T: Duration = Duration::from_secs(5);

    #[tokio::test]
    async fn a_full_run_counts_its_pendings() {
        let (s, _, dropped) = steps();
        match drive(three_awaits(s), None, Duration::ZERO, T).await {
            Driven::Done { output, pendings } => {
                assert_eq!(output, 3);
                assert_eq!(pendings, 3);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(dropped.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn abandoning_drops_the_future_mid_flight() {
        for k in 1..=3 {
            let (s, done, dropped) = steps();
            let driven = drive(three_awaits(s), Some(k), Duration::ZERO, T).await;
            assert!(
                matches!(driven, Driven::Abandoned { at } if at == k),
                "{driven:?}"
            );
            assert_eq!(dropped.load(Ordering::SeqCst), 1, "dropped at {k}");
            assert_eq!(done.load(Ordering::SeqCst), k - 1, "steps done before {k}");
        }
    }

    #[tokio::test]
    async fn a_future_that_never_pends_is_done_at_once() {
        match drive(async { 7 }, Some(1), Duration::ZERO, T).await {
            Driven::Done { output, pendings } => assert_eq!((output, pendings), (7, 0)),
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn a_future_that_is_never_woken_times_out() {
        let driven = drive(
            std::future::pending::<()>(),
            None,
            Duration::ZERO,
            Duration::from_millis(50),
        )
        .await;
        assert!(
            matches!(driven, Driven::TimedOut { pendings: 1 }),
            "{driven:?}"
        );
    }

    #[test]
    fn points_cover_every_pending_or_spread_over_them() {
        assert_eq!(points(0, 10), Vec::<usize>::new());
        assert_eq!(points(3, 10), [1, 2, 3]);
        assert_eq!(points(100, 5), [1, 25, 50, 75, 100]);
        assert_eq!(points(10, 1), [1, 10]);
    }
}
