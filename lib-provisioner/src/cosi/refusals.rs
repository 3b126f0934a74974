//! Provisioner refusals remembered per object and generation, so that the
//! watch event of the refusal's own status write does not ask the
//! provisioner again at once: the same spec is asked again only after
//! [`REFUSED_RETRY`], or once its spec changes (a new generation).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// How long a refused object waits before it is looked at again (a class
/// or Bucket fixed elsewhere may unblock it).
pub(crate) const REFUSED_RETRY: Duration = Duration::from_secs(300);

/// A refusal: the generation it answered, when, and its message.
type Refusal = (Option<i64>, Instant, String);

/// UID → its standing refusal.
#[derive(Default)]
pub(crate) struct Refusals(Mutex<HashMap<String, Refusal>>);

impl Refusals {
    /// The refusal still standing for this object's generation, if any.
    pub(crate) fn standing(&self, meta: &ObjectMeta) -> Option<String> {
        let uid = meta.uid.as_ref()?;
        let map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        map.get(uid)
            .filter(|(generation, at, _)| {
                *generation == meta.generation && at.elapsed() < REFUSED_RETRY
            })
            .map(|(_, _, message)| message.clone())
    }

    /// Remembers a refusal of this generation.
    pub(crate) fn record(&self, meta: &ObjectMeta, message: &str) {
        if let Some(uid) = &meta.uid {
            let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
            map.retain(|_, (_, at, _)| at.elapsed() < REFUSED_RETRY);
            map.insert(
                uid.clone(),
                (meta.generation, Instant::now(), message.to_owned()),
            );
        }
    }

    /// Forgets an object's refusal (its call succeeded).
    pub(crate) fn clear(&self, meta: &ObjectMeta) {
        if let Some(uid) = &meta.uid {
            self.0.lock().unwrap_or_else(|p| p.into_inner()).remove(uid);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_stands_for_its_generation_only() {
        let r = Refusals::default();
        let meta = ObjectMeta {
            uid: Some("u".into()),
            generation: Some(1),
            ..Default::default()
        };
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
}
