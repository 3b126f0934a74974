//! Provisioner refusals remembered per object and generation, so that the
//! watch event of the refusal's own status write does not ask the
//! provisioner again at once: the same spec is asked again only after
//! [`REFUSED_RETRY`], or once its spec changes (a new generation). A
//! refusal the user clears outside Kubernetes (a bucket emptied before its
//! deletion) is [hastened](Refusals::hasten): asked again after
//! [`QUICK_RETRY`], doubling up to [`QUICK_RETRY_CAP`].

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// How long a refused object waits before it is looked at again (a class
/// or Bucket fixed elsewhere may unblock it).
pub(crate) const REFUSED_RETRY: Duration = Duration::from_secs(300);
/// The first wait of a hastened refusal.
pub(crate) const QUICK_RETRY: Duration = Duration::from_secs(5);
/// The longest wait of a hastened refusal.
pub(crate) const QUICK_RETRY_CAP: Duration = Duration::from_secs(60);

/// A refusal of one object.
struct Refusal {
    /// The generation it answered.
    generation: Option<i64>,
    at: Instant,
    message: String,
    /// How long it stands.
    retry: Duration,
    /// The wait of the last hastened refusal of this generation, which the
    /// next one doubles.
    quick: Option<Duration>,
}

impl Refusal {
    /// Whether this refusal was hastened already (a standing refusal
    /// answered again is not a new one): only a hastened one stands
    /// shorter than [`REFUSED_RETRY`].
    fn hastened(&self) -> bool {
        self.retry < REFUSED_RETRY
    }
}

/// UID → its standing refusal.
#[derive(Default)]
pub(crate) struct Refusals(Mutex<HashMap<String, Refusal>>);

/// The wait after the hastened refusal that followed one of `previous`:
/// [`QUICK_RETRY`], then doubling, capped at [`QUICK_RETRY_CAP`].
pub(crate) fn next_quick(previous: Option<Duration>) -> Duration {
    previous.map_or(QUICK_RETRY, |d| (d * 2).min(QUICK_RETRY_CAP))
}

impl Refusals {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, Refusal>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The refusal still standing for this object's generation, if any.
    pub(crate) fn standing(&self, meta: &ObjectMeta) -> Option<String> {
        let uid = meta.uid.as_ref()?;
        self.map()
            .get(uid)
            .filter(|r| stands(r, meta))
            .map(|r| r.message.clone())
    }

    /// How long the refusal standing for this object's generation still
    /// stands, if one does.
    pub(crate) fn retry_in(&self, meta: &ObjectMeta) -> Option<Duration> {
        let uid = meta.uid.as_ref()?;
        self.map()
            .get(uid)
            .filter(|r| stands(r, meta))
            .map(|r| r.retry.saturating_sub(r.at.elapsed()))
    }

    /// Remembers a refusal of this generation, standing [`REFUSED_RETRY`].
    pub(crate) fn record(&self, meta: &ObjectMeta, message: &str) {
        let Some(uid) = &meta.uid else { return };
        let mut map = self.map();
        // Kept as long as the slowest refusal stands: a hastened one's
        // wait is doubled from the last.
        map.retain(|_, r| r.at.elapsed() < REFUSED_RETRY);
        let quick = map
            .get(uid)
            .filter(|r| r.generation == meta.generation)
            .and_then(|r| r.quick);
        let refusal = Refusal {
            generation: meta.generation,
            at: Instant::now(),
            message: message.to_owned(),
            retry: REFUSED_RETRY,
            quick,
        };
        map.insert(uid.clone(), refusal);
    }

    /// Makes the refusal just recorded for this object stand only a short,
    /// growing while ([`next_quick`]): one the user clears outside
    /// Kubernetes, where no event says so. A refusal hastened already is
    /// left as it is.
    pub(crate) fn hasten(&self, meta: &ObjectMeta) {
        let Some(uid) = &meta.uid else { return };
        if let Some(r) = self.map().get_mut(uid).filter(|r| !r.hastened()) {
            let wait = next_quick(r.quick);
            (r.retry, r.quick) = (wait, Some(wait));
        }
    }

    /// Forgets an object's refusal (its call succeeded).
    pub(crate) fn clear(&self, meta: &ObjectMeta) {
        if let Some(uid) = &meta.uid {
            self.map().remove(uid);
        }
    }
}

/// Whether a refusal still stands for the object as `meta` shows it.
fn stands(r: &Refusal, meta: &ObjectMeta) -> bool {
    r.generation == meta.generation && r.at.elapsed() < r.retry
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> ObjectMeta {
        ObjectMeta {
            uid: Some("u".into()),
            generation: Some(1),
            ..Default::default()
        }
    }

    #[test]
    fn a_refusal_stands_for_its_generation_only() {
        let r = Refusals::default();
        let meta = meta();
        assert_eq!(r.standing(&meta), None);
        r.record(&meta, "no");
        assert_eq!(r.standing(&meta).as_deref(), Some("no"));
        let edited = ObjectMeta {
            generation: Some(2),
            ..meta.clone()
        };
        assert_eq!(r.standing(&edited), None);
        r.clear(&meta);
        assert_eq!(r.standing(&meta), None);
    }

    /// Issue 36, item 5: 5 s doubling to 60 s, not 5 minutes.
    #[test]
    fn a_hastened_refusal_retries_soon_doubling_to_a_minute() {
        let s = |n| Duration::from_secs(n);
        let mut schedule = vec![];
        let mut last = None;
        for _ in 0..6 {
            let wait = next_quick(last);
            schedule.push(wait);
            last = Some(wait);
        }
        assert_eq!(schedule, [s(5), s(10), s(20), s(40), s(60), s(60)]);
    }

    #[test]
    fn each_new_hastened_refusal_doubles_the_wait_and_others_keep_theirs() {
        let (r, meta) = (Refusals::default(), meta());
        r.record(&meta, "not empty");
        assert!(r.retry_in(&meta) > Some(Duration::from_secs(290)));
        r.hasten(&meta);
        assert!(r.retry_in(&meta) <= Some(QUICK_RETRY));
        r.hasten(&meta);
        assert!(
            r.retry_in(&meta) <= Some(QUICK_RETRY),
            "a standing refusal answered again is not hastened again"
        );
        r.record(&meta, "not empty");
        r.hasten(&meta);
        let second = r.retry_in(&meta).unwrap_or_default();
        assert!(second > QUICK_RETRY && second <= 2 * QUICK_RETRY);
        let other = ObjectMeta {
            uid: Some("v".into()),
            ..meta.clone()
        };
        r.record(&other, "refused");
        assert!(r.retry_in(&other) > Some(Duration::from_secs(290)));
    }
}
