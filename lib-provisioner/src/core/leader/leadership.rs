//! Whether this replica may act: the monotonic record of its last lease
//! renewal.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use crate::core::error::{Error, Result};
use crate::core::leader::LeaderElection;

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
    /// A record with no renewal yet; each renewal will be valid for `cfg`'s
    /// lease less half a renewal period.
    pub(crate) fn new(cfg: &LeaderElection) -> Self {
        Self {
            base: Instant::now(),
            renewed_ms: AtomicU64::new(0),
            valid_for: cfg.lease_duration.saturating_sub(cfg.renew_every / 2),
        }
    }

    /// Records a successful renewal that started at `started` (an older
    /// one never replaces a newer).
    pub(crate) fn renewed(&self, started: Instant) {
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

    #[tokio::test(start_paused = true)]
    async fn leadership_starts_out_not_leading() {
        let cfg = LeaderElection::new("ns", "lease", "me");
        let leadership = Leadership::new(&cfg);
        assert!(matches!(leadership.check(), Err(Error::NotLeading(_))));
        leadership.renewed(Instant::now());
        assert!(leadership.check().is_ok());
    }
}
