//! The OBC family's controllers put together: its caches ([`caches`]), its
//! two reconcilers ([`controllers`]), the retry after an outage
//! ([`reconnect`]) and the one cache over several namespaces
//! ([`namespaces`]). [`start`] is what the composition
//! ([`crate::controller`]) calls.

mod caches;
mod controllers;
mod namespaces;
mod reconnect;
mod settings;

use std::sync::Arc;

use futures::future::{BoxFuture, FutureExt};
use kube::runtime::reflector::ObjectRef;
use tokio::sync::watch;
use tracing::error;

pub(crate) use settings::Settings;
pub use settings::WatchScope;

use crate::core::backoff::Backoffs;
use crate::core::names;
use crate::core::provisioner::Provisioner;
use crate::core::runtime::Shared;
use crate::core::sweep::SweepSource;
use crate::core::watch::meter;
use crate::obc::CachedBucket;
use crate::obc::metrics::ClaimPhases;
use crate::obc::reconcile::Context;
use crate::obc::reconcile::config_checks::ConfigChecks;
use crate::obc::sweep::CacheSource;

/// Builds the caches, the context and every task (claim controller, the
/// ObjectBucket reconciler, the reconnect retrier, readiness) and joins
/// them; with them, what the store sweep sees of this family. Longer than the other functions on purpose: it is the one place
/// the pieces are put together, in the order their subscriptions and
/// channels must be taken, and reads top to bottom as that order.
pub(crate) fn start<P: Provisioner>(
    settings: Settings,
    shared: Shared,
    provisioner: Arc<P>,
) -> (BoxFuture<'static, ()>, Arc<dyn SweepSource>) {
    let label = names::provisioner_label_value(&settings.provisioner_name);
    let namespaces = settings.scope.namespaces();
    let mut caches = caches::SharedCaches::new(&shared.client, &shared.health);
    let (claim_deletions_tx, claim_deletions) =
        tokio::sync::mpsc::unbounded_channel::<ObjectRef<CachedBucket>>();
    let scope = caches::Scope::new(
        &shared.client,
        &namespaces,
        &label,
        claim_deletions_tx,
        &shared.health,
    );
    let claims = scope.claims.clone();
    let children = (scope.secrets.clone(), scope.config_maps.clone());
    shared.metrics.add_gauge(ClaimPhases::new(
        claims.clone(),
        scope.claim_changes.clone(),
    ));

    let (synced_tx, synced_rx) = watch::channel(false);
    let source: Arc<dyn SweepSource> = Arc::new(CacheSource {
        provisioner_name: settings.provisioner_name.clone(),
        classes: caches.classes.clone(),
        claims: claims.clone(),
        buckets: caches.buckets.clone(),
        synced: synced_rx.clone(),
    });
    let config = (
        kube::runtime::controller::Config::default().concurrency(shared.concurrency),
        meter::window(shared.concurrency),
    );
    let ctx = context(
        settings,
        label,
        &caches,
        &scope,
        &shared,
        synced_rx,
        provisioner,
    );
    let (stop, leading) = (shared.stop.clone(), shared.leading.clone());
    let mut tasks: Vec<BoxFuture<'static, ()>> = Vec::new();
    let (retry, retried) = tokio::sync::mpsc::unbounded_channel();
    match caches.claim_triggers.take() {
        Some((buckets, classes)) => tasks.push(controllers::claim_controller(
            scope,
            (buckets, classes, retried),
            ctx.clone(),
            config.clone(),
            stop.clone(),
            leading.clone(),
        )),
        None => error!("the shared caches cannot be subscribed to; this is a bug"),
    }
    tasks.push(reconnect::retry_after_reconnect(
        shared.health.clone(),
        ctx.clone(),
        claims.clone(),
        retry,
        stop.clone(),
    ));
    if let Some(bucket_events) = caches.bucket_triggers.take() {
        tasks.push(controllers::bucket_controller(
            bucket_events,
            caches.buckets.clone(),
            claim_deletions,
            ctx.clone(),
            config,
            stop.clone(),
            leading,
        ));
    }
    let ready = caches::signal_ready(
        (caches.classes.clone(), caches.buckets.clone()),
        claims,
        children,
        synced_tx,
        shared.health.clone(),
    );
    let feeds = caches.feeds;
    let mut stop_feeds = stop;
    let run = async move {
        tokio::join!(
            futures::future::join_all(tasks),
            async {
                tokio::select! {
                    () = feeds => {}
                    _ = stop_feeds.wait_for(|s| *s) => {}
                }
            },
            ready,
        );
    }
    .boxed();
    (run, source)
}

/// What every reconcile reads: the client, the provisioner, the caches,
/// the settings.
fn context<P: Provisioner>(
    settings: Settings,
    label: String,
    caches: &caches::SharedCaches,
    scope: &caches::Scope,
    shared: &Shared,
    caches_synced: watch::Receiver<bool>,
    provisioner: Arc<P>,
) -> Arc<Context<P>> {
    let namespaces = match &settings.scope {
        WatchScope::All => None,
        WatchScope::Namespaces(list) => Some(list.iter().cloned().collect()),
    };
    Arc::new(Context {
        events: shared.events(label.clone()),
        client: shared.client.clone(),
        provisioner,
        provisioner_name: settings.provisioner_name,
        label,
        classes: caches.classes.clone(),
        buckets: caches.buckets.clone(),
        claims: scope.claims.clone(),
        secrets: scope.secrets.clone(),
        config_maps: scope.config_maps.clone(),
        runtime: shared.runtime(caches_synced),
        backoff: Backoffs::new(shared.backoff.0, shared.backoff.1),
        resync: settings.resync,
        pruned_binds: Default::default(),
        superseded: Default::default(),
        superseded_buckets: Default::default(),
        in_flight: Default::default(),
        verified: Default::default(),
        api_errors: Default::default(),
        config_checks: ConfigChecks::new(settings.config_check_interval),
        namespaces,
        name_records: settings.name_records,
    })
}
