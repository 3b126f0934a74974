//! When each Bound claim's bucket was last compared with its applied config
//! ([`Provisioner::check_config`](crate::core::provisioner::Provisioner::check_config)).
//!
//! In memory only: after a restart no claim is due at once. A claim seen
//! for the first time is placed at a point of the interval its UID picks,
//! so that 100,000 claims are checked spread over the interval rather than
//! all together one interval after the start.

use std::collections::HashMap;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::core::ids::Uid;

/// Per claim UID, when its bucket was last checked (or counts as checked).
pub(crate) struct ConfigChecks {
    every: Duration,
    last: Mutex<HashMap<Uid, Instant>>,
}

impl ConfigChecks {
    /// Checks every `every`; zero turns checks off.
    pub(crate) fn new(every: Duration) -> Self {
        Self {
            every,
            last: Mutex::default(),
        }
    }

    /// Whether the claim's bucket is due for a check now.
    pub(crate) fn due(&self, uid: &str) -> bool {
        self.due_at(uid, Instant::now())
    }

    fn due_at(&self, uid: &str, now: Instant) -> bool {
        if self.every.is_zero() {
            return false;
        }
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        let since = *last
            .entry(Uid::new(uid))
            .or_insert_with(|| now.checked_sub(self.spread(uid)).unwrap_or(now));
        now.saturating_duration_since(since) >= self.every
    }

    /// A check passed (or the claim counts as checked): due again after
    /// the interval.
    pub(crate) fn checked(&self, uid: &str) {
        if !self.every.is_zero() {
            let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
            last.insert(Uid::new(uid), Instant::now());
        }
    }

    /// The claim is gone.
    pub(crate) fn forget(&self, uid: &str) {
        self.last
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&Uid::new(uid));
    }

    /// How far into its interval a claim seen for the first time already
    /// is: the UID's hash, as a fraction of the interval.
    fn spread(&self, uid: &str) -> Duration {
        let mut hasher = DefaultHasher::new();
        uid.hash(&mut hasher);
        let fraction = (hasher.finish() % 1024) as u32;
        self.every / 1024 * fraction
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_restart_checks_no_claim_at_once_and_spreads_them() {
        let checks = ConfigChecks::new(Duration::from_secs(1024));
        let start = Instant::now();
        let uids: Vec<String> = (0..200).map(|i| format!("uid-{i}")).collect();
        assert!(uids.iter().all(|u| !checks.due_at(u, start)));
        let half = start + Duration::from_secs(512);
        let due = uids.iter().filter(|u| checks.due_at(u, half)).count();
        assert!(
            (40..160).contains(&due),
            "{due} of 200 due after half the interval"
        );
        let later = start + Duration::from_secs(1025);
        assert!(uids.iter().all(|u| checks.due_at(u, later)));
    }

    #[test]
    fn a_passed_check_waits_an_interval_and_zero_turns_checks_off() {
        let checks = ConfigChecks::new(Duration::from_secs(60));
        checks.checked("a");
        assert!(!checks.due("a"));
        let off = ConfigChecks::new(Duration::ZERO);
        assert!(!off.due_at("a", Instant::now() + Duration::from_secs(1 << 20)));
    }
}
