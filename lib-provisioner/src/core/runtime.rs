//! What the composition ([`crate::controller`]) hands each API family, and
//! what every family's reconcile context holds of it.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use kube::runtime::events::{Recorder, Reporter};
use tokio::sync::watch;

use crate::core::error::Error;
use crate::core::events::{EventLevel, Events};
use crate::core::leader::Leadership;
use crate::core::metrics::Metrics;
use crate::core::provisioner::ProvisionError;
use crate::core::server::Health;

/// The process-wide parts every family's controllers run on: one client
/// (writes gated by the lease), one metrics registry, one health, one
/// leader election, one stop signal, and the builder's settings.
#[derive(Clone)]
pub(crate) struct Shared {
    /// Writes go through the leader lease gate.
    pub client: Client,
    pub metrics: Arc<Metrics>,
    pub health: Arc<Health>,
    pub leadership: Option<Arc<Leadership>>,
    pub provisioner_timeout: Duration,
    /// Bounds of the per-object retry backoff.
    pub backoff: (Duration, Duration),
    /// Objects of one kind reconciled at once (0: unbounded).
    pub concurrency: u16,
    /// Becomes true when the process stops.
    pub stop: watch::Receiver<bool>,
    /// True while this replica leads (or runs without an election).
    pub leading: watch::Receiver<bool>,
    /// The store sweep's timing; `None`: no sweep. A family whose sweep
    /// source needs watches it would not otherwise poll polls them then.
    pub sweep: Option<crate::core::sweep::SweepSettings>,
    /// Which Events the reconcilers send.
    pub events: EventLevel,
}

impl Shared {
    /// The Events a family's controller `controller` sends, at the
    /// application's level; the instance is this Pod (`POD_NAME`).
    pub(crate) fn events(&self, controller: String) -> Events {
        let reporter = Reporter {
            controller,
            instance: std::env::var("POD_NAME").ok(),
        };
        Events::new(Recorder::new(self.client.clone(), reporter), self.events)
    }

    /// What a family's reconcile context keeps of this: `synced` becomes
    /// true once that family's caches have listed.
    pub(crate) fn runtime(&self, synced: watch::Receiver<bool>) -> Runtime {
        Runtime {
            leadership: self.leadership.clone(),
            provisioner_timeout: self.provisioner_timeout,
            metrics: self.metrics.clone(),
            synced,
        }
    }
}

/// How a reconcile acts, in either family: only while leading, provisioner
/// calls timed and bounded by the lease, and only once its caches listed.
pub(crate) struct Runtime {
    /// With leader election: whether this replica may act.
    pub leadership: Option<Arc<Leadership>>,
    /// How long one provisioner call may take.
    pub provisioner_timeout: Duration,
    pub metrics: Arc<Metrics>,
    /// Becomes true once the family's caches have listed.
    synced: watch::Receiver<bool>,
}

impl Runtime {
    /// Outside any controller (the audit): no lease, caches count as listed.
    pub(crate) fn standalone(provisioner_timeout: Duration, metrics: Arc<Metrics>) -> Self {
        Runtime {
            leadership: None,
            provisioner_timeout,
            metrics,
            synced: watch::channel(true).1,
        }
    }

    /// `Ok` unless leader election is on and this replica's lease ran out:
    /// checked before every write and provisioner call.
    pub(crate) fn ensure_leading(&self) -> Result<(), Error> {
        self.leadership.as_ref().map_or(Ok(()), |l| l.check())
    }

    /// Waits until the family's caches have listed once; returns at once
    /// afterwards. (A watch channel, because a store's own readiness
    /// future wakes only one of many concurrent waiters.)
    pub(crate) async fn caches_ready(&self) {
        let mut ready = self.synced.clone();
        let _ = ready.wait_for(|synced| *synced).await;
    }

    /// Runs a provisioner call as every call runs
    /// ([`timed`](crate::core::calls::timed): timeout, lease, metrics).
    pub(crate) async fn timed<T>(
        &self,
        operation: &'static str,
        call: impl Future<Output = Result<T, ProvisionError>>,
    ) -> Result<T, ProvisionError> {
        crate::core::calls::timed(
            self.leadership.as_deref(),
            self.provisioner_timeout,
            &self.metrics,
            operation,
            call,
        )
        .await
    }
}
