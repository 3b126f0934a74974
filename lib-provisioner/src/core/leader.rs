//! Leader election through a `coordination.k8s.io/v1` Lease.
//!
//! One replica holds the Lease and reconciles; the others wait, with their
//! caches filled. The holder renews every `renew_every`. A candidate never
//! compares the holder's `renewTime` with its own wall clock (the two hosts'
//! clocks may disagree by more than a lease): like client-go, it takes the
//! Lease only after it has seen the Lease unchanged (holder, `renewTime`,
//! `resourceVersion`) for a full `lease_duration` on its own monotonic
//! clock. Every write is a replace guarded by `resourceVersion`, so two
//! candidates can never both win. A holder that cannot renew before its own
//! lease would expire stops acting (the process exits), so the next leader
//! never overlaps with it.
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
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Client;
use kube::api::{Api, PostParams};
use tokio::time::{Instant, sleep};
use tracing::{info, warn};

use crate::core::error::{Error, Result, RunError, is_status};
use crate::core::provisioner::ProvisionError;

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
    /// Added to the wall clock this replica writes into the Lease (tests
    /// only: a host whose clock is off).
    wall_clock_skew: SignedDuration,
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
            wall_clock_skew: SignedDuration::ZERO,
        }
    }

    /// Sets the lease duration, and renewal at a third of it.
    pub fn with_lease_duration(mut self, duration: Duration) -> Self {
        self.lease_duration = duration;
        self.renew_every = duration / 3;
        self
    }

    /// Makes this replica's wall clock read `skew` off (tests only: the
    /// election must not depend on clocks agreeing).
    #[doc(hidden)]
    pub fn with_wall_clock_skew(mut self, skew: SignedDuration) -> Self {
        self.wall_clock_skew = skew;
        self
    }

    fn wall_clock(&self) -> Timestamp {
        let now = Timestamp::now();
        now.checked_add(self.wall_clock_skew).unwrap_or(now)
    }
}

/// Whether this replica may act: the start of its last successful lease
/// renewal is recent enough, on the monotonic clock (which keeps running
/// while the process is paused, unlike the process itself).
///
/// Before the first acquisition it never is: a standby runs its watches and
/// caches, but nothing that writes.
#[derive(Debug)]
pub(crate) struct Leadership {
    base: Instant,
    /// One more than the milliseconds from `base` to the start of the last
    /// successful renewal; 0 before the first.
    renewed_ms: AtomicU64,
    /// How long a renewal lets this replica act: less than the lease, so it
    /// stops before any standby may take over (a standby counts the lease
    /// from when it saw the renewal, which is no earlier than its start),
    /// with room for the two monotonic clocks' rates to differ.
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
        let ms = u64::try_from(started.duration_since(self.base).as_millis())
            .unwrap_or(u64::MAX - 1)
            .saturating_add(1);
        self.renewed_ms.fetch_max(ms, Ordering::Relaxed);
    }

    /// Time since the start of the last successful renewal; `None` before
    /// the first.
    fn age(&self) -> Option<Duration> {
        let ms = self.renewed_ms.load(Ordering::Relaxed).checked_sub(1)?;
        let renewed = self.base + Duration::from_millis(ms);
        Some(Instant::now().saturating_duration_since(renewed))
    }

    /// How much longer the last renewal lets this replica act; `None` once
    /// it ran out, or before this replica ever led.
    pub(crate) fn remaining(&self) -> Option<Duration> {
        let age = self.age()?;
        self.valid_for
            .checked_sub(age)
            .filter(|left| !left.is_zero())
    }

    /// `Ok` while the last renewal is valid; [`Error::NotLeading`] once it
    /// ran out, or before this replica ever led.
    pub(crate) fn check(&self) -> Result<()> {
        let age = self.age().unwrap_or(Duration::MAX);
        if age >= self.valid_for {
            return Err(Error::NotLeading(age.saturating_sub(self.valid_for)));
        }
        Ok(())
    }
}

/// How long a provisioner call may run: the provisioner timeout, or less,
/// what is left of this replica's lease. A call must not outlive the lease:
/// a standby may take over once it ran out, and the two would then act on
/// the same claims.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CallLimit {
    /// The provisioner timeout.
    Timeout(Duration),
    /// The time left of the lease (shorter than the provisioner timeout).
    Lease(Duration),
}

impl CallLimit {
    /// The limit of a call of `operation` starting now; an error when the
    /// lease ran out already (the call must not even start).
    pub(crate) fn of(
        leadership: Option<&Leadership>,
        timeout: Duration,
        operation: &str,
    ) -> std::result::Result<Self, ProvisionError> {
        let Some(leadership) = leadership else {
            return Ok(Self::Timeout(timeout));
        };
        match leadership.remaining() {
            None => Err(lease_ran_out(operation)),
            Some(left) if left < timeout => Ok(Self::Lease(left)),
            Some(_) => Ok(Self::Timeout(timeout)),
        }
    }

    /// The duration of the limit.
    pub(crate) fn duration(self) -> Duration {
        match self {
            Self::Timeout(d) | Self::Lease(d) => d,
        }
    }

    /// The error a call cut off by this limit becomes.
    pub(crate) fn exceeded(self, operation: &str) -> ProvisionError {
        match self {
            Self::Timeout(d) => crate::core::calls::timed_out(operation, d),
            Self::Lease(_) => lease_ran_out(operation),
        }
    }
}

fn lease_ran_out(operation: &str) -> ProvisionError {
    ProvisionError::retryable(format!(
        "{operation} was abandoned: this replica's leader lease ran out, and another replica may lead now; the leader retries it"
    ))
}

/// Outcome of one attempt to take or keep the Lease.
#[derive(Debug, PartialEq, Eq)]
enum Attempt {
    Held,
    HeldByOther(String),
}

/// What identifies one write of the Lease: any renewal changes it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Record {
    holder: Option<String>,
    renew_time: Option<Timestamp>,
    resource_version: Option<String>,
}

impl Record {
    fn of(lease: &Lease) -> Self {
        let spec = lease.spec.as_ref();
        Self {
            holder: spec.and_then(|s| s.holder_identity.clone()),
            renew_time: spec.and_then(|s| s.renew_time.as_ref()).map(|t| t.0),
            resource_version: lease.metadata.resource_version.clone(),
        }
    }
}

/// The last Lease record seen, and when (on the local monotonic clock) it
/// was first seen: the only time a candidate goes by.
#[derive(Debug, Default)]
struct Observer {
    last: Option<(Record, Instant)>,
}

impl Observer {
    /// Records `record` as seen at `now`; returns since when it is unchanged.
    fn observe(&mut self, record: Record, now: Instant) -> Instant {
        match &self.last {
            Some((seen, since)) if *seen == record => *since,
            _ => {
                self.last = Some((record, now));
                now
            }
        }
    }
}

pub(crate) struct Elector {
    api: Api<Lease>,
    cfg: LeaderElection,
    leadership: Arc<Leadership>,
    observer: Mutex<Observer>,
}

impl Elector {
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
        let attempt = self.try_hold_once().await;
        if let Ok(Attempt::Held) = attempt {
            self.leadership.renewed(started);
        }
        attempt
    }

    async fn try_hold_once(&self) -> Result<Attempt> {
        let now = MicroTime(self.cfg.wall_clock());
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
        let unchanged_since = self
            .observer
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .observe(Record::of(&lease), Instant::now());
        let spec = lease.spec.get_or_insert_with(Default::default);
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        let ours = holder.as_deref() == Some(self.cfg.identity.as_str());
        if !ours {
            if let Some(holder) = holder
                && !ran_out(
                    spec,
                    self.cfg.lease_duration,
                    unchanged_since,
                    Instant::now(),
                )
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

/// Whether the holder's lease has run out at `now`: this replica has seen
/// the Lease unchanged since `unchanged_since` for a whole lease (the longer
/// of the holder's and `ours`), on its own monotonic clock. The holder's
/// `renewTime` is its wall clock, never compared with ours.
fn ran_out(spec: &LeaseSpec, ours: Duration, unchanged_since: Instant, now: Instant) -> bool {
    let theirs = spec
        .lease_duration_seconds
        .and_then(|s| u64::try_from(s).ok())
        .map_or(Duration::ZERO, Duration::from_secs);
    now.saturating_duration_since(unchanged_since) >= theirs.max(ours)
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

    fn record(holder: &str, rv: &str) -> Record {
        Record {
            holder: Some(holder.into()),
            renew_time: Some(Timestamp::UNIX_EPOCH),
            resource_version: Some(rv.into()),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_lease_runs_out_only_after_it_was_seen_unchanged_for_its_duration() {
        let mut observer = Observer::default();
        let t0 = Instant::now();
        // The holder's renewTime is an hour old by our clock: irrelevant.
        assert_eq!(observer.observe(record("a", "1"), t0), t0);
        tokio::time::advance(Duration::from_secs(4)).await;
        assert_eq!(observer.observe(record("a", "1"), Instant::now()), t0);
        tokio::time::advance(Duration::from_secs(1)).await;
        let renewed = Instant::now();
        assert_eq!(
            observer.observe(record("a", "2"), renewed),
            renewed,
            "a renewal restarts it"
        );
        assert_eq!(observer.observe(record("b", "2"), renewed), renewed);

        let spec = LeaseSpec {
            lease_duration_seconds: Some(15),
            ..Default::default()
        };
        let six = Duration::from_secs(6);
        let at = |secs| renewed + Duration::from_secs(secs);
        assert!(
            !ran_out(&spec, six, renewed, at(14)),
            "the holder's 15 s count"
        );
        assert!(ran_out(&spec, six, renewed, at(15)));
        assert!(!ran_out(&LeaseSpec::default(), six, renewed, at(5)));
        assert!(ran_out(&LeaseSpec::default(), six, renewed, at(6)));
    }

    #[tokio::test(start_paused = true)]
    async fn a_provisioner_call_is_cut_to_what_is_left_of_the_lease() {
        let cfg =
            LeaderElection::new("ns", "lease", "me").with_lease_duration(Duration::from_secs(6));
        let leadership = Leadership::new(&cfg);
        let sixty = Duration::from_secs(60);
        assert!(
            CallLimit::of(Some(&leadership), sixty, "provision").is_err(),
            "never led: no call"
        );
        leadership.renewed(Instant::now());
        let limit = CallLimit::of(Some(&leadership), sixty, "provision").expect("leading");
        assert_eq!(limit, CallLimit::Lease(Duration::from_secs(5)));
        assert!(limit.exceeded("provision").is_retryable());
        let short = CallLimit::of(Some(&leadership), Duration::from_secs(2), "grant");
        assert_eq!(short.ok(), Some(CallLimit::Timeout(Duration::from_secs(2))));
        tokio::time::advance(Duration::from_secs(4)).await;
        let limit = CallLimit::of(Some(&leadership), sixty, "provision").expect("leading");
        assert_eq!(limit.duration(), Duration::from_secs(1));
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(
            CallLimit::of(Some(&leadership), sixty, "provision").is_err(),
            "ran out: the call does not start"
        );
        assert_eq!(
            CallLimit::of(None, sixty, "provision").ok(),
            Some(CallLimit::Timeout(sixty)),
            "without leader election only the timeout bounds it"
        );
    }

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

    #[tokio::test(start_paused = true)]
    async fn leadership_starts_out_not_leading() {
        let cfg = LeaderElection::new("ns", "lease", "me");
        let leadership = Leadership::new(&cfg);
        assert!(matches!(leadership.check(), Err(Error::NotLeading(_))));
        leadership.renewed(Instant::now());
        assert!(leadership.check().is_ok());
    }

    #[test]
    fn a_skewed_wall_clock_is_only_written() {
        let cfg = LeaderElection::new("ns", "lease", "me")
            .with_wall_clock_skew(SignedDuration::from_hours(1));
        let ahead = cfg.wall_clock().duration_since(Timestamp::now());
        assert!(ahead > SignedDuration::from_mins(59), "{ahead:?}");
    }
}
