//! A controller's triggers metered into its scheduler: at most a window of
//! keys waits there; the rest wait here, packed.
//!
//! At a restart (or a takeover, or a relist after an outage) every cached
//! claim and ObjectBucket is triggered at once. kube-runtime's scheduler
//! holds each key it waits on twice (its map and its delay queue), about
//! 400 bytes per key: at 100,000 claims, with their ObjectBuckets, some
//! 80 MB at the restart's peak for keys that are worked off at the
//! controller's concurrency anyway. [`metered`] keeps the keys that wait
//! as one shared `namespace/name` string each, in order and without
//! duplicates, and hands the controller a new one as each reconcile ends,
//! so its scheduler never holds more than a window of them. The order is
//! the triggers' order, as the scheduler's would be; a key triggered again
//! while it waits here is not queued twice, as the scheduler would merge
//! it. The triggers are always drained (a watch behind them must not wait
//! on the reconciles).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use futures::stream::{self, BoxStream, Stream, StreamExt};
use kube::Resource;
use kube::runtime::controller;
use kube::runtime::reflector::ObjectRef;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::keys::{packed, unpacked};

/// The fewest keys a window holds: enough to keep any concurrency busy.
const MIN_WINDOW: usize = 256;

/// How long a key handed over may go unreported before it stops counting
/// against the window (a run the controller ended without an object to
/// name, for one).
const UNREPORTED: Duration = Duration::from_secs(30);

/// The window for a controller of `concurrency` (0: unlimited).
pub(crate) fn window(concurrency: u16) -> usize {
    (usize::from(concurrency) * 4).max(MIN_WINDOW)
}

/// Where a controller reports each reconcile that ended (its `run`
/// stream's items), so that [`metered`] hands over the next key.
#[derive(Clone)]
pub(crate) struct Ended(mpsc::UnboundedSender<Arc<str>>);

impl Ended {
    /// Records one item of the controller's `run` stream.
    pub(crate) fn report<K, T, E, Q>(
        &self,
        result: &Result<(ObjectRef<K>, T), controller::Error<E, Q>>,
    ) where
        K: Resource,
    {
        use controller::Error;
        let key = match result {
            Ok((key, _)) => packed(key.namespace.as_deref(), &key.name),
            Err(Error::ObjectNotFound(key) | Error::ReconcilerFailed(_, key)) => {
                packed(key.namespace.as_deref(), &key.name)
            }
            // No object to name: `UNREPORTED` frees its place.
            Err(_) => return,
        };
        let _ = self.0.send(key.into());
    }
}

/// `triggers`, handed on so that at most `window` keys are out (handed on
/// and their reconcile not yet reported to the [`Ended`] returned).
pub(crate) fn metered<K>(
    triggers: impl Stream<Item = ObjectRef<K>> + Send + 'static,
    window: usize,
) -> (BoxStream<'static, ObjectRef<K>>, Ended)
where
    K: Resource<DynamicType = ()> + 'static,
{
    let (ended_tx, ended) = mpsc::unbounded_channel();
    let meter = Meter {
        triggers: Some(
            triggers
                .map(|key| Arc::from(packed(key.namespace.as_deref(), &key.name)))
                .boxed(),
        ),
        ended,
        waiting: VecDeque::new(),
        queued: HashSet::new(),
        out: HashMap::new(),
        window,
    };
    let keys = stream::unfold(meter, |mut meter| async move {
        let key = meter.next().await?;
        Some((unpacked_ref(&key), meter))
    })
    .boxed();
    (keys, Ended(ended_tx))
}

/// The scheduler's key for a [`packed`] one.
fn unpacked_ref<K: Resource<DynamicType = ()>>(key: &str) -> ObjectRef<K> {
    match unpacked(key) {
        (Some(ns), name) => ObjectRef::new(name).within(ns),
        (None, name) => ObjectRef::new(name),
    }
}

struct Meter {
    /// `None` once they ended.
    triggers: Option<BoxStream<'static, Arc<str>>>,
    ended: mpsc::UnboundedReceiver<Arc<str>>,
    /// The keys not yet handed on, in order; `queued` holds the same.
    waiting: VecDeque<Arc<str>>,
    queued: HashSet<Arc<str>>,
    /// The keys handed on and not yet reported, with when.
    out: HashMap<Arc<str>, Instant>,
    window: usize,
}

impl Meter {
    /// The next key to hand on; `None` once the triggers ended and nothing
    /// waits.
    async fn next(&mut self) -> Option<Arc<str>> {
        loop {
            while let Ok(key) = self.ended.try_recv() {
                self.out.remove(&*key);
            }
            if self.out.len() < self.window
                && let Some(key) = self.waiting.pop_front()
            {
                self.queued.remove(&key);
                self.out.insert(key.clone(), Instant::now());
                return Some(key);
            }
            if self.triggers.is_none() && self.waiting.is_empty() {
                return None;
            }
            let full = self.out.len() >= self.window;
            tokio::select! {
                biased;
                Some(key) = self.ended.recv() => {
                    self.out.remove(&*key);
                }
                trigger = next_trigger(&mut self.triggers) => match trigger {
                    Some(key) => self.queue(key),
                    None => self.triggers = None,
                },
                () = tokio::time::sleep(UNREPORTED), if full => self.expire(),
            }
        }
    }

    fn queue(&mut self, key: Arc<str>) {
        if self.queued.insert(key.clone()) {
            self.waiting.push_back(key);
        }
    }

    /// Forgets the keys out for longer than [`UNREPORTED`].
    fn expire(&mut self) {
        let now = Instant::now();
        self.out
            .retain(|_, since| now.duration_since(*since) < UNREPORTED);
    }
}

/// The next trigger; never, once they ended.
async fn next_trigger(triggers: &mut Option<BoxStream<'static, Arc<str>>>) -> Option<Arc<str>> {
    match triggers {
        Some(t) => t.next().await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use futures::FutureExt;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::runtime::controller::Action;

    use super::*;

    type Key = ObjectRef<ConfigMap>;

    fn key(name: &str) -> Key {
        ObjectRef::new(name).within("ns")
    }

    fn done(ended: &Ended, name: &str) {
        let result: Result<(Key, Action), controller::Error<std::io::Error, std::io::Error>> =
            Ok((key(name), Action::await_change()));
        ended.report(&result);
    }

    /// What the stream hands on now, without waiting.
    fn ready(keys: &mut BoxStream<'static, Key>) -> Vec<String> {
        let mut out = Vec::new();
        while let Some(Some(k)) = keys.next().now_or_never() {
            out.push(k.name);
        }
        out
    }

    #[tokio::test]
    async fn at_most_a_window_is_out_and_each_report_frees_a_place() {
        let (tx, rx) = mpsc::unbounded_channel();
        let (mut keys, ended) = metered(tokio_stream(rx), 2);
        for name in ["a", "b", "c", "d"] {
            tx.send(key(name)).expect("open");
        }
        assert_eq!(ready(&mut keys), ["a", "b"]);
        done(&ended, "a");
        assert_eq!(ready(&mut keys), ["c"]);
        done(&ended, "x");
        assert!(
            ready(&mut keys).is_empty(),
            "an unknown report frees nothing"
        );
        done(&ended, "b");
        done(&ended, "c");
        assert_eq!(ready(&mut keys), ["d"]);
    }

    #[tokio::test]
    async fn a_key_waiting_is_queued_once_and_keeps_its_place() {
        let (tx, rx) = mpsc::unbounded_channel();
        let (mut keys, ended) = metered(tokio_stream(rx), 1);
        for name in ["a", "b", "c", "b", "a"] {
            tx.send(key(name)).expect("open");
        }
        let mut seen = ready(&mut keys);
        for _ in 0..4 {
            done(&ended, seen.last().expect("one out"));
            seen.extend(ready(&mut keys));
        }
        // "a" was out when it came again: it waits for another run.
        assert_eq!(seen, ["a", "b", "c", "a"]);
    }

    #[tokio::test]
    async fn failures_and_missing_objects_are_reports_too() {
        let (tx, rx) = mpsc::unbounded_channel();
        let (mut keys, ended) = metered(tokio_stream(rx), 1);
        for name in ["a", "b", "c"] {
            tx.send(key(name)).expect("open");
        }
        assert_eq!(ready(&mut keys), ["a"]);
        let erased = |name: &str| Box::new(key(name).erase());
        let failed: Result<(Key, Action), controller::Error<std::io::Error, std::io::Error>> = Err(
            controller::Error::ReconcilerFailed(std::io::Error::other("x"), erased("a")),
        );
        ended.report(&failed);
        assert_eq!(ready(&mut keys), ["b"]);
        let missing: Result<(Key, Action), controller::Error<std::io::Error, std::io::Error>> =
            Err(controller::Error::ObjectNotFound(erased("b")));
        ended.report(&missing);
        assert_eq!(ready(&mut keys), ["c"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_key_never_reported_frees_its_place_after_a_while() {
        let (tx, rx) = mpsc::unbounded_channel();
        let (mut keys, _ended) = metered(tokio_stream(rx), 1);
        tx.send(key("a")).expect("open");
        tx.send(key("b")).expect("open");
        assert_eq!(keys.next().await.map(|k| k.name).as_deref(), Some("a"));
        let started = Instant::now();
        assert_eq!(keys.next().await.map(|k| k.name).as_deref(), Some("b"));
        assert!(started.elapsed() >= UNREPORTED);
    }

    #[tokio::test]
    async fn cluster_scoped_keys_and_the_end() {
        let (tx, rx) =
            mpsc::unbounded_channel::<ObjectRef<k8s_openapi::api::core::v1::Namespace>>();
        let (keys, _ended) = metered(tokio_stream(rx), 4);
        tx.send(ObjectRef::new("n")).expect("open");
        drop(tx);
        let all: Vec<_> = keys.collect().await;
        assert_eq!(all, [ObjectRef::new("n")]);
    }

    fn tokio_stream<T: Send + 'static>(
        mut rx: mpsc::UnboundedReceiver<T>,
    ) -> BoxStream<'static, T> {
        stream::poll_fn(move |cx| rx.poll_recv(cx)).boxed()
    }
}
