//! Object versions this controller's own writes replaced: a cached copy in
//! one of them is stale.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// Object versions this controller's own writes replaced, per object UID
/// (one map for claims, one for ObjectBuckets).
///
/// A pass's writes trigger watch events for the same claim, and the next
/// pass may start from a cache that does not hold the last write yet. An
/// object in a version that one of our writes replaced is such a stale copy:
/// acting on it would repeat the write (an Event twice, a 409, a PATCH
/// answered 404, the ObjectBucket's `Bound` status again). Equality only:
/// resourceVersions are opaque, not ordered.
#[derive(Default)]
pub(crate) struct Superseded(Mutex<HashMap<String, (Vec<String>, std::time::Instant)>>);

impl Superseded {
    /// Past this age a remembered version no longer holds a pass back: a
    /// cache that has not caught up by then is re-read from the API instead.
    const PATIENCE: Duration = Duration::from_secs(10);

    /// Records that our writes replaced these versions of object `uid`.
    pub(crate) fn record(&self, uid: &str, versions: Vec<String>) {
        if versions.is_empty() {
            return;
        }
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        // Entries past their patience no longer count; dropping them here
        // keeps objects deleted before their next lookup from piling up.
        map.retain(|_, (_, at)| at.elapsed() < Self::PATIENCE);
        map.insert(uid.to_owned(), (versions, std::time::Instant::now()));
    }

    /// Whether this copy of the object is one our writes replaced (and the
    /// cache has not caught up yet). Forgets the object once it has.
    pub(crate) fn is_stale(&self, meta: &ObjectMeta) -> bool {
        let (Some(uid), Some(rv)) = (&meta.uid, &meta.resource_version) else {
            return false;
        };
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match map.get(uid) {
            Some((versions, at)) if at.elapsed() < Self::PATIENCE && versions.contains(rv) => true,
            Some(_) => {
                map.remove(uid);
                false
            }
            None => false,
        }
    }

    /// Forgets an object (deleted).
    pub(crate) fn forget(&self, uid: &str) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).remove(uid);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(uid: &str, rv: &str) -> ObjectMeta {
        ObjectMeta {
            uid: Some(uid.into()),
            resource_version: Some(rv.into()),
            ..Default::default()
        }
    }

    #[test]
    fn a_replaced_version_is_stale_until_the_cache_catches_up() {
        let s = Superseded::default();
        s.record("u", vec!["1".into(), "2".into()]);
        assert!(s.is_stale(&meta("u", "1")));
        assert!(s.is_stale(&meta("u", "2")));
        assert!(!s.is_stale(&meta("other", "1")), "per UID");
        assert!(!s.is_stale(&meta("u", "3")), "the newer version");
        assert!(!s.is_stale(&meta("u", "1")), "forgotten once caught up");
        assert_eq!(s.len(), 0);
    }

    #[test]
    fn nothing_is_recorded_for_a_pass_that_replaced_nothing() {
        let s = Superseded::default();
        s.record("u", Vec::new());
        assert_eq!(s.len(), 0);
        assert!(!s.is_stale(&ObjectMeta::default()));
    }

    #[test]
    fn entries_past_their_patience_are_dropped_when_others_are_recorded() {
        let s = Superseded::default();
        s.record("gone", vec!["1".into()]);
        let long_ago = std::time::Instant::now()
            .checked_sub(Superseded::PATIENCE)
            .expect("the monotonic clock is past 10 s");
        s.0.lock().expect("lock").get_mut("gone").expect("entry").1 = long_ago;
        s.record("new", vec!["7".into()]);
        assert_eq!(s.len(), 1);
        assert!(s.is_stale(&meta("new", "7")));
    }
}
