//! Leader election through a `coordination.k8s.io/v1` Lease.
//!
//! One replica holds the Lease and reconciles; the others wait. The holder
//! renews every `renew_every`; a candidate takes the Lease once its
//! `renewTime` is older than `lease_duration`. Every write is a replace
//! guarded by `resourceVersion`, so two candidates can never both win. A
//! holder that cannot renew before its own lease would expire stops acting
//! (the process exits), so the next leader never overlaps with it.
//!
//! A holder can also be paused (a stop-the-world pause, a VM stall, SIGSTOP)
//! past its lease while a standby takes over. When it wakes, its queued
//! reconciles would act before its renewal loop notices. So the time of the
//! last renewal is kept on the monotonic clock (`Leadership`), and every
//! step that writes or calls the provisioner checks it first.
//!
//! ```
//! use std::time::Duration;
//! use lib_provisioner::leader::LeaderElection;
//! let election = LeaderElection::new("obc-system", "sample-provisioner", "pod-a")
//!     .with_lease_duration(Duration::from_secs(15));
//! assert_eq!(election.renew_every, Duration::from_secs(5));
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Client;
use kube::api::{Api, PostParams};
use tokio::time::{Instant, sleep};
use tracing::{info, warn};

use crate::error::{Error, Result, RunError, is_status};

/// Where and as whom to take part in the election.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct LeaderElection {
    /// Namespace of the Lease.
    pub namespace: String,
    /// Name of the Lease.
    pub lease_name: String,
    /// This replica's identity (its pod name, say).
    pub identity: String,
    /// How long a Lease stays valid without renewal.
    pub lease_duration: Duration,
    /// How often the holder renews (and candidates retry).
    pub renew_every: Duration,
}

impl LeaderElection {
    /// An election with a 15 s lease renewed every 5 s.
    pub fn new(
        namespace: impl Into<String>,
        lease_name: impl Into<String>,
        identity: impl Into<String>,
    ) -> Self {
        Self {
            namespace: namespace.into(),
            lease_name: lease_name.into(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(15),
            renew_every: Duration::from_secs(5),
        }
    }

    /// Sets the lease duration, and renewal at a third of it.
    pub fn with_lease_duration(mut self, duration: Duration) -> Self {
        self.lease_duration = duration;
        self.renew_every = duration / 3;
        self
    }
}

/// Whether this replica may act: the start of its last successful lease
/// renewal is recent enough, on the monotonic clock (which keeps running
/// while the process is paused, unlike the process itself).
#[derive(Debug)]
pub(crate) struct Leadership {
    base: Instant,
    /// Milliseconds from `base` to the start of the last successful renewal.
    renewed_ms: AtomicU64,
    /// How long a renewal lets this replica act: less than the lease, so it
    /// stops before any standby may take over, with room for clock skew.
    valid_for: Duration,
}

impl Leadership {
    fn new(cfg: &LeaderElection) -> Self {
        Self {
            base: Instant::now(),
            renewed_ms: AtomicU64::new(0),
            valid_for: cfg.lease_duration.saturating_sub(cfg.renew_every / 2),
        }
    }

    fn renewed(&self, started: Instant) {
        let ms = u64::try_from(started.duration_since(self.base).as_millis()).unwrap_or(u64::MAX);
        self.renewed_ms.fetch_max(ms, Ordering::Relaxed);
    }

    fn age(&self) -> Duration {
        let renewed = self.base + Duration::from_millis(self.renewed_ms.load(Ordering::Relaxed));
        Instant::now().saturating_duration_since(renewed)
    }

    /// `Ok` while the last renewal is valid; [`Error::NotLeading`] once it
    /// ran out.
    pub(crate) fn check(&self) -> Result<()> {
        let age = self.age();
        if age >= self.valid_for {
            return Err(Error::NotLeading(age - self.valid_for));
        }
        Ok(())
    }
}

/// Outcome of one attempt to take or keep the Lease.
#[derive(Debug, PartialEq, Eq)]
enum Attempt {
    Held,
    HeldByOther(String),
}

pub(crate) struct Elector {
    api: Api<Lease>,
    cfg: LeaderElection,
    leadership: std::sync::Arc<Leadership>,
}

impl Elector {
    pub(crate) fn new(client: Client, cfg: LeaderElection) -> Self {
        Self {
            api: Api::namespaced(client, &cfg.namespace),
            leadership: std::sync::Arc::new(Leadership::new(&cfg)),
            cfg,
        }
    }

    /// The clock the reconcilers check before they act.
    pub(crate) fn leadership(&self) -> std::sync::Arc<Leadership> {
        self.leadership.clone()
    }

    /// Waits until this replica holds the Lease.
    pub(crate) async fn acquire(&self) {
        let mut announced = None;
        loop {
            match self.try_hold().await {
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
            if let Err(e) = self.leadership.check() {
                // Paused past the lease: another replica may lead now, and
                // renewing would not undo the overlap. Stop.
                return RunError::LostLease(format!("{} ({e})", self.cfg.lease_name));
            }
            match self.try_hold().await {
                Ok(Attempt::Held) => {}
                Ok(Attempt::HeldByOther(holder)) => {
                    return RunError::LostLease(format!(
                        "{} (now held by {holder})",
                        self.cfg.lease_name
                    ));
                }
                Err(e) => {
                    warn!(error = %e, "could not renew the leader lease");
                    // Stop before our lease can expire, so the next leader never
                    // overlaps with us.
                    if self.leadership.age() + self.cfg.renew_every >= self.cfg.lease_duration {
                        return RunError::LostLease(format!(
                            "{} (renewal failed: {e})",
                            self.cfg.lease_name
                        ));
                    }
                }
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
        let attempt = self.try_hold_once().await;
        if let Ok(Attempt::Held) = attempt {
            self.leadership.renewed(started);
        }
        attempt
    }

    async fn try_hold_once(&self) -> Result<Attempt> {
        let now = MicroTime(Timestamp::now());
        let duration_secs = i32::try_from(self.cfg.lease_duration.as_secs()).unwrap_or(i32::MAX);
        let Some(mut lease) = self
            .api
            .get_opt(&self.cfg.lease_name)
            .await
            .map_err(Error::kube("read the leader lease"))?
        else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.cfg.lease_name.clone()),
                    namespace: Some(self.cfg.namespace.clone()),
                    ..Default::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(self.cfg.identity.clone()),
                    lease_duration_seconds: Some(duration_secs),
                    acquire_time: Some(now.clone()),
                    renew_time: Some(now),
                    lease_transitions: Some(0),
                    ..Default::default()
                }),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(Attempt::Held),
                Err(e) if is_status(&e, 409) => Ok(Attempt::HeldByOther(
                    "a replica that just created it".into(),
                )),
                Err(e) => Err(Error::kube("create the leader lease")(e)),
            };
        };
        let spec = lease.spec.get_or_insert_with(Default::default);
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        let ours = holder.as_deref() == Some(self.cfg.identity.as_str());
        if !ours {
            if let Some(holder) = holder
                && !expired(spec, Timestamp::now())
            {
                return Ok(Attempt::HeldByOther(holder));
            }
            spec.acquire_time = Some(now.clone());
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
            spec.holder_identity = Some(self.cfg.identity.clone());
        }
        spec.renew_time = Some(now);
        spec.lease_duration_seconds = Some(duration_secs);
        match self
            .api
            .replace(&self.cfg.lease_name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => Ok(Attempt::Held),
            Err(e) if is_status(&e, 409) => Ok(Attempt::HeldByOther(
                "a replica that just renewed it".into(),
            )),
            Err(e) => Err(Error::kube("renew the leader lease")(e)),
        }
    }
}

/// Whether the holder's lease has run out at `now`.
fn expired(spec: &LeaseSpec, now: Timestamp) -> bool {
    let Some(renewed) = spec.renew_time.as_ref() else {
        return true;
    };
    let duration = i64::from(spec.lease_duration_seconds.unwrap_or(15));
    match renewed
        .0
        .checked_add(jiff::SignedDuration::from_secs(duration))
    {
        Ok(until) => until < now,
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn leadership_runs_out_before_the_lease() {
        let cfg =
            LeaderElection::new("ns", "lease", "me").with_lease_duration(Duration::from_secs(6));
        let leadership = Leadership::new(&cfg);
        leadership.renewed(Instant::now());
        assert!(leadership.check().is_ok());
        tokio::time::advance(Duration::from_millis(4900)).await;
        assert!(leadership.check().is_ok(), "valid for 6 s - 2 s / 2");
        tokio::time::advance(Duration::from_millis(200)).await;
        let err = leadership.check().expect_err("ran out");
        assert!(
            matches!(err, Error::NotLeading(d) if d == Duration::from_millis(100)),
            "{err}"
        );
        leadership.renewed(Instant::now());
        assert!(leadership.check().is_ok(), "a renewal restores it");
    }

    #[test]
    fn leases_expire_after_their_duration() {
        let now = Timestamp::now();
        let spec = |ago: i64| LeaseSpec {
            holder_identity: Some("a".into()),
            lease_duration_seconds: Some(15),
            renew_time: Some(MicroTime(now - jiff::SignedDuration::from_secs(ago))),
            ..Default::default()
        };
        assert!(!expired(&spec(5), now));
        assert!(expired(&spec(16), now));
        assert!(expired(&LeaseSpec::default(), now));
    }
}
