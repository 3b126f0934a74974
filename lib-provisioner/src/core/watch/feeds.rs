//! A watch's events on their way into a cache and a reconciler: health
//! tracking, errors kept from the controller, fields no cache reads
//! dropped, and a feed that ends at stop.

use std::sync::Arc;

use futures::stream::{BoxStream, StreamExt};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
use kube::runtime::watcher;
use tokio::sync::watch;
use tracing::warn;

use super::triggers::stopped;
use crate::core::server::Health;

/// A kind a watch can fill a cache with: statically typed, decoded from
/// the API, shared between tasks.
pub trait Watchable:
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

/// Reduces an object's managedFields to the writers other than `ours` that
/// own a field under any of `paths` (each a path in the managed-fields
/// notation, as `["f:data"]`), each kept as its manager's name alone: what
/// a drift check needs to tell from the metadata that another writer
/// changed what `ours` wrote, at a fraction of the memory. An object whose
/// managedFields are absent keeps none (`None`: unknown, not "no one").
pub(crate) fn keep_other_writers<K: kube::Resource>(object: &mut K, ours: &str, paths: &[&[&str]]) {
    let Some(entries) = object.meta_mut().managed_fields.take() else {
        return;
    };
    let others = entries
        .into_iter()
        .filter(|e| e.manager.as_deref() != Some(ours))
        .filter(|e| {
            e.fields_v1
                .as_ref()
                .is_some_and(|f| paths.iter().any(|path| owns(&f.0, path)))
        })
        .map(|e| ManagedFieldsEntry {
            manager: e.manager,
            ..ManagedFieldsEntry::default()
        })
        .collect();
    object.meta_mut().managed_fields = Some(others);
}

/// A watch event with its object(s) turned into another type: what a
/// cache keeps of them.
pub(crate) fn map_event<A, B>(event: watcher::Event<A>, f: impl Fn(A) -> B) -> watcher::Event<B> {
    use watcher::Event;
    match event {
        Event::Apply(o) => Event::Apply(f(o)),
        Event::Delete(o) => Event::Delete(f(o)),
        Event::Init => Event::Init,
        Event::InitApply(o) => Event::InitApply(f(o)),
        Event::InitDone => Event::InitDone,
    }
}

/// Whether a managed-fields set holds `path`.
fn owns(fields: &serde_json::Value, path: &[&str]) -> bool {
    path.iter().try_fold(fields, |v, key| v.get(*key)).is_some()
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

    #[test]
    fn only_other_writers_of_the_payload_are_kept() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry};
        let entry = |manager: &str, fields: serde_json::Value| ManagedFieldsEntry {
            manager: Some(manager.to_owned()),
            fields_v1: Some(FieldsV1(fields)),
            ..ManagedFieldsEntry::default()
        };
        let paths: &[&[&str]] = &[&["f:data"], &["f:metadata", "f:annotations", "f:hash"]];
        let mut cm = ConfigMap::default();
        cm.metadata.managed_fields = Some(vec![
            entry("ours", serde_json::json!({"f:data": {"f:k": {}}})),
            entry(
                "gc",
                serde_json::json!({"f:metadata": {"f:ownerReferences": {}}}),
            ),
            entry("kubectl-edit", serde_json::json!({"f:data": {"f:k": {}}})),
            entry(
                "kubectl-annotate",
                serde_json::json!({"f:metadata": {"f:annotations": {"f:hash": {}}}}),
            ),
        ]);
        keep_other_writers(&mut cm, "ours", paths);
        let kept: Vec<_> = cm
            .metadata
            .managed_fields
            .iter()
            .flatten()
            .map(|e| e.manager.clone())
            .collect();
        assert_eq!(
            kept,
            [
                Some("kubectl-edit".to_owned()),
                Some("kubectl-annotate".to_owned())
            ]
        );
        assert!(
            cm.metadata
                .managed_fields
                .iter()
                .flatten()
                .all(|e| e.fields_v1.is_none())
        );

        let mut ours_only = ConfigMap::default();
        ours_only.metadata.managed_fields =
            Some(vec![entry("ours", serde_json::json!({"f:data": {}}))]);
        keep_other_writers(&mut ours_only, "ours", paths);
        assert_eq!(
            ours_only.metadata.managed_fields,
            Some(vec![]),
            "no one else: known"
        );

        let mut unknown = ConfigMap::default();
        keep_other_writers(&mut unknown, "ours", paths);
        assert_eq!(
            unknown.metadata.managed_fields, None,
            "no managed fields: unknown"
        );
    }
}
