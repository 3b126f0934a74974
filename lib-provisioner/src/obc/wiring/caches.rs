//! The OBC family's watches and caches: StorageClasses and ObjectBuckets
//! (cluster-scoped, shared by both reconcilers), and the claims of the
//! namespaces served with their Secrets and ConfigMaps (metadata only, our
//! label only).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::TryStreamExt;
use futures::future::{BoxFuture, FutureExt};
use futures::stream::{BoxStream, StreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{self, ObjectRef, ReflectHandle, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use tokio::sync::{mpsc, watch};
use tracing::info;

use crate::core::server::Health;
use crate::core::watch::backoff::watch_backoff;
use crate::core::watch::feeds::{
    Watchable, keep_other_writers, map_event, strip_managed_fields, tracked, without_errors,
};
use crate::core::writes::FIELD_MANAGER;
use crate::obc::api::{ObjectBucket, ObjectBucketClaim, PROVISIONER_LABEL};
use crate::obc::reconcile::child_cache::{ChildCache, OwnerFeed};
use crate::obc::reconcile::child_meta::CachedChild;
use crate::obc::reconcile::plan;
use crate::obc::{CachedBucket, CachedClaim, Compact};

type Feed<K> = BoxStream<'static, Result<K, watcher::Error>>;
type Watch<K> = BoxStream<'static, Result<watcher::Event<K>, watcher::Error>>;

/// The cluster-scoped caches (StorageClasses, ObjectBuckets), shared by
/// the claim reconciler and the ObjectBucket reconciler.
pub(super) struct SharedCaches {
    pub classes: Store<StorageClass>,
    pub buckets: Store<CachedBucket>,
    /// The claim reconciler's subscriptions to both.
    pub claim_triggers: Option<(ReflectHandle<CachedBucket>, ReflectHandle<StorageClass>)>,
    /// The ObjectBucket reconciler's.
    pub bucket_triggers: Option<ReflectHandle<CachedBucket>>,
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
        let (buckets, bucket_writer) = reflector::store_shared::<CachedBucket>(1024);
        let claim_triggers = bucket_writer.subscribe().zip(class_triggers);
        let bucket_triggers = bucket_writer.subscribe();
        let bucket_feed = watcher(Api::<ObjectBucket>::all(client.clone()), wc)
            .backoff(watch_backoff())
            .inspect(tracked(health, "ObjectBucket"))
            .modify(strip_managed_fields)
            .map_ok(|e| map_event(e, Compact::from))
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
/// ([`super::namespaces::reflect`], [`ChildCache`]).
pub(super) struct Scope {
    pub claims: Store<CachedClaim>,
    /// Bumped by every claim event, after the claim cache holds it
    /// (`obc::metrics::ClaimPhases` counts again only then).
    pub claim_changes: Arc<AtomicU64>,
    pub secrets: ChildCache<Secret>,
    pub config_maps: ChildCache<ConfigMap>,
    pub(super) claim_feed: Feed<CachedClaim>,
    /// The claims whose Secrets changed; the same for ConfigMaps.
    pub(super) secret_feed: OwnerFeed,
    pub(super) config_map_feed: OwnerFeed,
}

impl Scope {
    /// Watches for `namespaces` (`[None]`: all). Claim deletions are sent
    /// to `deleted` as the ObjectBucket they leave behind.
    pub(super) fn new(
        client: &Client,
        namespaces: &[Option<String>],
        label: &str,
        deleted: mpsc::UnboundedSender<ObjectRef<CachedBucket>>,
        health: &Arc<Health>,
    ) -> Self {
        let wc = watcher::Config::default().any_semantic();
        let child_wc = wc.clone().labels(&format!("{PROVISIONER_LABEL}={label}"));
        let (claims, claim_writer) = reflector::store();
        let claim_changes = Arc::new(AtomicU64::new(0));
        // The ObjectBucket reconciler learns of deleted claims from this
        // same stream, after the claim cache has dropped them: a second
        // watch could report a deletion the cache has not seen yet.
        let claim_feed = super::namespaces::reflect(
            claim_writer,
            watches::<ObjectBucketClaim, _>(
                client,
                namespaces,
                (&wc, health, "ObjectBucketClaim"),
                Compact::from,
            ),
        )
        .inspect({
            let changes = claim_changes.clone();
            move |event| {
                if let Ok(watcher::Event::Delete(claim)) = event {
                    let name = plan::object_bucket_name(&claim.object());
                    let _ = deleted.send(ObjectRef::new(&name));
                }
                if event.is_ok() {
                    changes.fetch_add(1, Ordering::Release);
                }
            }
        })
        .touched_objects()
        .filter(without_errors)
        .boxed();
        let (secrets, secret_feed) = child_feed(client, namespaces, &child_wc, health, label);
        let (config_maps, config_map_feed) =
            child_feed(client, namespaces, &child_wc, health, label);
        Self {
            claims,
            claim_changes,
            secrets,
            config_maps,
            claim_feed,
            secret_feed,
            config_map_feed,
        }
    }
}

/// One watch of `K` per namespace (`None`: all), with its namespace, each
/// retried with its own
/// backoff and tracked in the watches' health under its own name; each
/// object is handed on as `keep` makes it (what the cache holds of it).
/// (`K` a `PartialObjectMeta`: kube asks for metadata only.)
fn watches<K, C>(
    client: &Client,
    namespaces: &[Option<String>],
    (wc, health, kind): (&watcher::Config, &Arc<Health>, &str),
    keep: fn(K) -> C,
) -> Vec<(Option<String>, Watch<C>)>
where
    K: Watchable + kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    C: Send + 'static,
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
                .modify(|child| keep_other_writers(child, FIELD_MANAGER, CHILD_PAYLOAD))
                .backoff(watch_backoff())
                .inspect(tracked(health, name))
                .map_ok(move |e| map_event(e, keep))
                .boxed();
            (ns.clone(), watch)
        })
        .collect()
}

/// A child's fields that hold what the library wrote: its data and the
/// data hash annotations. Another writer owning any of them makes the drift
/// check read the child (`obc::reconcile::drift`); the managed fields of
/// the library's own writes are not kept.
const CHILD_PAYLOAD: &[&[&str]] = &[
    &["f:data"],
    &["f:binaryData"],
    &[
        "f:metadata",
        "f:annotations",
        "f:objectbucket.io/secret-hash",
    ],
    &[
        "f:metadata",
        "f:annotations",
        "f:objectbucket.io/configmap-hash",
    ],
];

/// A metadata-only cache of one kind of child, and the watches that fill it:
/// what the decisions read of each child ([`CachedChild`]), no more; with
/// the feed of the claims whose children changed.
fn child_feed<K>(
    client: &Client,
    namespaces: &[Option<String>],
    wc: &watcher::Config,
    health: &Arc<Health>,
    label: &str,
) -> (ChildCache<K>, OwnerFeed)
where
    K: Watchable + kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
{
    let kind = K::kind(&());
    let watches = watches::<PartialObjectMeta<K>, _>(
        client,
        namespaces,
        (wc, health, &kind),
        CachedChild::from,
    );
    ChildCache::filled_by(watches, label)
}

/// Resolves once every cache has listed: then reconciles may decide, and
/// `/readyz` answers ok. The children's caches count too: a pass that
/// found a claim's Secret missing only because its cache had not listed
/// yet would write it (a create answered 409, then a read) for every claim
/// at a restart.
pub(super) async fn signal_ready(
    (classes, buckets): (Store<StorageClass>, Store<CachedBucket>),
    claims: Store<CachedClaim>,
    (secrets, config_maps): (ChildCache<Secret>, ChildCache<ConfigMap>),
    synced: watch::Sender<bool>,
    health: Arc<Health>,
) {
    let _ = classes.wait_until_ready().await;
    let _ = buckets.wait_until_ready().await;
    let _ = claims.wait_until_ready().await;
    secrets.wait_until_ready().await;
    config_maps.wait_until_ready().await;
    info!("caches are synced; reconciling");
    let _ = synced.send(true);
    health.ready.store(true, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::CHILD_PAYLOAD;
    use crate::obc::api::{CONFIG_MAP_HASH_ANNOTATION, SECRET_HASH_ANNOTATION};

    #[test]
    fn the_payload_paths_name_the_hash_annotations() {
        for key in [SECRET_HASH_ANNOTATION, CONFIG_MAP_HASH_ANNOTATION] {
            let path = ["f:metadata", "f:annotations", &format!("f:{key}")].map(String::from);
            assert!(
                CHILD_PAYLOAD.iter().any(|p| p.iter().eq(path.iter())),
                "{key}"
            );
        }
    }
}
