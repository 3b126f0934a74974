//! Wiring: watches, caches, the two reconcilers, leader election and the
//! metrics/health server, started from a builder in a few lines.
//!
//! ```no_run
//! # use lib_provisioner::provisioner::*;
//! # struct MyStore;
//! # #[async_trait::async_trait]
//! # impl Provisioner for MyStore {
//! #   async fn provision(&self, _: &BucketRequest) -> Result<BucketAccess, ProvisionError> { unimplemented!() }
//! #   async fn grant(&self, _: &BucketRequest) -> Result<BucketAccess, ProvisionError> { unimplemented!() }
//! #   async fn delete(&self, _: &TeardownRequest) -> Result<(), ProvisionError> { Ok(()) }
//! #   async fn revoke(&self, _: &TeardownRequest) -> Result<(), ProvisionError> { Ok(()) }
//! # }
//! use lib_provisioner::{ControllerBuilder, leader::LeaderElection};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let client = kube::Client::try_default().await?;
//! ControllerBuilder::new("example.com/bucket", MyStore)
//!     .namespaces(["team-a", "team-b"])
//!     .concurrency(8)
//!     .leader_election(LeaderElection::new("obc-system", "example-provisioner", "pod-1"))
//!     .serve_on("0.0.0.0:8080".parse()?)
//!     .run(client, async { let _ = tokio::signal::ctrl_c().await; })
//!     .await?;
//! # Ok(()) }
//! ```

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::future::{BoxFuture, FutureExt};
use futures::stream::{BoxStream, StreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::core::PartialObjectMeta;
use kube::runtime::controller::Controller;
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use tokio::sync::watch;
use tracing::{error, info, warn};

use crate::api::{ClaimPhase, ObjectBucket, ObjectBucketClaim, PROVISIONER_LABEL};
use crate::error::{Result, RunError};
use crate::leader::{Elector, LeaderElection, Leadership};
use crate::metrics::Metrics;
use crate::names;
use crate::provisioner::Provisioner;
use crate::reconcile::{self, Backoffs, ChildStores, Context, bucket, claim};
use crate::server::Health;

/// Which namespaces' claims to serve.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum WatchScope {
    /// Every namespace.
    #[default]
    All,
    /// Only these namespaces.
    Namespaces(Vec<String>),
}

/// How long a provisioner call may take unless
/// [`ControllerBuilder::provisioner_timeout`] says otherwise.
pub const DEFAULT_PROVISIONER_TIMEOUT: Duration = Duration::from_secs(60);

/// Configures and starts a provisioner controller.
pub struct ControllerBuilder<P> {
    provisioner_name: String,
    provisioner: P,
    scope: WatchScope,
    concurrency: u16,
    leader_election: Option<LeaderElection>,
    serve_on: Option<SocketAddr>,
    resync: Duration,
    backoff: (Duration, Duration),
    provisioner_timeout: Duration,
}

impl<P: Provisioner> ControllerBuilder<P> {
    /// A controller serving StorageClasses whose `provisioner` is
    /// `provisioner_name`, in all namespaces, 4 claims at a time, without
    /// leader election or server (turn them on with the methods below).
    pub fn new(provisioner_name: impl Into<String>, provisioner: P) -> Self {
        Self {
            provisioner_name: provisioner_name.into(),
            provisioner,
            scope: WatchScope::All,
            concurrency: 4,
            leader_election: None,
            serve_on: None,
            resync: Duration::from_secs(600),
            backoff: (Duration::from_millis(500), Duration::from_secs(300)),
            provisioner_timeout: DEFAULT_PROVISIONER_TIMEOUT,
        }
    }

    /// Serves only claims in these namespaces (an empty list means all).
    pub fn namespaces<S: Into<String>>(mut self, namespaces: impl IntoIterator<Item = S>) -> Self {
        let list: Vec<String> = namespaces.into_iter().map(Into::into).collect();
        self.scope = if list.is_empty() {
            WatchScope::All
        } else {
            WatchScope::Namespaces(list)
        };
        self
    }

    /// How many claims are reconciled at once (0 means unbounded).
    pub fn concurrency(mut self, concurrency: u16) -> Self {
        self.concurrency = concurrency;
        self
    }

    /// Takes part in leader election; only the leader reconciles.
    pub fn leader_election(mut self, election: LeaderElection) -> Self {
        self.leader_election = Some(election);
        self
    }

    /// Serves `/metrics`, `/healthz` and `/readyz` on this address.
    pub fn serve_on(mut self, addr: SocketAddr) -> Self {
        self.serve_on = Some(addr);
        self
    }

    /// How often a bound claim is checked again without any change.
    pub fn resync(mut self, every: Duration) -> Self {
        self.resync = every;
        self
    }

    /// Bounds of the per-claim retry backoff.
    pub fn backoff(mut self, min: Duration, max: Duration) -> Self {
        self.backoff = (min, max);
        self
    }

    /// How long one provisioner call may take before it is abandoned
    /// (default [`DEFAULT_PROVISIONER_TIMEOUT`]). A call cut off is treated
    /// as retryable: the claim shows a `ProvisionerTimeout` Event and
    /// status message and is retried with backoff, so one hung store call
    /// neither pins a claim forever nor holds shutdown past this bound.
    ///
    /// ```
    /// # use lib_provisioner::{ControllerBuilder, provisioner::Provisioner};
    /// # fn configure<P: Provisioner>(p: P) {
    /// let builder = ControllerBuilder::new("example.com/bucket", p)
    ///     .provisioner_timeout(std::time::Duration::from_secs(20));
    /// # }
    /// ```
    pub fn provisioner_timeout(mut self, timeout: Duration) -> Self {
        self.provisioner_timeout = timeout;
        self
    }

    /// Runs until `shutdown` completes (then returns `Ok`) or leadership is
    /// lost (then returns [`RunError::LostLease`]; exit and let the
    /// Deployment restart the process as a standby).
    ///
    /// On shutdown, reconciles in flight finish first; none takes longer
    /// than the [provisioner timeout](Self::provisioner_timeout) plus its
    /// Kubernetes writes.
    pub async fn run(
        self,
        client: Client,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), RunError> {
        let health = Arc::new(Health::default());
        let (stop_tx, stop_rx) = watch::channel(false);
        let mut shutdown = shutdown.boxed();

        let metrics = Arc::new(Metrics::new());
        if let Some(addr) = self.serve_on {
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|source| RunError::Serve { addr, source })?;
            tokio::spawn(crate::server::serve(
                listener,
                health.clone(),
                metrics.clone(),
            ));
        }

        let elector = self
            .leader_election
            .clone()
            .map(|cfg| Arc::new(Elector::new(client.clone(), cfg)));
        if let Some(elector) = &elector {
            // A standby is healthy and ready: it serves by waiting.
            health.ready.store(true, Ordering::Relaxed);
            tokio::select! {
                () = elector.acquire() => {}
                () = &mut shutdown => return Ok(()),
            }
        }

        let leadership = elector.as_ref().map(|e| e.leadership());
        let running = self.start(client, metrics, health.clone(), stop_rx, leadership);
        let lost: BoxFuture<'static, RunError> = match &elector {
            Some(e) => {
                let e = e.clone();
                async move { e.hold().await }.boxed()
            }
            None => futures::future::pending().boxed(),
        };
        tokio::pin!(running);
        let outcome = tokio::select! {
            () = &mut running => Ok(()),
            err = lost => Err(err),
            () = &mut shutdown => Ok(()),
        };
        let _ = stop_tx.send(true);
        if outcome.is_ok() {
            // Let in-flight reconciles finish before giving the lease up.
            running.await;
            if let Some(elector) = &elector {
                elector.release().await;
            }
        }
        outcome
    }

    fn start(
        self,
        client: Client,
        metrics: Arc<Metrics>,
        health: Arc<Health>,
        stop: watch::Receiver<bool>,
        leadership: Option<Arc<Leadership>>,
    ) -> impl Future<Output = ()> + Send + 'static {
        let label = names::provisioner_label_value(&self.provisioner_name);
        let selector = format!("{PROVISIONER_LABEL}={label}");
        let wc = watcher::Config::default().any_semantic();

        // Cluster-scoped caches, shared by every claim controller.
        // Subscriptions are taken before the writers move into their feeds.
        let scope_count = match &self.scope {
            WatchScope::All => 1,
            WatchScope::Namespaces(list) => list.len(),
        };
        let (classes, class_writer) = reflector::store_shared::<StorageClass>(256);
        let mut class_subscriptions: Vec<_> = (0..scope_count)
            .filter_map(|_| class_writer.subscribe())
            .collect();
        let class_feed = watcher(Api::<StorageClass>::all(client.clone()), wc.clone())
            .default_backoff()
            .modify(strip_managed_fields)
            .reflect_shared(class_writer);
        let (buckets, bucket_writer) = reflector::store_shared::<ObjectBucket>(1024);
        let mut bucket_subscriptions: Vec<_> = (0..=scope_count)
            .filter_map(|_| bucket_writer.subscribe())
            .collect();
        let bucket_feed = watcher(Api::<ObjectBucket>::all(client.clone()), wc.clone())
            .default_backoff()
            .modify(strip_managed_fields)
            .reflect_shared(bucket_writer);

        // Per-namespace (or all-namespace) caches of claims and children.
        let namespaces: Vec<Option<String>> = match &self.scope {
            WatchScope::All => vec![None],
            WatchScope::Namespaces(list) => list.iter().cloned().map(Some).collect(),
        };
        struct Scope {
            namespace: Option<String>,
            claims: Store<ObjectBucketClaim>,
            claim_feed: BoxStream<'static, Result<ObjectBucketClaim, watcher::Error>>,
            secret_feed: BoxStream<'static, Result<PartialObjectMeta<Secret>, watcher::Error>>,
            config_map_feed:
                BoxStream<'static, Result<PartialObjectMeta<ConfigMap>, watcher::Error>>,
        }
        let (claim_deletions_tx, claim_deletions) =
            tokio::sync::mpsc::unbounded_channel::<ObjectRef<ObjectBucket>>();
        let mut scopes = Vec::new();
        let mut secret_stores = Vec::new();
        let mut config_map_stores = Vec::new();
        let child_wc = wc.clone().labels(&selector);
        for namespace in namespaces {
            fn api<K>(client: &Client, ns: &Option<String>) -> Api<K>
            where
                K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
            {
                match ns {
                    Some(ns) => Api::namespaced(client.clone(), ns),
                    None => Api::all(client.clone()),
                }
            }
            let (claims, claim_writer) = reflector::store();
            // The ObjectBucket reconciler learns of deleted claims from this
            // same stream, after the claim cache has dropped them: a second
            // watch could report a deletion the cache has not seen yet.
            let deleted = claim_deletions_tx.clone();
            let claim_feed = reflector::reflector(
                claim_writer,
                watcher(api::<ObjectBucketClaim>(&client, &namespace), wc.clone())
                    .modify(strip_managed_fields),
            )
            .default_backoff()
            .inspect(move |event| {
                if let Ok(watcher::Event::Delete(claim)) = event
                    && let (Some(ns), Some(name)) =
                        (&claim.metadata.namespace, &claim.metadata.name)
                {
                    let _ = deleted.send(ObjectRef::new(&names::object_bucket_name(ns, name)));
                }
            })
            .touched_objects()
            .boxed();
            let (secrets, secret_writer) = reflector::store();
            let secret_feed = reflector::reflector(
                secret_writer,
                watcher(
                    api::<PartialObjectMeta<Secret>>(&client, &namespace),
                    child_wc.clone(),
                )
                .modify(strip_managed_fields),
            )
            .default_backoff()
            .touched_objects()
            .boxed();
            let (config_maps, config_map_writer) = reflector::store();
            let config_map_feed = reflector::reflector(
                config_map_writer,
                watcher(
                    api::<PartialObjectMeta<ConfigMap>>(&client, &namespace),
                    child_wc.clone(),
                )
                .modify(strip_managed_fields),
            )
            .default_backoff()
            .touched_objects()
            .boxed();
            secret_stores.push(secrets);
            config_map_stores.push(config_maps);
            scopes.push(Scope {
                namespace,
                claims,
                claim_feed,
                secret_feed,
                config_map_feed,
            });
        }
        let claim_stores: Vec<Store<ObjectBucketClaim>> =
            scopes.iter().map(|s| s.claims.clone()).collect();
        drop(claim_deletions_tx);
        metrics.watch_claims(claim_stores.clone());

        let reporter = Reporter {
            controller: label.clone(),
            instance: std::env::var("POD_NAME").ok(),
        };
        let (synced_tx, synced_rx) = watch::channel(false);
        let ctx = Arc::new(Context {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            provisioner: Arc::new(self.provisioner),
            provisioner_name: self.provisioner_name,
            label,
            classes: classes.clone(),
            buckets: buckets.clone(),
            claims: claim_stores.clone(),
            secrets: ChildStores(secret_stores),
            config_maps: ChildStores(config_map_stores),
            metrics,
            backoff: Backoffs::new(self.backoff.0, self.backoff.1),
            resync: self.resync,
            provisioner_timeout: self.provisioner_timeout,
            caches_synced: synced_rx,
            pruned_binds: Default::default(),
            leadership,
            superseded: Default::default(),
            superseded_buckets: Default::default(),
            in_flight: Default::default(),
        });

        let stopped = |mut rx: watch::Receiver<bool>| async move {
            let _ = rx.wait_for(|s| *s).await;
        };
        let controller_config =
            kube::runtime::controller::Config::default().concurrency(self.concurrency);
        let mut tasks: Vec<BoxFuture<'static, ()>> = Vec::new();
        for scope in scopes {
            let in_scope = {
                let ns = scope.namespace.clone();
                move |claim_ns: &str| ns.as_deref().is_none_or(|n| n == claim_ns)
            };
            let Some(bucket_events) = bucket_subscriptions.pop() else {
                error!("the ObjectBucket cache cannot be shared; this is a bug");
                continue;
            };
            let Some(class_events) = class_subscriptions.pop() else {
                error!("the StorageClass cache cannot be shared; this is a bug");
                continue;
            };
            let claims_for_class = scope.claims.clone();
            let ns_filter = in_scope.clone();
            let controller = Controller::for_stream(scope.claim_feed, scope.claims)
                .with_config(controller_config.clone())
                .owns_stream(scope.secret_feed)
                .owns_stream(scope.config_map_feed)
                .watches_shared_stream(bucket_events, move |ob: Arc<ObjectBucket>| {
                    ob.spec.claim_ref.as_ref().and_then(|r| {
                        let (ns, name) = (r.namespace.as_deref()?, r.name.as_deref()?);
                        ns_filter(ns).then(|| ObjectRef::new(name).within(ns))
                    })
                })
                .watches_shared_stream(class_events, move |class: Arc<StorageClass>| {
                    // A class appearing or changing can unblock waiting claims
                    // and blocked deletions (a fixed parameter); bound claims do
                    // not depend on it.
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
                })
                .graceful_shutdown_on(stopped(stop.clone()))
                .run(claim::reconcile, reconcile::error_policy, ctx.clone())
                .for_each(|result| async move {
                    if let Err(e) = result {
                        log_controller_error("claim", &e);
                    }
                });
            tasks.push(controller.boxed());
        }
        if let Some(bucket_events) = bucket_subscriptions.pop() {
            // A claim that disappears leaves its ObjectBucket unchanged; only
            // the claim's deletion can tell the ObjectBucket reconciler to look.
            let controller = Controller::for_shared_stream(bucket_events, buckets.clone())
                .with_config(controller_config)
                .reconcile_on(tokio_stream_of(claim_deletions));
            let controller = controller
                .graceful_shutdown_on(stopped(stop.clone()))
                .run(bucket::reconcile, reconcile::error_policy, ctx.clone())
                .for_each(|result| async move {
                    if let Err(e) = result {
                        log_controller_error("ObjectBucket", &e);
                    }
                });
            tasks.push(controller.boxed());
        }

        let feeds = futures::stream::select(
            class_feed.map(|r| r.map(|_| ())),
            bucket_feed.map(|r| r.map(|_| ())),
        )
        .for_each(|r| async move {
            if let Err(e) = r {
                warn!(error = %e, "watch failed; retrying with backoff");
            }
        });
        let ready = {
            let (classes, buckets) = (classes, buckets);
            async move {
                let _ = classes.wait_until_ready().await;
                let _ = buckets.wait_until_ready().await;
                for store in &claim_stores {
                    let _ = store.wait_until_ready().await;
                }
                info!("caches are synced; reconciling");
                let _ = synced_tx.send(true);
                health.ready.store(true, Ordering::Relaxed);
            }
        };
        let mut stop_feeds = stop;
        async move {
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
    }
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
