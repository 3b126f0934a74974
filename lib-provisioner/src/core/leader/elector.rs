//! The elector: waits to acquire the Lease, renews it under a deadline,
//! and releases it on shutdown.

use std::sync::{Arc, Mutex};

use k8s_openapi::api::coordination::v1::Lease;
use kube::Client;
use kube::api::{Api, PostParams};
use tokio::time::{Instant, sleep};
use tracing::{info, warn};

use crate::core::error::{Result, RunError};
use crate::core::leader::LeaderElection;
use crate::core::leader::attempt::{Attempt, try_hold_once};
use crate::core::leader::leadership::Leadership;
use crate::core::leader::observer::Observer;

/// This replica's part in the election: its Lease client, its config, the
/// [`Leadership`] its renewals keep, and what it last saw of the Lease.
pub(crate) struct Elector {
    api: Api<Lease>,
    cfg: LeaderElection,
    leadership: Arc<Leadership>,
    observer: Mutex<Observer>,
}

impl Elector {
    /// An elector that has not led yet; `client` must be ungated (its
    /// renewals are what keep the gate open).
    pub(crate) fn new(client: Client, cfg: LeaderElection) -> Self {
        Self {
            api: Api::namespaced(client, &cfg.namespace),
            leadership: Arc::new(Leadership::new(&cfg)),
            observer: Mutex::default(),
            cfg,
        }
    }

    /// The clock the reconcilers check before they act.
    pub(crate) fn leadership(&self) -> Arc<Leadership> {
        self.leadership.clone()
    }

    /// Waits until this replica holds the Lease.
    pub(crate) async fn acquire(&self) {
        let mut announced = None;
        loop {
            // Bounded like a renewal: a hung connection must not stall the
            // candidate (a later attempt may get a fresh one).
            let attempt = tokio::time::timeout(self.cfg.renew_every, self.try_hold()).await;
            let Ok(attempt) = attempt else {
                warn!("a leader election attempt did not answer within a renewal period; retrying");
                sleep(self.cfg.renew_every).await;
                continue;
            };
            match attempt {
                Ok(Attempt::Held) => {
                    info!(lease = %self.cfg.lease_name, identity = %self.cfg.identity, "became leader");
                    return;
                }
                Ok(Attempt::HeldByOther(holder)) => {
                    if announced.as_ref() != Some(&holder) {
                        info!(lease = %self.cfg.lease_name, %holder, "standing by: another replica leads");
                        announced = Some(holder);
                    }
                }
                Err(e) => warn!(error = %e, "leader election attempt failed; retrying"),
            }
            sleep(self.cfg.renew_every).await;
        }
    }

    /// Renews the Lease until it is lost; returns the reason.
    pub(crate) async fn hold(&self) -> RunError {
        loop {
            sleep(self.cfg.renew_every).await;
            if let Err(lost) = self.renew_within_lease().await {
                return lost;
            }
        }
    }

    /// One renewal, retried until it succeeds or this replica's lease runs
    /// out: client-go's RenewDeadline. The client has no read timeout, so
    /// an apiserver connection that hangs would otherwise hold a renewal
    /// (and this replica's belief that it leads) forever. Each attempt is
    /// cut off after a renewal period, so a retry can use a fresh
    /// connection.
    async fn renew_within_lease(&self) -> std::result::Result<(), RunError> {
        let lost = |why: String| RunError::LostLease(format!("{} ({why})", self.cfg.lease_name));
        loop {
            let Some(left) = self.leadership.remaining() else {
                // Paused past the lease, or no renewal answered in time:
                // another replica may lead now. Stop.
                let e = self.leadership.check().err();
                return Err(lost(e.map_or_else(
                    || "no renewal succeeded before it ran out".to_owned(),
                    |e| e.to_string(),
                )));
            };
            let attempt = self.cfg.renew_every.min(left);
            match tokio::time::timeout(attempt, self.try_hold()).await {
                Ok(Ok(Attempt::Held)) => return Ok(()),
                Ok(Ok(Attempt::HeldByOther(holder))) => {
                    return Err(lost(format!("now held by {holder}")));
                }
                Ok(Err(e)) => warn!(error = %e, "could not renew the leader lease; retrying"),
                Err(_) => warn!(
                    ?attempt,
                    "the leader lease renewal did not answer in time; retrying"
                ),
            }
            if let Some(left) = self.leadership.remaining() {
                sleep((self.cfg.renew_every / 4).min(left)).await;
            }
        }
    }

    /// Gives the Lease up on shutdown so a standby takes over at once.
    pub(crate) async fn release(&self) {
        if let Ok(Some(mut lease)) = self.api.get_opt(&self.cfg.lease_name).await {
            let spec = lease.spec.get_or_insert_with(Default::default);
            if spec.holder_identity.as_deref() == Some(&self.cfg.identity) {
                spec.holder_identity = None;
                spec.renew_time = None;
                if let Err(e) = self
                    .api
                    .replace(&self.cfg.lease_name, &PostParams::default(), &lease)
                    .await
                {
                    warn!(error = %e, "could not release the leader lease");
                }
            }
        }
    }

    /// One attempt; a success is recorded in [`Leadership`] as of the
    /// attempt's start (the renewTime it writes is no older).
    async fn try_hold(&self) -> Result<Attempt> {
        let started = Instant::now();
        let attempt = try_hold_once(&self.api, &self.cfg, &self.observer).await;
        if let Ok(Attempt::Held) = attempt {
            self.leadership.renewed(started);
        }
        attempt
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// An apiserver connection that accepts the request and never answers.
    #[derive(Clone)]
    struct NeverAnswers;

    impl tower_service::Service<http::Request<kube::client::Body>> for NeverAnswers {
        type Response = http::Response<kube::client::Body>;
        type Error = kube::Error;
        type Future =
            futures::future::BoxFuture<'static, std::result::Result<Self::Response, kube::Error>>;

        fn poll_ready(
            &mut self,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::result::Result<(), kube::Error>> {
            std::task::Poll::Ready(Ok(()))
        }

        fn call(&mut self, _: http::Request<kube::client::Body>) -> Self::Future {
            Box::pin(futures::future::pending())
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_renewal_that_never_answers_ends_leadership_when_the_lease_runs_out() {
        let cfg =
            LeaderElection::new("ns", "lease", "me").with_lease_duration(Duration::from_secs(6));
        let elector = Elector::new(Client::new(NeverAnswers, "default"), cfg);
        let start = Instant::now();
        elector.leadership.renewed(start);
        let lost = tokio::time::timeout(Duration::from_secs(60), elector.hold())
            .await
            .expect("a hung renewal must not hold leadership past the lease");
        assert!(matches!(lost, RunError::LostLease(_)), "{lost}");
        let took = start.elapsed();
        assert!(
            took >= Duration::from_secs(5) && took <= Duration::from_millis(5100),
            "stopped {took:?} after the last renewal; valid for 6 s - 2 s / 2"
        );
        assert!(elector.leadership.check().is_err());
    }
}
