//! How often one object's events may start a pass: a token bucket per
//! object, so that a tenant editing its BucketAccess (or a claim) in a loop
//! buys the controller's time at a bounded rate, and every other object
//! keeps its share.
//!
//! A pass that finds no token costs no API request: it asks to be run
//! again when the next token is due, and kube-runtime's queue folds the
//! edits that arrive meanwhile into that one run, which then sees the
//! latest copy.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Passes an object may start at once after a quiet spell: enough for the
/// few events a grant's or a claim's own writes bring back.
const BURST: f64 = 10.0;
/// Passes per second an object may start beyond its burst.
const RATE: f64 = 5.0;
/// Above this many tracked objects, those whose bucket is full again are
/// forgotten (they would start with a full one anyway).
const PRUNE_ABOVE: usize = 4096;

/// The token buckets, by object UID (the key of its backoff).
#[derive(Default)]
pub(crate) struct Pace(Mutex<HashMap<String, (f64, Instant)>>);

impl Pace {
    /// Takes a token for a pass of `key`; without one, how long until the
    /// next is due.
    pub(crate) fn take(&self, key: &str) -> Result<(), Duration> {
        self.take_at(key, Instant::now())
    }

    fn take_at(&self, key: &str, now: Instant) -> Result<(), Duration> {
        let mut buckets = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if buckets.len() > PRUNE_ABOVE {
            buckets.retain(|_, (tokens, at)| refill(*tokens, *at, now) < BURST);
        }
        let (tokens, at) = buckets.entry(key.to_owned()).or_insert((BURST, now));
        *tokens = refill(*tokens, *at, now);
        *at = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - *tokens) / RATE))
        }
    }
}

fn refill(tokens: f64, at: Instant, now: Instant) -> f64 {
    (tokens + now.saturating_duration_since(at).as_secs_f64() * RATE).min(BURST)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loop_gets_its_burst_then_the_rate_and_others_are_not_slowed() {
        let pace = Pace::default();
        let t0 = Instant::now();
        let granted = (0..100)
            .filter(|_| pace.take_at("tenant-a/loop", t0).is_ok())
            .count();
        assert_eq!(granted, BURST as usize, "the burst");
        let wait = pace
            .take_at("tenant-a/loop", t0)
            .expect_err("then it waits");
        assert!(wait <= Duration::from_millis(200), "{wait:?}");
        assert!(pace.take_at("tenant-b/claim", t0).is_ok(), "another object");
        // One second later: RATE more passes, no more.
        let t1 = t0 + Duration::from_secs(1);
        let later = (0..100)
            .filter(|_| pace.take_at("tenant-a/loop", t1).is_ok())
            .count();
        assert_eq!(later, RATE as usize);
    }

    #[test]
    fn quiet_objects_are_forgotten_when_many_are_tracked() {
        let pace = Pace::default();
        let t0 = Instant::now();
        for i in 0..=PRUNE_ABOVE {
            pace.take_at(&format!("ns/{i}"), t0).expect("a token");
        }
        let later = t0 + Duration::from_secs(1);
        pace.take_at("ns/new", later).expect("a token");
        let tracked = pace.0.lock().expect("lock").len();
        assert_eq!(tracked, 1, "only the new object is left");
    }
}
