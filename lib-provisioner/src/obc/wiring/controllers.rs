//! The OBC family's two reconcilers wired to their caches and triggers:
//! claims, and ObjectBuckets whose claims are gone.

use std::sync::Arc;

use futures::future::{BoxFuture, FutureExt};
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
use crate::obc::api::ClaimPhase;
use crate::obc::reconcile::{self, Context, bucket, claim};
use crate::obc::{CachedBucket, CachedClaim};

/// The claim reconciler: triggered by the claims served, their
/// children, their ObjectBuckets, and the classes of claims still waiting;
/// only while `leading` (then once for every cached claim).
pub(super) fn claim_controller<P: Provisioner>(
    scope: Scope,
    (bucket_events, class_events, retried): (
        ReflectHandle<CachedBucket>,
        ReflectHandle<StorageClass>,
        mpsc::UnboundedReceiver<ObjectRef<CachedClaim>>,
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
            move |ob: Arc<CachedBucket>| {
                // A reservation comes and goes within the claim's own pass
                // (made before the provisioner's call, dropped after a
                // refusal that made nothing): its events would only start
                // the pass again, each one reserving anew.
                if crate::obc::reconcile::plan::cached_is_reserved(&ob) {
                    return None;
                }
                ob.without_maps().spec.claim_ref.as_ref().and_then(|r| {
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
                        let c = c.without_maps();
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
    bucket_events: ReflectHandle<CachedBucket>,
    buckets: Store<CachedBucket>,
    deletions: mpsc::UnboundedReceiver<ObjectRef<CachedBucket>>,
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
