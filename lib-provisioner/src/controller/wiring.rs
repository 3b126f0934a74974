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
use tracing::info;

use crate::obc::api::{ClaimPhase, ObjectBucket, ObjectBucketClaim, PROVISIONER_LABEL};
use crate::core::provisioner::Provisioner;
use crate::obc::reconcile::{self, Context, bucket, claim, plan};
use crate::core::log::log_controller_error;
use crate::core::server::Health;
use crate::core::watch::backoff::watch_backoff;
use crate::core::watch::feeds::{
    dropped_on_stop, strip_managed_fields, tokio_stream_of, tracked, without_errors,
};
use crate::core::watch::triggers::{stopped, took_over, while_leading};

type Feed<K> = BoxStream<'static, Result<K, watcher::Error>>;
type Watch<K> = BoxStream<'static, Result<watcher::Event<K>, watcher::Error>>;

/// The cluster-scoped caches (StorageClasses, ObjectBuckets), shared by
/// the claim reconciler and the ObjectBucket reconciler.
pub(super) struct SharedCaches {
    pub classes: Store<StorageClass>,
    pub buckets: Store<ObjectBucket>,
    /// The claim reconciler's subscriptions to both.
    pub claim_triggers: Option<(ReflectHandle<ObjectBucket>, ReflectHandle<StorageClass>)>,
    /// The ObjectBucket reconciler's.
    pub bucket_triggers: Option<ReflectHandle<ObjectBucket>>,
    /// Both watches; they run until the controller stops.
    pub feeds: BoxFuture<'static, ()>,
}

impl SharedCaches {
    /// Subscriptions are taken before the writers move into their feeds.
    pub(super) fn new(client: &Client, health: &Arc<Health>) -> Self {
        let wc = watcher::Config::default().any_semantic();
        let (classes, class_writer) = reflector::store_shared::<StorageClass>(256);
        let class_triggers = class_writer.subscribe();
        let class_feed = watcher(Api::<StorageClass>::all(client.clone()), wc.clone())
            .backoff(watch_backoff())
            .inspect(tracked(health, "StorageClass"))
            .modify(strip_managed_fields)
            .reflect_shared(class_writer);
        let (buckets, bucket_writer) = reflector::store_shared::<ObjectBucket>(1024);
        let claim_triggers = bucket_writer.subscribe().zip(class_triggers);
        let bucket_triggers = bucket_writer.subscribe();
        let bucket_feed = watcher(Api::<ObjectBucket>::all(client.clone()), wc)
            .backoff(watch_backoff())
            .inspect(tracked(health, "ObjectBucket"))
            .modify(strip_managed_fields)
            .reflect_shared(bucket_writer);
        let feeds = futures::stream::select(
            class_feed.map(|r| r.map(|_| ())).boxed(),
            bucket_feed.map(|r| r.map(|_| ())).boxed(),
        )
        // Failures are logged by `tracked`.
        .for_each(|_| async {})
        .boxed();
        Self {
            classes,
            buckets,
            claim_triggers,
            bucket_triggers,
            feeds,
        }
    }
}

/// The claims of the namespaces served (or all), their Secrets and
/// ConfigMaps (metadata only, our label only), with the watches that fill
/// them: one watch per namespace and kind, one cache per kind
/// ([`super::namespaces::reflect`]).
pub(super) struct Scope {
    pub claims: Store<ObjectBucketClaim>,
    pub secrets: Store<PartialObjectMeta<Secret>>,
    pub config_maps: Store<PartialObjectMeta<ConfigMap>>,
    claim_feed: Feed<ObjectBucketClaim>,
    secret_feed: Feed<PartialObjectMeta<Secret>>,
    config_map_feed: Feed<PartialObjectMeta<ConfigMap>>,
}

impl Scope {
    /// Watches for `namespaces` (`[None]`: all). Claim deletions are sent
    /// to `deleted` as the ObjectBucket they leave behind.
    pub(super) fn new(
        client: &Client,
        namespaces: &[Option<String>],
        label: &str,
        deleted: mpsc::UnboundedSender<ObjectRef<ObjectBucket>>,
        health: &Arc<Health>,
    ) -> Self {
        let wc = watcher::Config::default().any_semantic();
        let child_wc = wc.clone().labels(&format!("{PROVISIONER_LABEL}={label}"));
        let (claims, claim_writer) = reflector::store();
        // The ObjectBucket reconciler learns of deleted claims from this
        // same stream, after the claim cache has dropped them: a second
        // watch could report a deletion the cache has not seen yet.
        let claim_feed = super::namespaces::reflect(
            claim_writer,
            watches::<ObjectBucketClaim>(client, namespaces, &wc, health, "ObjectBucketClaim"),
        )
        .inspect(move |event| {
            if let Ok(watcher::Event::Delete(claim)) = event {
                let _ = deleted.send(ObjectRef::new(&plan::object_bucket_name(claim)));
            }
        })
        .touched_objects()
        .filter(without_errors)
        .boxed();
        let (secrets, secret_feed) = child_feed(client, namespaces, &child_wc, health, "Secret");
        let (config_maps, config_map_feed) =
            child_feed(client, namespaces, &child_wc, health, "ConfigMap");
        Self {
            claims,
            secrets,
            config_maps,
            claim_feed,
            secret_feed,
            config_map_feed,
        }
    }
}

/// One watch of `K` per namespace (`None`: all), each retried with its own
/// backoff and tracked in the watches' health under its own name.
fn watches<K>(
    client: &Client,
    namespaces: &[Option<String>],
    wc: &watcher::Config,
    health: &Arc<Health>,
    kind: &str,
) -> Vec<(String, Watch<K>)>
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    namespaces
        .iter()
        .map(|ns| {
            let api = match ns {
                Some(ns) => Api::namespaced(client.clone(), ns),
                None => Api::all(client.clone()),
            };
            let name = match ns {
                Some(ns) => format!("{kind} in {ns}"),
                None => kind.to_owned(),
            };
            let watch = watcher(api, wc.clone())
                .modify(strip_managed_fields)
                .backoff(watch_backoff())
                .inspect(tracked(health, name))
                .boxed();
            (ns.clone().unwrap_or_default(), watch)
        })
        .collect()
}

/// A metadata-only cache of one kind of child, and the watches that fill it.
fn child_feed<K>(
    client: &Client,
    namespaces: &[Option<String>],
    wc: &watcher::Config,
    health: &Arc<Health>,
    kind: &str,
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
    let feed = super::namespaces::reflect(
        writer,
        watches::<PartialObjectMeta<K>>(client, namespaces, wc, health, kind),
    )
    .touched_objects()
    .filter(without_errors)
    .boxed();
    (store, feed)
}

/// The claim reconciler: triggered by the claims served, their
/// children, their ObjectBuckets, and the classes of claims still waiting;
/// only while `leading` (then once for every cached claim).
pub(super) fn claim_controller<P: Provisioner>(
    scope: Scope,
    (bucket_events, class_events, retried): (
        ReflectHandle<ObjectBucket>,
        ReflectHandle<StorageClass>,
        mpsc::UnboundedReceiver<ObjectRef<ObjectBucketClaim>>,
    ),
    ctx: Arc<Context<P>>,
    config: Config,
    stop: watch::Receiver<bool>,
    leading: watch::Receiver<bool>,
) -> BoxFuture<'static, ()> {
    let served = ctx.clone();
    let claims_for_class = scope.claims.clone();
    let claim_feed = dropped_on_stop(scope.claim_feed, stop.clone());
    Controller::for_stream(while_leading(claim_feed, &leading), scope.claims)
        .with_config(config)
        // The trigger streams' own backoff (kube-runtime's default grows
        // to 30 s) would hold the claims back after an outage just as well.
        .trigger_backoff(watch_backoff())
        .reconcile_all_on(took_over(leading.clone()))
        .owns_stream(while_leading(scope.secret_feed, &leading))
        .owns_stream(while_leading(scope.config_map_feed, &leading))
        .watches_shared_stream(
            while_leading(bucket_events, &leading),
            move |ob: Arc<ObjectBucket>| {
                // A reservation comes and goes within the claim's own pass
                // (made before the provisioner's call, dropped after a
                // refusal that made nothing): its events would only start
                // the pass again, each one reserving anew.
                if crate::obc::reconcile::plan::is_reserved(&ob) {
                    return None;
                }
                ob.spec.claim_ref.as_ref().and_then(|r| {
                    let (ns, name) = (r.namespace.as_deref()?, r.name.as_deref()?);
                    served
                        .serves_namespace(ns)
                        .then(|| ObjectRef::new(name).within(ns))
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
        .reconcile_on(while_leading(tokio_stream_of(retried), &leading))
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
        .trigger_backoff(watch_backoff())
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

/// After the watches come back from a failure (an apiserver outage, say),
/// forgets every backoff grown during it and retries every claim still
/// waiting (not Bound for its generation, or being deleted) at once, rather
/// than when its backoff, grown through the outage, would have it.
pub(super) fn retry_after_reconnect<P: Provisioner>(
    health: Arc<Health>,
    ctx: Arc<Context<P>>,
    claims: Store<ObjectBucketClaim>,
    retry: mpsc::UnboundedSender<ObjectRef<ObjectBucketClaim>>,
    stop: watch::Receiver<bool>,
) -> BoxFuture<'static, ()> {
    let work = async move {
        loop {
            health.watches.reconnected().await;
            // The watches come back one after another: retry once they
            // have (a later one wakes this again).
            tokio::time::sleep(RECONNECT_SETTLE).await;
            ctx.backoff.reset_all();
            let mut retried = 0;
            for claim in claims.state() {
                if is_waiting(&claim) {
                    retried += 1;
                    let _ = retry.send(ObjectRef::from_obj(claim.as_ref()));
                }
            }
            info!(
                retried,
                "the watches are back; waiting claims are retried now"
            );
        }
    };
    async move {
        tokio::select! {
            () = work => {}
            () = stopped(stop) => {}
        }
    }
    .boxed()
}

/// How long after a watch comes back the waiting claims are retried: the
/// other watches of an outage reconnect within it, and one retry covers
/// them all.
const RECONNECT_SETTLE: std::time::Duration = std::time::Duration::from_millis(300);

fn is_waiting(claim: &ObjectBucketClaim) -> bool {
    let status = claim.status.as_ref();
    claim.metadata.deletion_timestamp.is_some()
        || status.and_then(|s| s.phase) != Some(ClaimPhase::Bound)
        || status.and_then(|s| s.observed_generation) != claim.metadata.generation
}

/// Resolves once every cache has listed: then reconciles may decide, and
/// `/readyz` answers ok.
pub(super) async fn signal_ready(
    classes: Store<StorageClass>,
    buckets: Store<ObjectBucket>,
    claims: Store<ObjectBucketClaim>,
    synced: watch::Sender<bool>,
    health: Arc<Health>,
) {
    let _ = classes.wait_until_ready().await;
    let _ = buckets.wait_until_ready().await;
    let _ = claims.wait_until_ready().await;
    info!("caches are synced; reconciling");
    let _ = synced.send(true);
    health.ready.store(true, Ordering::Relaxed);
}

