//! The BucketAccesses by the claims they name, kept beside the access
//! cache.
//!
//! A BucketClaim's event, or its Bucket's, moves on the accesses naming the
//! claim, and a deleting claim waits for them to go. Found by a scan of the
//! access cache, each such event cost a copy of the whole cache and a
//! comparison per access: a restart over N claims and N accesses, N² of
//! them. The index is filled by the access watch itself, before the cache
//! is, so it is never older than the cache.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, PoisonError, RwLock};

use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;

use crate::core::watch::keys::{packed, unpacked};
use crate::cosi::api::BucketAccess;

/// The BucketAccesses of each `namespace/claim`, shared by the mappers
/// and the claims' passes.
#[derive(Clone, Default)]
pub(crate) struct AccessesByClaim(Arc<RwLock<Index>>);

#[derive(Default)]
struct Index {
    /// `namespace/claim` → the names of the accesses there that name it.
    by_claim: HashMap<Box<str>, BTreeSet<Box<str>>>,
    /// `namespace/access` → what it names, as last seen.
    named: HashMap<Box<str>, Named>,
    /// The number of the watch's latest list.
    list: u64,
}

struct Named {
    /// `namespace/claim` of each claim the access names.
    claims: Box<[Box<str>]>,
    /// The list the access was last seen in (or after).
    seen_in: u64,
}

impl AccessesByClaim {
    /// The BucketAccesses in `namespace` that name claim `claim`, by name.
    pub(crate) fn naming(&self, namespace: &str, claim: &str) -> Vec<ObjectRef<BucketAccess>> {
        let index = self.0.read().unwrap_or_else(PoisonError::into_inner);
        index
            .by_claim
            .get(packed(Some(namespace), claim).as_str())
            .map(|names| {
                names
                    .iter()
                    .map(|name| ObjectRef::new(name).within(namespace))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// A watch stream's inspector that keeps the index.
    pub(crate) fn tap(
        &self,
    ) -> impl FnMut(&Result<watcher::Event<BucketAccess>, watcher::Error>) + Send + 'static {
        let index = self.0.clone();
        move |event| {
            if let Ok(event) = event {
                index
                    .write()
                    .unwrap_or_else(PoisonError::into_inner)
                    .apply(event);
            }
        }
    }
}

impl Index {
    fn apply(&mut self, event: &watcher::Event<BucketAccess>) {
        match event {
            watcher::Event::Init => self.list += 1,
            watcher::Event::InitApply(access) | watcher::Event::Apply(access) => self.put(access),
            watcher::Event::Delete(access) => {
                self.remove(&packed(access.namespace().as_deref(), &access.name_any()));
            }
            // A list replaces what the watch knew: what it did not show
            // is gone.
            watcher::Event::InitDone => {
                let unseen: Vec<Box<str>> = self
                    .named
                    .iter()
                    .filter(|(_, named)| named.seen_in < self.list)
                    .map(|(key, _)| key.clone())
                    .collect();
                for key in unseen {
                    self.remove(&key);
                }
            }
        }
    }

    fn put(&mut self, access: &BucketAccess) {
        let ns = access.namespace();
        let name = access.name_any();
        let key = packed(ns.as_deref(), &name);
        self.remove(&key);
        let claims: Box<[Box<str>]> = access
            .spec
            .bucket_claims
            .iter()
            .map(|c| packed(ns.as_deref(), &c.bucket_claim_name).into())
            .collect();
        for claim in &claims {
            self.by_claim
                .entry(claim.clone())
                .or_default()
                .insert(name.as_str().into());
        }
        let seen_in = self.list;
        self.named.insert(key.into(), Named { claims, seen_in });
    }

    fn remove(&mut self, key: &str) {
        let Some(named) = self.named.remove(key) else {
            return;
        };
        let (_, name) = unpacked(key);
        for claim in &named.claims {
            if let Some(names) = self.by_claim.get_mut(claim) {
                names.remove(name);
                if names.is_empty() {
                    self.by_claim.remove(claim);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn access(ns: &str, name: &str, claims: &[&str]) -> BucketAccess {
        let claims: Vec<_> = claims
            .iter()
            .map(|c| {
                serde_json::json!({
                    "bucketClaimName": c, "accessMode": "ReadWrite", "accessSecretName": format!("{name}-{c}")
                })
            })
            .collect();
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": ns},
            "spec": {"bucketAccessClassName": "c", "protocol": "S3", "bucketClaims": claims}
        }))
        .expect("access")
    }

    fn names(index: &AccessesByClaim, ns: &str, claim: &str) -> Vec<String> {
        let names: Vec<String> = index
            .naming(ns, claim)
            .into_iter()
            .inspect(|r| assert_eq!(r.namespace.as_deref(), Some(ns)))
            .map(|r| r.name)
            .collect();
        // In order of name: a claim's status that names one stays put.
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted);
        names
    }

    fn feed(index: &AccessesByClaim, events: Vec<watcher::Event<BucketAccess>>) {
        let mut tap = index.tap();
        for event in events {
            tap(&Ok(event));
        }
    }

    #[test]
    fn an_access_is_found_by_each_claim_it_names_in_its_own_namespace() {
        let index = AccessesByClaim::default();
        feed(
            &index,
            vec![
                watcher::Event::Apply(access("team", "reader", &["photos", "logs"])),
                watcher::Event::Apply(access("team", "writer", &["photos"])),
                watcher::Event::Apply(access("other", "reader", &["photos"])),
            ],
        );
        assert_eq!(names(&index, "team", "photos"), ["reader", "writer"]);
        assert_eq!(names(&index, "team", "logs"), ["reader"]);
        assert_eq!(names(&index, "other", "photos"), ["reader"]);
        assert!(names(&index, "other", "logs").is_empty());
    }

    #[test]
    fn a_changed_access_names_only_its_new_claims_and_a_deleted_one_none() {
        let index = AccessesByClaim::default();
        feed(
            &index,
            vec![
                watcher::Event::Apply(access("team", "reader", &["photos", "logs"])),
                watcher::Event::Apply(access("team", "reader", &["logs", "videos"])),
            ],
        );
        assert!(names(&index, "team", "photos").is_empty());
        assert_eq!(names(&index, "team", "videos"), ["reader"]);
        feed(
            &index,
            vec![watcher::Event::Delete(access("team", "reader", &[]))],
        );
        assert!(names(&index, "team", "logs").is_empty());
        assert!(names(&index, "team", "videos").is_empty());
        assert!(index.0.read().expect("lock").by_claim.is_empty());
    }

    #[test]
    fn a_relist_drops_the_accesses_it_did_not_show() {
        let index = AccessesByClaim::default();
        feed(
            &index,
            vec![
                watcher::Event::Apply(access("team", "kept", &["photos"])),
                watcher::Event::Apply(access("team", "deleted-meanwhile", &["photos"])),
                watcher::Event::Init,
                watcher::Event::InitApply(access("team", "kept", &["photos"])),
            ],
        );
        // Until the list is done, the index keeps what it knew.
        assert_eq!(
            names(&index, "team", "photos"),
            ["deleted-meanwhile", "kept"]
        );
        feed(&index, vec![watcher::Event::InitDone]);
        assert_eq!(names(&index, "team", "photos"), ["kept"]);
        // An access applied after the list is kept by the next one only
        // if that one shows it.
        feed(
            &index,
            vec![
                watcher::Event::Apply(access("team", "new", &["photos"])),
                watcher::Event::Init,
                watcher::Event::InitApply(access("team", "new", &["photos"])),
                watcher::Event::InitDone,
            ],
        );
        assert_eq!(names(&index, "team", "photos"), ["new"]);
    }
}
