//! Where a COSI pass reads: the watches' caches, except where a decision
//! needs a fresher copy than a cache can give.
//!
//! * A pass's **own object** in its first round: the cache's copy (the one
//!   the event carried), unless this process wrote the object since the
//!   cache last showed it ([`OwnWrites`]). After a step that wrote it,
//!   the write's answer ([`crate::cosi::answer`]); after a step that did
//!   not (a provisioner call, a write of another object), the copy that
//!   step was planned on; after a conflict, a GET.
//! * **Other objects** a plan looks at (a claim's Bucket, a Bucket's claim,
//!   the classes): the answer of this pass's last write of it (a Bucket
//!   the claim's pass just created: the cache has not seen it yet), else
//!   the cache's copy; a miss is confirmed with a GET, as a cache may not
//!   have seen a create yet, and so is an object being deleted ([`read`]).
//! * **Access Secrets** are not watched (a watch of every Secret would
//!   cost more than the GET): a GET, once per pass and again only after a
//!   step wrote the Secret (its answer, where kept) or failed (the access
//!   pass's memory; [`read`] without a cache).
//!
//! A stale copy costs no safety: every write computed from a read carries
//! that read's resourceVersion (a 409 re-reads with a GET), and every
//! provisioner call a stale plan could repeat is idempotent by the UID it
//! names, as after a crash.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::Api;
use kube::runtime::reflector::{ObjectRef, Store};

use crate::core::error::Error;
use crate::cosi::answer;
use crate::cosi::writes::{self, Object};

/// How long a record of an own write is believed: a watch shows a write
/// within a second or two; a record older than this is of an object that
/// went while no pass looked, or of a watch that is failing (which the
/// health reports).
const BELIEVED: Duration = Duration::from_secs(30);

/// The objects this process wrote since their cache last showed them:
/// by UID, the resourceVersion the last pass read after its writes
/// (`None`: unknown, as after a status write whose answer was not kept).
#[derive(Default)]
pub(crate) struct OwnWrites(Mutex<HashMap<String, (Option<String>, Instant)>>);

impl OwnWrites {
    /// Whether the cache's copy `meta` shows everything this process wrote
    /// to the object; once it does, the record is dropped (a cache only
    /// moves forward).
    pub(crate) fn cache_shows(&self, meta: &ObjectMeta) -> bool {
        let Some(uid) = meta.uid.as_deref() else {
            return false;
        };
        let mut records = self.lock();
        let current = match records.get(uid) {
            None => return true,
            Some((rv, at)) => {
                at.elapsed() > BELIEVED || (rv.is_some() && *rv == meta.resource_version)
            }
        };
        if current {
            records.remove(uid);
        }
        current
    }

    /// Records that the newest version of the object this process knows is
    /// `meta`'s (or, with `None`, a later one it did not read).
    pub(crate) fn record(&self, meta: &ObjectMeta, resource_version: Option<String>) {
        if let Some(uid) = meta.uid.clone() {
            self.lock().insert(uid, (resource_version, Instant::now()));
        }
    }

    /// Forgets the object (it is gone).
    pub(crate) fn forget(&self, meta: &ObjectMeta) {
        if let Some(uid) = meta.uid.as_deref() {
            self.lock().remove(uid);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Option<String>, Instant)>> {
        // A panic while holding it leaves a consistent map.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// An object another plan looks at: what this pass's last write of it
/// answered, else the cache's copy, unless it is being deleted; a miss, or
/// a deleting object, confirmed by a GET (without a cache, as for access
/// Secrets, the answer or the GET). A deleting object is read afresh
/// because what waits for it waits for it to go: the event that removes
/// its last finalizer finds it still cached, and its removal from the
/// cache starts no pass of what waits.
pub(crate) async fn read<K>(
    cache: Option<&Store<K>>,
    api: &Api<K>,
    key: ObjectRef<K>,
    action: &'static str,
) -> Result<Option<K>, Error>
where
    K: Object + kube::Resource<DynamicType = ()>,
{
    let written = answer::other::<K>(key.namespace.as_deref(), &key.name);
    let hit = written.or_else(|| cache.and_then(|c| c.get(&key)).map(|h| h.as_ref().clone()));
    if let Some(hit) = hit.filter(|h| h.meta().deletion_timestamp.is_none()) {
        return Ok(Some(hit));
    }
    writes::get(api, &key.name, action).await
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
    fn a_cache_copy_is_believed_once_it_shows_the_own_write() {
        let own = OwnWrites::default();
        assert!(own.cache_shows(&meta("u", "1")), "nothing written");
        own.record(&meta("u", "1"), Some("5".into()));
        assert!(
            !own.cache_shows(&meta("u", "1")),
            "the cache lags the write"
        );
        assert!(own.cache_shows(&meta("v", "1")), "another object");
        assert!(own.cache_shows(&meta("u", "5")), "the cache shows it");
        assert!(own.cache_shows(&meta("u", "1")), "the record is dropped");
    }

    #[test]
    fn an_unknown_version_is_read_until_a_pass_learns_it() {
        let own = OwnWrites::default();
        own.record(&meta("u", "1"), None);
        assert!(!own.cache_shows(&meta("u", "1")));
        assert!(!own.cache_shows(&meta("u", "2")), "any version may lag");
        own.record(&meta("u", "1"), Some("3".into()));
        assert!(own.cache_shows(&meta("u", "3")));
        own.record(&meta("u", "3"), Some("4".into()));
        own.forget(&meta("u", "4"));
        assert!(own.cache_shows(&meta("u", "3")), "forgotten");
    }
}
