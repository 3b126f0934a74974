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
use kube::Client;
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::ObjectRef;
use tokio::sync::watch;
use tracing::error;

use crate::obc::api::ObjectBucket;
use crate::core::error::RunError;
use crate::core::leader::{Elector, LeaderElection, Leadership};
use crate::core::metrics::Metrics;
use crate::core::names;
use crate::core::provisioner::Provisioner;
use crate::obc::reconcile::{Backoffs, ChildStores, Context};
use crate::core::server::Health;

mod namespaces;
pub(crate) mod wiring;

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
    dead_watch_limit: Duration,
    name_records: Option<String>,
    cosi: Option<crate::cosi::CosiOptions>,
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
            dead_watch_limit: crate::core::server::WATCHES_DEAD_LIMIT,
            name_records: None,
            cosi: None,
        }
    }

    /// Also serves Kubernetes COSI (`objectstorage.k8s.io/v1alpha2`) from
    /// the same provisioner: Buckets and BucketAccesses of
    /// `options.driver_name()`, and (unless
    /// [`without_binding`](crate::cosi::CosiOptions::without_binding)) the
    /// binding of every BucketClaim and BucketAccess, as upstream's COSI
    /// controller does. Shares this builder's leader election, metrics,
    /// health, concurrency, backoff and provisioner timeout. Needs the COSI
    /// CRDs (`crds/cosi/`) and their RBAC; see [`crate::cosi`].
    ///
    /// ```
    /// # use lib_provisioner::{ControllerBuilder, Provisioner, cosi::CosiOptions};
    /// # fn configure<P: Provisioner>(p: P) -> Result<(), lib_provisioner::cosi::InvalidDriverName> {
    /// let builder = ControllerBuilder::new("example.com/bucket", p)
    ///     .cosi(CosiOptions::new("bucket.example.com")?);
    /// # Ok(()) }
    /// ```
    pub fn cosi(mut self, options: crate::cosi::CosiOptions) -> Self {
        self.cosi = Some(options);
        self
    }

    /// Holds every greenfield bucket name through a Lease in `namespace`
    /// (the provisioner's own; default: the leader election's namespace,
    /// if that is on) that the apiserver lets only one claim create, so
    /// that two claims asking for one name at once never both reach
    /// [`Provisioner::provision`]: the other is rejected with
    /// `BucketNameTaken`. Each Lease is released when its claim is deleted,
    /// or taken over once its claim is gone. Needs `create`, `get` and
    /// `delete` on `leases` in that namespace. Without it (and without
    /// leader election) names are checked against the caches only, and the
    /// provisioner's own ownership check is what stops a second claim.
    pub fn bucket_name_records(mut self, namespace: impl Into<String>) -> Self {
        self.name_records = Some(namespace.into());
        self
    }

    /// Serves only claims in these namespaces (an empty list means all).
    pub fn namespaces<S: Into<String>>(mut self, namespaces: impl IntoIterator<Item = S>) -> Self {
        let mut list: Vec<String> = namespaces.into_iter().map(Into::into).collect();
        // One set of watches per namespace, however often it is named.
        list.sort_unstable();
        list.dedup();
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

    /// How long every watch may fail without a break before `/healthz`
    /// answers 503 (default [`WATCHES_DEAD_LIMIT`](crate::core::server::WATCHES_DEAD_LIMIT),
    /// 2 minutes). Keep it above the longest apiserver outage a restart
    /// of this process would not help with.
    ///
    /// ```
    /// # use lib_provisioner::{ControllerBuilder, Provisioner};
    /// # fn configure<P: Provisioner>(p: P) {
    /// let builder = ControllerBuilder::new("example.com/bucket", p)
    ///     .dead_watch_limit(std::time::Duration::from_secs(300));
    /// # }
    /// ```
    pub fn dead_watch_limit(mut self, limit: Duration) -> Self {
        self.dead_watch_limit = limit;
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
        let health = Arc::new(Health::new(self.dead_watch_limit));
        let (stop_tx, stop_rx) = watch::channel(false);
        let mut shutdown = shutdown.boxed();

        let metrics = Arc::new(Metrics::new());
        if let Some(addr) = self.serve_on {
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|source| RunError::Serve { addr, source })?;
            tokio::spawn(crate::core::server::serve(
                listener,
                health.clone(),
                metrics.clone(),
            ));
        }

        let elector = self
            .leader_election
            .clone()
            .map(|cfg| Arc::new(Elector::new(client.clone(), cfg)));
        // A standby runs the watches and caches too, but passes no trigger
        // on to the reconcilers until it leads (then it reconciles every
        // cached object once): a hand-over does not relist.
        let (leading_tx, leading_rx) = watch::channel(elector.is_none());
        let leadership = elector.as_ref().map(|e| e.leadership());
        // The election keeps the plain client; everything that reconciles
        // writes through the lease gate.
        let running = self.start(
            crate::core::leader::gate::gated(client, leadership.clone()),
            metrics.clone(),
            health.clone(),
            stop_rx,
            leadership,
            leading_rx,
        );
        tokio::pin!(running);
        if let Some(elector) = &elector {
            // A standby is healthy and ready: it serves by waiting.
            health.ready.store(true, Ordering::Relaxed);
            tokio::select! {
                () = elector.acquire() => {}
                () = &mut running => return Ok(()),
                () = &mut shutdown => {
                    let _ = stop_tx.send(true);
                    running.await;
                    return Ok(());
                }
            }
        }
        let _ = leading_tx.send(true);
        metrics.leading(true);

        let lost: BoxFuture<'static, RunError> = match &elector {
            Some(e) => {
                let e = e.clone();
                async move { e.hold().await }.boxed()
            }
            None => futures::future::pending().boxed(),
        };
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
        metrics.leading(false);
        outcome
    }

    /// Builds the caches, the context and every task (claim controllers, the
    /// ObjectBucket reconciler, the reconnect retrier, readiness) and joins
    /// them. Longer than the other functions on purpose: it is the one
    /// place the pieces of `controller/wiring.rs` are put together, in the
    /// order their subscriptions and channels must be taken, and reads top
    /// to bottom as that order.
    fn start(
        mut self,
        client: Client,
        metrics: Arc<Metrics>,
        health: Arc<Health>,
        stop: watch::Receiver<bool>,
        leadership: Option<Arc<Leadership>>,
        leading: watch::Receiver<bool>,
    ) -> impl Future<Output = ()> + Send + 'static {
        let label = names::provisioner_label_value(&self.provisioner_name);
        let namespaces: Vec<Option<String>> = match &self.scope {
            WatchScope::All => vec![None],
            WatchScope::Namespaces(list) => list.iter().cloned().map(Some).collect(),
        };
        let mut shared = wiring::SharedCaches::new(&client, &health);
        let (claim_deletions_tx, claim_deletions) =
            tokio::sync::mpsc::unbounded_channel::<ObjectRef<ObjectBucket>>();
        let scope = wiring::Scope::new(&client, &namespaces, &label, claim_deletions_tx, &health);
        let claims = scope.claims.clone();
        metrics.watch_claims(claims.clone());

        let (synced_tx, synced_rx) = watch::channel(false);
        let config = kube::runtime::controller::Config::default().concurrency(self.concurrency);
        let cosi = self.cosi.take().map(|options| {
            let shared = crate::cosi::wiring::Shared {
                client: client.clone(),
                metrics: metrics.clone(),
                health: health.clone(),
                leadership: leadership.clone(),
                provisioner_timeout: self.provisioner_timeout,
                backoff: self.backoff,
                concurrency: self.concurrency,
                stop: stop.clone(),
                leading: leading.clone(),
            };
            (options, shared)
        });
        let ctx = self.context(
            client, label, &shared, &scope, metrics, synced_rx, leadership,
        );
        let mut tasks: Vec<BoxFuture<'static, ()>> = Vec::new();
        if let Some((options, s)) = cosi {
            // The same provisioner (one Arc) serves both APIs.
            tasks.push(crate::cosi::wiring::start(
                options,
                s,
                ctx.provisioner.clone(),
            ));
        }
        let (retry, retried) = tokio::sync::mpsc::unbounded_channel();
        match shared.claim_triggers.take() {
            Some((buckets, classes)) => tasks.push(wiring::claim_controller(
                scope,
                (buckets, classes, retried),
                ctx.clone(),
                config.clone(),
                stop.clone(),
                leading.clone(),
            )),
            None => error!("the shared caches cannot be subscribed to; this is a bug"),
        }
        tasks.push(wiring::retry_after_reconnect(
            health.clone(),
            ctx.clone(),
            claims.clone(),
            retry,
            stop.clone(),
        ));
        if let Some(bucket_events) = shared.bucket_triggers.take() {
            tasks.push(wiring::bucket_controller(
                bucket_events,
                shared.buckets.clone(),
                claim_deletions,
                ctx.clone(),
                config,
                stop.clone(),
                leading,
            ));
        }
        let ready = wiring::signal_ready(
            shared.classes.clone(),
            shared.buckets.clone(),
            claims,
            synced_tx,
            health,
        );
        let feeds = shared.feeds;
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

    /// What every reconcile reads: the client, the provisioner, the caches,
    /// the settings.
    #[allow(clippy::too_many_arguments)]
    fn context(
        self,
        client: Client,
        label: String,
        shared: &wiring::SharedCaches,
        scope: &wiring::Scope,
        metrics: Arc<Metrics>,
        caches_synced: watch::Receiver<bool>,
        leadership: Option<Arc<Leadership>>,
    ) -> Arc<Context<P>> {
        let namespaces = match &self.scope {
            WatchScope::All => None,
            WatchScope::Namespaces(list) => Some(list.iter().cloned().collect()),
        };
        let reporter = Reporter {
            controller: label.clone(),
            instance: std::env::var("POD_NAME").ok(),
        };
        Arc::new(Context {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            provisioner: Arc::new(self.provisioner),
            provisioner_name: self.provisioner_name,
            label,
            classes: shared.classes.clone(),
            buckets: shared.buckets.clone(),
            claims: scope.claims.clone(),
            secrets: ChildStores(scope.secrets.clone()),
            config_maps: ChildStores(scope.config_maps.clone()),
            metrics,
            backoff: Backoffs::new(self.backoff.0, self.backoff.1),
            resync: self.resync,
            provisioner_timeout: self.provisioner_timeout,
            caches_synced,
            pruned_binds: Default::default(),
            leadership,
            superseded: Default::default(),
            superseded_buckets: Default::default(),
            in_flight: Default::default(),
            verified: Default::default(),
            api_errors: Default::default(),
            namespaces,
            name_records: self.name_records.or_else(|| {
                self.leader_election
                    .as_ref()
                    .map(|election| election.namespace.clone())
            }),
        })
    }
}
