//! The composition: a builder that starts each API family's controllers
//! ([`crate::obc`], and [`crate::cosi`] when asked) under one leader
//! election, one health and metrics server and one stop signal, and shuts
//! them down. The families own their watches, caches and reconcilers.
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
use tokio::sync::watch;

pub use crate::core::calls::DEFAULT_PROVISIONER_TIMEOUT;
pub use crate::core::events::EventLevel;
pub use crate::obc::wiring::WatchScope;

use crate::core::error::RunError;
use crate::core::leader::{Elector, LeaderElection, Leadership};
use crate::core::metrics::Metrics;
use crate::core::provisioner::Provisioner;
use crate::core::runtime::Shared;
use crate::core::server::Health;
use crate::core::sweep::{Audit, AuditError, SweepSettings, SweepSource};
pub use crate::core::sweep::{DEFAULT_ORPHAN_GRACE, DEFAULT_SWEEP_INTERVAL};

/// How often a Bound claim's bucket is checked against its applied config
/// unless [`ControllerBuilder::config_check_interval`] says otherwise.
pub const DEFAULT_CONFIG_CHECK_INTERVAL: Duration = Duration::from_secs(3600);

/// Configures and starts a provisioner controller.
pub struct ControllerBuilder<P> {
    provisioner_name: String,
    provisioner: P,
    scope: WatchScope,
    concurrency: u16,
    leader_election: Option<LeaderElection>,
    serve_on: Option<SocketAddr>,
    resync: Duration,
    config_check_interval: Duration,
    backoff: (Duration, Duration),
    provisioner_timeout: Duration,
    dead_watch_limit: Duration,
    name_records: Option<String>,
    cosi: Option<crate::cosi::CosiOptions>,
    sweep: Option<SweepSettings>,
    events: EventLevel,
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
            config_check_interval: DEFAULT_CONFIG_CHECK_INTERVAL,
            backoff: (Duration::from_millis(500), Duration::from_secs(300)),
            provisioner_timeout: DEFAULT_PROVISIONER_TIMEOUT,
            dead_watch_limit: crate::core::server::WATCHES_DEAD_LIMIT,
            name_records: None,
            cosi: None,
            sweep: Some(SweepSettings {
                interval: DEFAULT_SWEEP_INTERVAL,
                grace: DEFAULT_ORPHAN_GRACE,
            }),
            events: EventLevel::All,
        }
    }

    /// How often the store sweep lists what the provisioner made in each
    /// class's store and matches it against the live owners by UID
    /// (default [`DEFAULT_SWEEP_INTERVAL`], 5 minutes; see
    /// [`crate::core::sweep`]). Turns the sweep back on after
    /// [`without_sweep`](Self::without_sweep).
    pub fn sweep_interval(mut self, every: Duration) -> Self {
        let grace = self.sweep.map_or(DEFAULT_ORPHAN_GRACE, |s| s.grace);
        self.sweep = Some(SweepSettings {
            interval: every,
            grace,
        });
        self
    }

    /// How long a store principal (user, key, policy) may be without a
    /// live owner before the sweep removes it (default
    /// [`DEFAULT_ORPHAN_GRACE`], 10 minutes); it must also be seen
    /// orphaned in two sweeps. Turns the sweep back on after
    /// [`without_sweep`](Self::without_sweep).
    pub fn orphan_grace(mut self, grace: Duration) -> Self {
        let interval = self.sweep.map_or(DEFAULT_SWEEP_INTERVAL, |s| s.interval);
        self.sweep = Some(SweepSettings { interval, grace });
        self
    }

    /// No store sweep: a principal whose owner vanished without the
    /// controller seeing it go (a stripped finalizer) stays in the store.
    ///
    /// ```
    /// # use lib_provisioner::{ControllerBuilder, Provisioner};
    /// # fn configure<P: Provisioner>(p: P) {
    /// let builder = ControllerBuilder::new("example.com/bucket", p).without_sweep();
    /// # }
    /// ```
    pub fn without_sweep(mut self) -> Self {
        self.sweep = None;
        self
    }

    /// What the store sweep would do now, read from the API (classes and
    /// live owners listed, each class's store through
    /// [`Provisioner::inventory`]), removing nothing: for an operator's
    /// audit. Needs only the list permissions the controller has.
    pub async fn audit(&self, client: Client) -> Result<Audit, AuditError> {
        let mut sources: Vec<Arc<dyn SweepSource>> = vec![Arc::new(crate::obc::sweep::ApiSource {
            client: client.clone(),
            provisioner_name: self.provisioner_name.clone(),
            namespaces: self.scope.namespaces(),
        })];
        if let Some(options) = &self.cosi {
            sources.push(Arc::new(crate::cosi::sweep::ApiSource {
                client,
                driver: options.driver_name().to_owned(),
            }));
        }
        let grace = self.sweep.map_or(DEFAULT_ORPHAN_GRACE, |s| s.grace);
        crate::core::sweep::audit::audit(
            &self.provisioner,
            &sources,
            self.provisioner_timeout,
            grace,
        )
        .await
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

    /// Which Events the controllers send (default [`EventLevel::All`]).
    /// With [`EventLevel::WarningsOnly`] the Normal ones (`Bound`,
    /// `BucketDeleted`, ...) are left out, one apiserver write each: a
    /// large cluster's choice, when the claims' status is what its users
    /// read.
    ///
    /// ```
    /// # use lib_provisioner::{ControllerBuilder, EventLevel, Provisioner};
    /// # fn configure<P: Provisioner>(p: P) {
    /// let builder = ControllerBuilder::new("example.com/bucket", p)
    ///     .events(EventLevel::WarningsOnly);
    /// # }
    /// ```
    pub fn events(mut self, level: EventLevel) -> Self {
        self.events = level;
        self
    }

    /// Serves `/metrics`, `/healthz` and `/readyz` on this address.
    pub fn serve_on(mut self, addr: SocketAddr) -> Self {
        self.serve_on = Some(addr);
        self
    }

    /// How often a bound claim is checked again without any change
    /// (default 10 minutes). The checks are spread over the period, a few
    /// claims every 100 ms, so a claim is looked at again between one and
    /// two periods after its last pass; zero: only on changes.
    pub fn resync(mut self, every: Duration) -> Self {
        self.resync = every;
        self
    }

    /// How often a Bound claim's bucket is compared with its applied config
    /// ([`Provisioner::check_config`]), to put back what was changed on the
    /// store behind the claim's back (default
    /// [`DEFAULT_CONFIG_CHECK_INTERVAL`]; zero: never). Checks ride on the
    /// resync passes, so an interval shorter than
    /// [`resync`](Self::resync) acts as the resync's. Each check costs the
    /// provisioner's reads of the store: at 100,000 claims, an hour's
    /// interval is about 28 checks a second.
    pub fn config_check_interval(mut self, every: Duration) -> Self {
        self.config_check_interval = every;
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

    /// Starts each family's controllers on the shared parts and joins
    /// them: OBC always, COSI when [`cosi`](Self::cosi) asked for it. The
    /// same provisioner (one `Arc`) serves both.
    fn start(
        self,
        client: Client,
        metrics: Arc<Metrics>,
        health: Arc<Health>,
        stop: watch::Receiver<bool>,
        leadership: Option<Arc<Leadership>>,
        leading: watch::Receiver<bool>,
    ) -> impl Future<Output = ()> + Send + 'static {
        let shared = Shared {
            client,
            metrics,
            health,
            leadership,
            provisioner_timeout: self.provisioner_timeout,
            backoff: self.backoff,
            concurrency: self.concurrency,
            stop,
            leading,
            sweep: self.sweep,
            events: self.events,
        };
        let provisioner = Arc::new(self.provisioner);
        let settings = crate::obc::wiring::Settings {
            provisioner_name: self.provisioner_name,
            scope: self.scope,
            resync: self.resync,
            config_check_interval: self.config_check_interval,
            name_records: self.name_records.or_else(|| {
                self.leader_election
                    .as_ref()
                    .map(|election| election.namespace.clone())
            }),
        };
        let mut families: Vec<BoxFuture<'static, ()>> = Vec::new();
        let mut sources: Vec<Arc<dyn SweepSource>> = Vec::new();
        if let Some(options) = self.cosi {
            let (run, source) =
                crate::cosi::wiring::start(options, shared.clone(), provisioner.clone());
            families.push(run);
            sources.push(source);
        }
        let (run, source) =
            crate::obc::wiring::start(settings, shared.clone(), provisioner.clone());
        families.push(run);
        sources.push(source);
        if let Some(sweep) = self.sweep {
            // One sweep over both families' sources: a family that cannot
            // see stops the round.
            families.push(
                crate::core::sweep::run::run(
                    sweep,
                    shared.runtime(watch::channel(true).1),
                    provisioner,
                    sources,
                    shared.stop.clone(),
                    shared.leading.clone(),
                )
                .boxed(),
            );
        }
        futures::future::join_all(families).map(|_| ())
    }
}
