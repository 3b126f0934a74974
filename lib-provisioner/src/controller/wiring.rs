//! The watches and caches behind the reconcilers, and the two reconcilers
//! wired to them. [`super::ControllerBuilder::start`] composes these parts.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use futures::future::{BoxFuture, FutureExt};
use futures::stream::{BoxStream, StreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::core::PartialObjectMeta;
use kube::runtime::controller::{Config, Controller};
use kube::runtime::reflector::{self, ObjectRef, ReflectHandle, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use tokio::sync::{mpsc, watch};
use tracing::{info, warn};

use crate::api::{ClaimPhase, ObjectBucket, ObjectBucketClaim, PROVISIONER_LABEL};
use crate::provisioner::Provisioner;
use crate::reconcile::{self, Context, bucket, claim, plan};
use crate::server::Health;

type Feed<K> = BoxStream<'static, Result<K, watcher::Error>>;

/// The cluster-scoped caches (StorageClasses, ObjectBuckets), shared by
/// every claim controller and the ObjectBucket reconciler.
pub(super) struct SharedCaches {
    pub classes: Store<StorageClass>,
    pub buckets: Store<ObjectBucket>,
    class_subscriptions: Vec<ReflectHandle<StorageClass>>,
    pub bucket_subscriptions: Vec<ReflectHandle<ObjectBucket>>,
    /// Both watches; they run until the controller stops.
    pub feeds: BoxFuture<'static, ()>,
}

impl SharedCaches {
    /// Caches for `claim_controllers` claim controllers (and, for
    /// ObjectBuckets, the ObjectBucket reconciler). Subscriptions are taken
    /// before the writers move into their feeds.
    pub(super) fn new(client: &Client, claim_controllers: usize) -> Self {
        let wc = watcher::Config::default().any_semantic();
        let (classes, class_writer) = reflector::store_shared::<StorageClass>(256);
        let class_subscriptions = (0..claim_controllers)
            .filter_map(|_| class_writer.subscribe())
            .collect();
        let class_feed = watcher(Api::<StorageClass>::all(client.clone()), wc.clone())
            .default_backoff()
            .modify(strip_managed_fields)
            .reflect_shared(class_writer);
        let (buckets, bucket_writer) = reflector::store_shared::<ObjectBucket>(1024);
        let bucket_subscriptions = (0..=claim_controllers)
            .filter_map(|_| bucket_writer.subscribe())
            .collect();
        let bucket_feed = watcher(Api::<ObjectBucket>::all(client.clone()), wc)
            .default_backoff()
            .modify(strip_managed_fields)
            .reflect_shared(bucket_writer);
        let feeds = futures::stream::select(
            class_feed.map(|r| r.map(|_| ())).boxed(),
            bucket_feed.map(|r| r.map(|_| ())).boxed(),
        )
        .for_each(|r| async move {
            if let Err(e) = r {
                warn!(error = %e, "watch failed; retrying with backoff");
            }
        })
        .boxed();
        Self {
            classes,
            buckets,
            class_subscriptions,
            bucket_subscriptions,
            feeds,
        }
    }

    /// One claim controller's subscriptions to both shared caches.
    pub(super) fn subscribe(
        &mut self,
    ) -> Option<(ReflectHandle<ObjectBucket>, ReflectHandle<StorageClass>)> {
        Some((
            self.bucket_subscriptions.pop()?,
            self.class_subscriptions.pop()?,
        ))
    }
}

/// The claims of one namespace (or all), their Secrets and ConfigMaps
/// (metadata only, our label only), with the watches that fill them.
pub(super) struct Scope {
    namespace: Option<String>,
    pub claims: Store<ObjectBucketClaim>,
    pub secrets: Store<PartialObjectMeta<Secret>>,
    pub config_maps: Store<PartialObjectMeta<ConfigMap>>,
    claim_feed: Feed<ObjectBucketClaim>,
    secret_feed: Feed<PartialObjectMeta<Secret>>,
    config_map_feed: Feed<PartialObjectMeta<ConfigMap>>,
}

impl Scope {
    /// Watches for `namespace` (`None`: all). Claim deletions are sent to
    /// `deleted` as the ObjectBucket they leave behind.
    pub(super) fn new(
        client: &Client,
        namespace: Option<String>,
        label: &str,
        deleted: mpsc::UnboundedSender<ObjectRef<ObjectBucket>>,
    ) -> Self {
        let wc = watcher::Config::default().any_semantic();
        let child_wc = wc.clone().labels(&format!("{PROVISIONER_LABEL}={label}"));
        let (claims, claim_writer) = reflector::store();
        // The ObjectBucket reconciler learns of deleted claims from this
        // same stream, after the claim cache has dropped them: a second
        // watch could report a deletion the cache has not seen yet.
        let claim_feed = reflector::reflector(
            claim_writer,
            watcher(api::<ObjectBucketClaim>(client, &namespace), wc).modify(strip_managed_fields),
        )
        .default_backoff()
        .inspect(move |event| {
            if let Ok(watcher::Event::Delete(claim)) = event {
                let _ = deleted.send(ObjectRef::new(&plan::object_bucket_name(claim)));
            }
        })
        .touched_objects()
        .boxed();
        let (secrets, secret_feed) = child_feed(client, &namespace, child_wc.clone());
        let (config_maps, config_map_feed) = child_feed(client, &namespace, child_wc);
        Self {
            namespace,
            claims,
            secrets,
            config_maps,
            claim_feed,
            secret_feed,
            config_map_feed,
        }
    }
}

fn api<K>(client: &Client, ns: &Option<String>) -> Api<K>
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
{
    match ns {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// A metadata-only cache of one kind of child, and the watch that fills it.
fn child_feed<K>(
    client: &Client,
    namespace: &Option<String>,
    wc: watcher::Config,
) -> (Store<PartialObjectMeta<K>>, Feed<PartialObjectMeta<K>>)
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let (store, writer) = reflector::store();
    let feed = reflector::reflector(
        writer,
        watcher(api::<PartialObjectMeta<K>>(client, namespace), wc).modify(strip_managed_fields),
    )
    .default_backoff()
    .touched_objects()
    .boxed();
    (store, feed)
}

/// The claim reconciler of one scope: triggered by its claims, their
/// children, their ObjectBuckets, and the classes of claims still waiting;
/// only while `leading` (then once for every cached claim).
pub(super) fn claim_controller<P: Provisioner>(
    scope: Scope,
    bucket_events: ReflectHandle<ObjectBucket>,
    class_events: ReflectHandle<StorageClass>,
    ctx: Arc<Context<P>>,
    config: Config,
    stop: watch::Receiver<bool>,
    leading: watch::Receiver<bool>,
) -> BoxFuture<'static, ()> {
    let ns = scope.namespace.clone();
    let in_scope = move |claim_ns: &str| ns.as_deref().is_none_or(|n| n == claim_ns);
    let claims_for_class = scope.claims.clone();
    Controller::for_stream(while_leading(scope.claim_feed, &leading), scope.claims)
        .with_config(config)
        .reconcile_all_on(took_over(leading.clone()))
        .owns_stream(while_leading(scope.secret_feed, &leading))
        .owns_stream(while_leading(scope.config_map_feed, &leading))
        .watches_shared_stream(
            while_leading(bucket_events, &leading),
            move |ob: Arc<ObjectBucket>| {
                ob.spec.claim_ref.as_ref().and_then(|r| {
                    let (ns, name) = (r.namespace.as_deref()?, r.name.as_deref()?);
                    in_scope(ns).then(|| ObjectRef::new(name).within(ns))
                })
            },
        )
        .watches_shared_stream(
            while_leading(class_events, &leading),
            move |class: Arc<StorageClass>| {
                // A class appearing or changing can unblock waiting claims and
                // blocked deletions (a fixed parameter); bound claims do not
                // depend on it.
                let name = class.metadata.name.clone().unwrap_or_default();
                claims_for_class
                    .state()
                    .into_iter()
                    .filter(|c| {
                        c.spec.storage_class_name == name
                            && (c.metadata.deletion_timestamp.is_some()
                                || c.status.as_ref().and_then(|s| s.phase)
                                    != Some(ClaimPhase::Bound))
                    })
                    .map(|c| ObjectRef::from_obj(c.as_ref()))
                    .collect::<Vec<_>>()
            },
        )
        .graceful_shutdown_on(stopped(stop))
        .run(claim::reconcile, reconcile::error_policy, ctx)
        .for_each(|result| async move {
            if let Err(e) = result {
                log_controller_error("claim", &e);
            }
        })
        .boxed()
}

/// The ObjectBucket reconciler. A claim that disappears leaves its
/// ObjectBucket unchanged; only the claim's deletion (`deletions`) can tell
/// it to look. Only while `leading`, like the claim reconciler.
#[allow(clippy::too_many_arguments)]
pub(super) fn bucket_controller<P: Provisioner>(
    bucket_events: ReflectHandle<ObjectBucket>,
    buckets: Store<ObjectBucket>,
    deletions: mpsc::UnboundedReceiver<ObjectRef<ObjectBucket>>,
    ctx: Arc<Context<P>>,
    config: Config,
    stop: watch::Receiver<bool>,
    leading: watch::Receiver<bool>,
) -> BoxFuture<'static, ()> {
    Controller::for_shared_stream(while_leading(bucket_events, &leading), buckets)
        .with_config(config)
        .reconcile_all_on(took_over(leading.clone()))
        .reconcile_on(while_leading(tokio_stream_of(deletions), &leading))
        .graceful_shutdown_on(stopped(stop))
        .run(bucket::reconcile, reconcile::error_policy, ctx)
        .for_each(|result| async move {
            if let Err(e) = result {
                log_controller_error("ObjectBucket", &e);
            }
        })
        .boxed()
}

/// Resolves once every cache has listed: then reconciles may decide, and
/// `/readyz` answers ok.
pub(super) async fn signal_ready(
    classes: Store<StorageClass>,
    buckets: Store<ObjectBucket>,
    claims: Vec<Store<ObjectBucketClaim>>,
    synced: watch::Sender<bool>,
    health: Arc<Health>,
) {
    let _ = classes.wait_until_ready().await;
    let _ = buckets.wait_until_ready().await;
    for store in &claims {
        let _ = store.wait_until_ready().await;
    }
    info!("caches are synced; reconciling");
    let _ = synced.send(true);
    health.ready.store(true, Ordering::Relaxed);
}

/// Passes a reconciler's trigger on only while this replica leads. A
/// standby still polls it, so its caches stay warm: the reflector has
/// applied each event to the cache before the event gets here, and
/// [`took_over`] covers whatever was dropped.
fn while_leading<S>(
    trigger: S,
    leading: &watch::Receiver<bool>,
) -> impl futures::Stream<Item = S::Item> + Send + 'static
where
    S: futures::Stream + Send + 'static,
    S::Item: Send,
{
    let leading = leading.clone();
    trigger.filter(move |_| futures::future::ready(*leading.borrow()))
}

/// Fires once, when this replica starts leading: then every cached object
/// is reconciled.
fn took_over(mut leading: watch::Receiver<bool>) -> impl futures::Stream<Item = ()> + Send {
    futures::stream::once(async move { leading.wait_for(|l| *l).await.is_ok() })
        .filter(|led| futures::future::ready(*led))
        .map(|_| ())
}

async fn stopped(mut rx: watch::Receiver<bool>) {
    let _ = rx.wait_for(|s| *s).await;
}

/// The caches never read managedFields, and they are most of each cached
/// object's memory (server-side field tracking, decoded as JSON trees).
fn strip_managed_fields<K: kube::Resource>(object: &mut K) {
    object.meta_mut().managed_fields = None;
}

fn tokio_stream_of<T: Send + 'static>(
    mut rx: tokio::sync::mpsc::UnboundedReceiver<T>,
) -> impl futures::Stream<Item = T> + Send + 'static {
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

fn log_controller_error<R, Q>(what: &str, e: &kube::runtime::controller::Error<R, Q>)
where
    R: std::error::Error + 'static,
    Q: std::error::Error + 'static,
{
    use kube::runtime::controller::Error as E;
    match e {
        // Already on the object (status, events) and in metrics.
        E::ReconcilerFailed(err, obj) => {
            tracing::debug!(controller = what, object = %obj, error = %err, "reconcile failed")
        }
        // Deleted between the trigger and the reconcile: nothing to do.
        E::ObjectNotFound(obj) => {
            tracing::debug!(controller = what, object = %obj, "object is gone")
        }
        other => warn!(controller = what, error = %other, "controller error"),
    }
}
