//! The OBC family's two reconcilers wired to their caches and triggers:
//! claims, and ObjectBuckets whose claims are gone.

use std::sync::Arc;

use futures::future::{BoxFuture, FutureExt, Ready, ready};
use futures::stream::StreamExt;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::runtime::controller::{Config, Controller};
use kube::runtime::reflector::{ObjectRef, ReflectHandle, Store};
use tokio::sync::{mpsc, watch};

use super::caches::Scope;
use crate::core::log::log_controller_error;
use crate::core::provisioner::Provisioner;
use crate::core::watch::backoff::watch_backoff;
use crate::core::watch::feeds::{dropped_on_stop, tokio_stream_of};
use crate::core::watch::triggers::{stopped, took_over, while_leading};
use crate::core::watch::{keys, meter, resync};
use crate::obc::api::ClaimPhase;
use crate::obc::reconcile::{self, Context, bucket, claim};
use crate::obc::{CachedBucket, CachedClaim};

/// The claim reconciler: triggered by the claims served, their
/// children, their ObjectBuckets, and the classes of claims still waiting;
/// only while `leading` (then once for every cached claim), and every claim
/// once per resync period, paced ([`resync::paced`]). Every trigger hands
/// the scheduler a lean key ([`keys`]), a window at a time ([`meter`]).
pub(super) fn claim_controller<P: Provisioner>(
    scope: Scope,
    (bucket_events, class_events, retried): (
        ReflectHandle<CachedBucket>,
        ReflectHandle<StorageClass>,
        mpsc::UnboundedReceiver<ObjectRef<CachedClaim>>,
    ),
    ctx: Arc<Context<P>>,
    (config, window): (Config, usize),
    stop: watch::Receiver<bool>,
    leading: watch::Receiver<bool>,
) -> BoxFuture<'static, ()> {
    let served = ctx.clone();
    let claims_for_class = scope.claims.clone();
    let resync = resync::paced(scope.claims.clone(), ctx.resync);
    let everything = keys::all_keys_on(took_over(leading.clone()), scope.claims.clone());
    let claim_feed = dropped_on_stop(scope.claim_feed, stop.clone());
    let children = futures::stream::select(scope.secret_feed, scope.config_map_feed);
    let bucket_claims = bucket_events.filter_map(move |ob: Arc<CachedBucket>| {
        // A reservation comes and goes within the claim's own pass
        // (made before the provisioner's call, dropped after a
        // refusal that made nothing): its events would only start
        // the pass again, each one reserving anew.
        if crate::obc::reconcile::plan::cached_is_reserved(&ob) {
            return ready(None);
        }
        ready(ob.without_maps().spec.claim_ref.as_ref().and_then(|r| {
            let (ns, name) = (r.namespace.as_deref()?, r.name.as_deref()?);
            served
                .serves_namespace(ns)
                .then(|| ObjectRef::new(name).within(ns))
        }))
    });
    let class_claims = class_events.flat_map(move |class: Arc<StorageClass>| {
        // A class appearing or changing can unblock waiting claims and
        // blocked deletions (a fixed parameter); bound claims do not
        // depend on it.
        let name = class.metadata.name.clone().unwrap_or_default();
        let waiting: Vec<ObjectRef<CachedClaim>> = claims_for_class
            .state()
            .into_iter()
            .filter(|c| {
                let c = c.without_maps();
                c.spec.storage_class_name == name
                    && (c.metadata.deletion_timestamp.is_some()
                        || c.status.as_ref().and_then(|s| s.phase) != Some(ClaimPhase::Bound))
            })
            .map(|c| keys::key_of(c.as_ref()))
            .collect();
        futures::stream::iter(waiting)
    });
    let triggers = futures::stream::select_all([
        claim_feed.filter_map(lean).boxed(),
        children.boxed(),
        bucket_claims.boxed(),
        class_claims.boxed(),
        tokio_stream_of(retried).boxed(),
        resync,
    ]);
    let triggers = futures::stream::select(while_leading(triggers, &leading), everything);
    let (triggers, ended) = meter::metered(triggers, window);
    // The claims themselves come as one more trigger (`reconcile_on`): the
    // main stream's `trigger_self` would copy a version and UID into each
    // key.
    Controller::for_stream(futures::stream::pending(), scope.claims)
        .with_config(config)
        // The trigger streams' own backoff (kube-runtime's default grows
        // to 30 s) would hold the claims back after an outage just as well.
        .trigger_backoff(watch_backoff())
        .reconcile_on(triggers)
        .graceful_shutdown_on(stopped(stop))
        .run(claim::reconcile, reconcile::error_policy, ctx)
        .for_each(move |result| {
            ended.report(&result);
            if let Err(e) = result {
                log_controller_error("claim", &e);
            }
            ready(())
        })
        .boxed()
}

/// The ObjectBucket reconciler. A claim that disappears leaves its
/// ObjectBucket unchanged; only the claim's deletion (`deletions`) can tell
/// it to look; the paced resync looks at each once per period, for a
/// deletion a watch gap (a relist) never reported. Only while `leading`,
/// like the claim reconciler, and with lean keys, metered, too.
#[allow(clippy::too_many_arguments)]
pub(super) fn bucket_controller<P: Provisioner>(
    bucket_events: ReflectHandle<CachedBucket>,
    buckets: Store<CachedBucket>,
    deletions: mpsc::UnboundedReceiver<ObjectRef<CachedBucket>>,
    ctx: Arc<Context<P>>,
    (config, window): (Config, usize),
    stop: watch::Receiver<bool>,
    leading: watch::Receiver<bool>,
) -> BoxFuture<'static, ()> {
    let resync = resync::paced(buckets.clone(), ctx.resync);
    let everything = keys::all_keys_on(took_over(leading.clone()), buckets.clone());
    let triggers = futures::stream::select_all([
        bucket_events.map(|ob| keys::key_of(ob.as_ref())).boxed(),
        tokio_stream_of(deletions).boxed(),
        resync,
    ]);
    let triggers = futures::stream::select(while_leading(triggers, &leading), everything);
    let (triggers, ended) = meter::metered(triggers, window);
    Controller::for_stream(futures::stream::pending(), buckets)
        .with_config(config)
        .trigger_backoff(watch_backoff())
        .reconcile_on(triggers)
        .graceful_shutdown_on(stopped(stop))
        .run(bucket::reconcile, reconcile::error_policy, ctx)
        .for_each(move |result| {
            ended.report(&result);
            if let Err(e) = result {
                log_controller_error("ObjectBucket", &e);
            }
            ready(())
        })
        .boxed()
}

/// A watched object's key; a watch error (logged where the watch is
/// tracked) is none.
fn lean<K>(object: Result<K, kube::runtime::watcher::Error>) -> Ready<Option<ObjectRef<K>>>
where
    K: kube::Resource<DynamicType = ()>,
{
    ready(object.ok().map(|o| keys::key_of(&o)))
}
