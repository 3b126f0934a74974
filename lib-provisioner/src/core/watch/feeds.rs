//! A watch's events on their way into a cache and a reconciler: health
//! tracking, errors kept from the controller, fields no cache reads
//! dropped, and a feed that ends at stop.

use std::sync::Arc;

use futures::stream::{BoxStream, StreamExt};
use kube::runtime::watcher;
use tokio::sync::watch;
use tracing::warn;

use super::triggers::stopped;
use crate::core::server::Health;

/// A kind a watch can fill a cache with: statically typed, decoded from
/// the API, shared between tasks.
pub(crate) trait Watchable:
    kube::Resource<DynamicType = ()>
    + Clone
    + serde::de::DeserializeOwned
    + std::fmt::Debug
    + Send
    + Sync
    + 'static
{
}

impl<K> Watchable for K where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static
{
}

/// Drops a feed's errors before the controller sees them: they are logged
/// and retried (with [`WatchBackoff`]) where they happen, and the
/// controller's own backoff on errors would pause all its triggers at once,
/// once per failing watch.
pub(crate) fn without_errors<K>(r: &Result<K, watcher::Error>) -> futures::future::Ready<bool> {
    futures::future::ready(r.is_ok())
}

/// Records each event of watch `name` in the watches' health, and logs
/// its failures.
pub(crate) fn tracked<K>(
    health: &Arc<Health>,
    name: impl Into<String>,
) -> impl FnMut(&Result<watcher::Event<K>, watcher::Error>) + Send + 'static {
    let health = health.clone();
    let name: String = name.into();
    health.watches.register(&name);
    move |event| match event {
        // kube's watcher says `Init` before each attempt to list, so a list
        // that keeps failing alternates `Init` and an error: taken as
        // health, it announced a recovery at every retry and restarted the
        // failure's clock (`/healthz` never saw the watches dead).
        Ok(watcher::Event::Init) => {}
        Ok(_) => health.watches.ok(&name),
        Err(e) => {
            warn!(watch = %name, error = %e, "watch failed; retrying with backoff");
            health.watches.failed(&name);
        }
    }
}

/// The caches never read managedFields, and they are most of each cached
/// object's memory (server-side field tracking, decoded as JSON trees).
pub(crate) fn strip_managed_fields<K: kube::Resource>(object: &mut K) {
    object.meta_mut().managed_fields = None;
}

pub(crate) fn tokio_stream_of<T: Send + 'static>(
    mut rx: tokio::sync::mpsc::UnboundedReceiver<T>,
) -> impl futures::Stream<Item = T> + Send + 'static {
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

/// `stream`, ended and dropped as soon as `stop` says so, whether or not
/// anyone polls it again. The claim cache's writer lives inside its feed,
/// and kube-runtime stops polling a controller's trigger stream at shutdown
/// but keeps it until the controller ends, which first waits for that
/// cache to be ready: a stop before the first list completed (a SIGTERM
/// right after start) left the process waiting for ever. Dropped, the
/// writer fails the readiness gate and everything winds down.
pub(crate) fn dropped_on_stop<S>(
    stream: S,
    stop: watch::Receiver<bool>,
) -> BoxStream<'static, S::Item>
where
    S: futures::Stream + Send + 'static,
{
    let slot = Arc::new(std::sync::Mutex::new(Some(stream.boxed())));
    let dropper = slot.clone();
    tokio::spawn(async move {
        stopped(stop).await;
        let taken = dropper.lock().map(|mut s| s.take());
        drop(taken);
    });
    futures::stream::poll_fn(move |cx| match slot.lock() {
        Ok(mut guard) => match guard.as_mut() {
            Some(stream) => stream.poll_next_unpin(cx),
            None => std::task::Poll::Ready(None),
        },
        // A panic while polling: nothing more comes from this feed.
        Err(_) => std::task::Poll::Ready(None),
    })
    .boxed()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures::FutureExt;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::runtime::watcher::Event;

    use super::*;

    type Answer = Result<Event<ConfigMap>, watcher::Error>;

    fn tracker(health: &Arc<Health>) -> impl FnMut(&Answer) {
        tracked(health, "ConfigMap")
    }

    fn failure() -> Answer {
        Err(watcher::Error::NoResourceVersion)
    }

    /// kube's watcher says `Init` before every attempt to list, so a list
    /// that keeps failing (a TLS error) alternates `Init` and an error.
    #[tokio::test]
    async fn a_list_that_keeps_failing_is_never_back_and_fails_since_its_first_failure() {
        let health = Arc::new(Health::new(Duration::from_secs(120)));
        let mut track = tracker(&health);
        let back = health.watches.reconnected();
        tokio::pin!(back);
        assert!(back.as_mut().now_or_never().is_none());

        track(&failure());
        std::thread::sleep(Duration::from_millis(50));
        for _ in 0..24 {
            track(&Ok(Event::Init));
            track(&failure());
        }
        assert!(
            back.as_mut().now_or_never().is_none(),
            "a watch whose lists all failed is not back"
        );
        let dead = health.watches.dead_for().expect("every watch fails");
        assert!(
            dead >= Duration::from_millis(50),
            "failing for {dead:?} only"
        );

        // The list answers: the watch is back.
        track(&Ok(Event::Init));
        track(&Ok(Event::InitDone));
        assert!(back.as_mut().now_or_never().is_some(), "the watch is back");
        assert_eq!(health.watches.dead_for(), None);
    }

    /// A watch that fails after its list comes back with the next event it
    /// delivers (kube's watcher resumes the watch without a new list).
    #[tokio::test]
    async fn a_resumed_watch_is_back_with_its_next_event() {
        let health = Arc::new(Health::new(Duration::from_secs(120)));
        let mut track = tracker(&health);
        track(&Ok(Event::InitDone));
        track(&failure());
        let back = health.watches.reconnected();
        tokio::pin!(back);
        assert!(back.as_mut().now_or_never().is_none());
        track(&Ok(Event::Apply(ConfigMap::default())));
        assert!(back.as_mut().now_or_never().is_some());
    }
}
