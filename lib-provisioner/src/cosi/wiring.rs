//! The COSI watches and the three controllers (BucketClaim, Bucket,
//! BucketAccess), started by [`ControllerBuilder`](crate::controller::ControllerBuilder)
//! beside the OBC ones: same leader gate, metrics, health and stop signal.
//!
//! Caches only map events to objects; every pass reads what it decides on
//! from the API.

use std::sync::Arc;
use std::time::Duration;

use futures::future::{BoxFuture, FutureExt};
use futures::stream::StreamExt;
use kube::runtime::controller::{Config, Controller};
use kube::runtime::reflector::{self, ObjectRef, ReflectHandle, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use tokio::sync::watch;

use super::access::by_claim::AccessesByClaim;
use super::api::{Bucket, BucketAccess, BucketAccessClass, BucketClaim, BucketClass};
use super::context::{Caches, CosiContext, error_policy};
use super::sweep::CacheSource;
use super::{CosiOptions, access, bucket, claim};
use crate::core::backoff::Backoffs;
use crate::core::log::log_controller_error;
use crate::core::provisioner::Provisioner;
use crate::core::runtime::Shared;
use crate::core::server::Health;
use crate::core::sweep::SweepSource;
use crate::core::watch::backoff::watch_backoff;
use crate::core::watch::feeds::{Watchable, strip_managed_fields, tracked};
use crate::core::watch::gone::Gone;
use crate::core::watch::triggers::{stopped, took_over, while_leading};

/// One shared watch: its cache, its subscriptions, and the feed that
/// fills them (polled until the controller stops).
struct Watched<K: kube::Resource<DynamicType = ()> + Clone + 'static> {
    store: Store<K>,
    subs: Vec<ReflectHandle<K>>,
    /// Its deletions, which the subscriptions never carry.
    gone: Gone<K>,
    feed: BoxFuture<'static, ()>,
}

fn watched<K>(client: &Client, health: &Arc<Health>, name: &str, subscribers: usize) -> Watched<K>
where
    K: Watchable,
{
    watched_with(client, health, name, subscribers, |_| {})
}

/// [`watched`], with `tap` shown every event before the cache is.
fn watched_with<K>(
    client: &Client,
    health: &Arc<Health>,
    name: &str,
    subscribers: usize,
    tap: impl FnMut(&Result<watcher::Event<K>, watcher::Error>) + Send + 'static,
) -> Watched<K>
where
    K: Watchable,
{
    let (store, writer) = reflector::store_shared::<K>(256);
    let subs = (0..subscribers)
        .filter_map(|_| writer.subscribe())
        .collect();
    let gone = Gone::new();
    let feed = watcher(
        Api::<K>::all(client.clone()),
        watcher::Config::default().any_semantic(),
    )
    .backoff(watch_backoff())
    .inspect(tracked(health, name))
    .modify(strip_managed_fields)
    .inspect(gone.tap())
    .inspect(tap)
    .reflect_shared(writer)
    .for_each(|_| async {})
    .boxed();
    Watched {
        store,
        subs,
        gone,
        feed,
    }
}

/// Starts the COSI controllers; resolves once they and their watches stop.
/// With it, what the store sweep sees of this family.
pub(crate) fn start<P: Provisioner>(
    options: CosiOptions,
    shared: Shared,
    provisioner: Arc<P>,
) -> (BoxFuture<'static, ()>, Arc<dyn SweepSource>) {
    let binding = options.binding();
    // The sweep reads claims and classes too: their watches then run
    // without the binding role.
    let watch_all = binding || shared.sweep.is_some();
    let client = &shared.client;
    let health = &shared.health;
    // Subscriptions only for the controllers that run: an unread one
    // would hold its watch back. Claims and classes are watched for the
    // binding role only; without it their watches are never polled (no
    // request), and are kept out of the health (an idle watch would hide
    // every other watch failing), unless the sweep reads them.
    let idle = Arc::new(Health::new(Duration::MAX));
    let bh = if watch_all { health } else { &idle };
    let mut claims = watched::<BucketClaim>(client, bh, "BucketClaim", if binding { 2 } else { 0 });
    let mut buckets = watched::<Bucket>(client, health, "Bucket", if binding { 3 } else { 2 });
    let by_claim = AccessesByClaim::default();
    let mut accesses = watched_with::<BucketAccess>(
        client,
        health,
        "BucketAccess",
        if binding { 2 } else { 1 },
        by_claim.tap(),
    );
    let mut classes = watched::<BucketClass>(client, bh, "BucketClass", usize::from(binding));
    let mut access_classes =
        watched::<BucketAccessClass>(client, bh, "BucketAccessClass", usize::from(binding));

    let (synced_tx, synced) = watch::channel(false);
    let source: Arc<dyn SweepSource> = Arc::new(CacheSource {
        driver: options.driver_name().to_owned(),
        classes: classes.store.clone(),
        access_classes: access_classes.store.clone(),
        claims: claims.store.clone(),
        accesses: accesses.store.clone(),
        buckets: buckets.store.clone(),
        synced: synced.clone(),
    });
    let ctx = Arc::new(CosiContext {
        events: shared.events(format!("cosi-{}", options.driver_name())),
        client: client.clone(),
        provisioner,
        driver: options.driver_name().to_owned(),
        binding,
        runtime: shared.runtime(synced),
        backoff: Backoffs::new(shared.backoff.0, shared.backoff.1),
        accesses: by_claim.clone(),
        caches: Caches {
            buckets: buckets.store.clone(),
            claims: claims.store.clone(),
            classes: classes.store.clone(),
            access_classes: access_classes.store.clone(),
        },
        own_writes: Default::default(),
        pace: Default::default(),
        refusals: Default::default(),
    });
    let config = Config::default().concurrency(shared.concurrency);
    let (stop, leading) = (&shared.stop, &shared.leading);
    let mut tasks: Vec<BoxFuture<'static, ()>> = Vec::new();

    // Bucket controller (driver role).
    let (bucket_for, bucket_claims) = (buckets.subs.remove(0), buckets.subs.remove(0));
    tasks.push(
        Controller::for_shared_stream(while_leading(bucket_for, leading), buckets.store.clone())
            .with_config(config.clone())
            .trigger_backoff(watch_backoff())
            .reconcile_all_on(took_over(leading.clone()))
            .graceful_shutdown_on(stopped(stop.clone()))
            .run(bucket::steps::reconcile, error_policy, ctx.clone())
            .for_each(|r| async move {
                if let Err(e) = r {
                    log_controller_error("Bucket", &e);
                }
            })
            .boxed(),
    );

    // BucketAccess controller (both roles): its claims and their Buckets
    // move it along.
    let access_for = accesses.subs.remove(0);
    let by_bucket = by_claim.clone();
    let by_class = accesses.store.clone();
    let mut access_ctrl =
        Controller::for_shared_stream(while_leading(access_for, leading), accesses.store.clone())
            .with_config(config.clone())
            .trigger_backoff(watch_backoff())
            .reconcile_all_on(took_over(leading.clone()))
            .watches_shared_stream(
                while_leading(bucket_claims, leading),
                move |b: Arc<Bucket>| {
                    let r = &b.spec.bucket_claim_ref;
                    by_bucket.naming(&r.namespace, &r.name)
                },
            );
    if binding {
        let claim_sub = claims.subs.remove(0);
        let class_sub = access_classes.subs.remove(0);
        access_ctrl = access_ctrl
            .watches_shared_stream(
                while_leading(claim_sub, leading),
                move |c: Arc<BucketClaim>| {
                    by_claim.naming(&c.namespace().unwrap_or_default(), &c.name_any())
                },
            )
            .watches_shared_stream(
                while_leading(class_sub, leading),
                move |c: Arc<BucketAccessClass>| {
                    by_class
                        .state()
                        .into_iter()
                        .filter(|a| {
                            a.spec.bucket_access_class_name == c.name_any()
                                && a.status.as_ref().is_none_or(|s| s.driver_name.is_none())
                        })
                        .map(|a| ObjectRef::from_obj(a.as_ref()))
                        .collect::<Vec<_>>()
                },
            );
    }
    tasks.push(
        access_ctrl
            .graceful_shutdown_on(stopped(stop.clone()))
            .run(access::reconcile::reconcile, error_policy, ctx.clone())
            .for_each(|r| async move {
                if let Err(e) = r {
                    log_controller_error("BucketAccess", &e);
                }
            })
            .boxed(),
    );

    if binding {
        tasks.push(claim_controller(
            &mut claims,
            &mut buckets,
            &mut accesses,
            &mut classes,
            ctx.clone(),
            config,
            (stop.clone(), leading.clone()),
        ));
    }

    let ready = {
        let (b, a) = (buckets.store.clone(), accesses.store.clone());
        let binding_stores = watch_all.then(|| {
            (
                claims.store.clone(),
                classes.store.clone(),
                access_classes.store.clone(),
            )
        });
        async move {
            let _ = b.wait_until_ready().await;
            let _ = a.wait_until_ready().await;
            if let Some((c, bc, ac)) = binding_stores {
                let _ = c.wait_until_ready().await;
                let _ = bc.wait_until_ready().await;
                let _ = ac.wait_until_ready().await;
            }
            tracing::info!("COSI caches are synced; reconciling");
            let _ = synced_tx.send(true);
        }
    };
    let mut feeds = vec![buckets.feed, accesses.feed];
    if watch_all {
        feeds.extend([claims.feed, classes.feed, access_classes.feed]);
    }
    let feeds = futures::future::join_all(feeds);
    let mut stop_feeds = shared.stop.clone();
    let run = async move {
        tokio::join!(
            futures::future::join_all(tasks),
            async {
                tokio::select! {
                    _ = feeds => {}
                    _ = stop_feeds.wait_for(|s| *s) => {}
                }
            },
            ready,
        );
    }
    .boxed();
    (run, source)
}

/// The claim controller (binding role): its Buckets, the BucketAccesses
/// naming it (a deletion waits for them) and its class move it along.
fn claim_controller<P: Provisioner>(
    claims: &mut Watched<BucketClaim>,
    buckets: &mut Watched<Bucket>,
    accesses: &mut Watched<BucketAccess>,
    classes: &mut Watched<BucketClass>,
    ctx: Arc<CosiContext<P>>,
    config: Config,
    (stop, leading): (watch::Receiver<bool>, watch::Receiver<bool>),
) -> BoxFuture<'static, ()> {
    let claim_for = claims.subs.remove(0);
    let bucket_sub = buckets.subs.remove(0);
    let access_sub = accesses.subs.remove(0);
    let class_sub = classes.subs.remove(0);
    let waiting = claims.store.clone();
    // A deleting claim waits for its Bucket and the BucketAccesses naming
    // it to go: their deletions move it on (the subscriptions omit them).
    let gone = futures::stream::select(
        buckets.gone.mapped(|b: &Bucket| Some(claim_of_bucket(b))),
        accesses.gone.mapped(claims_of_access),
    );
    Controller::for_shared_stream(while_leading(claim_for, &leading), claims.store.clone())
        .with_config(config)
        .trigger_backoff(watch_backoff())
        .reconcile_all_on(took_over(leading.clone()))
        .reconcile_on(while_leading(gone, &leading))
        .watches_shared_stream(while_leading(bucket_sub, &leading), |b: Arc<Bucket>| {
            Some(claim_of_bucket(&b))
        })
        .watches_shared_stream(
            while_leading(access_sub, &leading),
            |a: Arc<BucketAccess>| claims_of_access(&a),
        )
        .watches_shared_stream(
            while_leading(class_sub, &leading),
            move |c: Arc<BucketClass>| {
                waiting
                    .state()
                    .into_iter()
                    .filter(|claim| {
                        claim.spec.bucket_class_name.as_deref() == Some(&c.name_any())
                            && claim
                                .status
                                .as_ref()
                                .is_none_or(|s| s.bound_bucket_name.is_none())
                    })
                    .map(|claim| ObjectRef::from_obj(claim.as_ref()))
                    .collect::<Vec<_>>()
            },
        )
        .graceful_shutdown_on(stopped(stop))
        .run(claim::steps::reconcile, error_policy, ctx)
        .for_each(|r| async move {
            if let Err(e) = r {
                log_controller_error("BucketClaim", &e);
            }
        })
        .boxed()
}

/// The claim a Bucket names.
fn claim_of_bucket(b: &Bucket) -> ObjectRef<BucketClaim> {
    let r = &b.spec.bucket_claim_ref;
    ObjectRef::new(&r.name).within(&r.namespace)
}

/// The claims a BucketAccess names (in its own namespace).
fn claims_of_access(a: &BucketAccess) -> Vec<ObjectRef<BucketClaim>> {
    let ns = a.namespace().unwrap_or_default();
    a.spec
        .bucket_claims
        .iter()
        .map(|c| ObjectRef::new(&c.bucket_claim_name).within(&ns))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The deletions that move a deleting claim on reach the claim they
    /// name: a Bucket its `bucketClaimRef`, a BucketAccess each claim of
    /// its own namespace it lists.
    #[test]
    fn deletions_are_mapped_to_the_claims_that_wait_for_them() {
        let bucket: Bucket = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "bc-1"},
            "spec": {"driverName": "d", "deletionPolicy": "Delete",
                     "bucketClaimRef": {"name": "photos", "namespace": "team"}}
        }))
        .expect("bucket");
        assert_eq!(
            claim_of_bucket(&bucket),
            ObjectRef::new("photos").within("team")
        );
        let access: BucketAccess = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "reader", "namespace": "team"},
            "spec": {"bucketAccessClassName": "c", "protocol": "S3", "bucketClaims": [
                {"bucketClaimName": "photos", "accessMode": "ReadOnly", "accessSecretName": "s1"},
                {"bucketClaimName": "logs", "accessMode": "ReadOnly", "accessSecretName": "s2"}
            ]}
        }))
        .expect("access");
        assert_eq!(
            claims_of_access(&access),
            [
                ObjectRef::new("photos").within("team"),
                ObjectRef::new("logs").within("team")
            ]
        );
    }
}
