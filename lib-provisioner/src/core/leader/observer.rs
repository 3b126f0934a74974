//! The clock rules a candidate goes by: a Lease runs out only after this
//! replica saw it unchanged for its duration on its own monotonic clock.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use tokio::time::Instant;

/// What identifies one write of the Lease: any renewal changes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Record {
    holder: Option<String>,
    renew_time: Option<Timestamp>,
    resource_version: Option<String>,
}

impl Record {
    /// The record of `lease` as read.
    pub(super) fn of(lease: &Lease) -> Self {
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
pub(super) struct Observer {
    last: Option<(Record, Instant)>,
}

impl Observer {
    /// Records `record` as seen at `now`; returns since when it is unchanged.
    pub(super) fn observe(&mut self, record: Record, now: Instant) -> Instant {
        match &self.last {
            Some((seen, since)) if *seen == record => *since,
            _ => {
                self.last = Some((record, now));
                now
            }
        }
    }
}

/// Whether the holder's lease has run out at `now`: this replica has seen
/// the Lease unchanged since `unchanged_since` for a whole lease (the longer
/// of the holder's and `ours`), on its own monotonic clock. The holder's
/// `renewTime` is its wall clock, never compared with ours.
pub(super) fn ran_out(
    spec: &LeaseSpec,
    ours: Duration,
    unchanged_since: Instant,
    now: Instant,
) -> bool {
    let theirs = spec
        .lease_duration_seconds
        .and_then(|s| u64::try_from(s).ok())
        .map_or(Duration::ZERO, Duration::from_secs);
    now.saturating_duration_since(unchanged_since) >= theirs.max(ours)
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
