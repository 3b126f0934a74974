//! The cache of one kind of claim child (Secrets or ConfigMaps) over every
//! namespace served, and how its watches fill it.
//!
//! A kube-runtime `Store` keys each object by an `ObjectRef` of four
//! strings and needs the object to lend it a whole `ObjectMeta`: about
//! 700 of the 1,060 bytes a child cost in one at 100,000 claims. This cache
//! keeps each [`CachedChild`] once, keyed by its own `namespace/name`.
//!
//! It is filled by one watch per namespace served (or one for all), as
//! `obc::wiring::namespaces` does for claims: a list replaces only its own
//! namespace's children, and the cache is ready once every watch has listed
//! (or, with several, failed before it could: a namespace the controller
//! may not read does not hold back the others). A relist updates the
//! children in place and drops, at its end, those it did not see, so no
//! second copy of the cache is built during a list. Until then a child
//! deleted during a gap is still served, as a `Store` serves its old copy
//! until a list ends; a cache is never taken for the last word (a miss is
//! asked of the API, and a stale copy fails its write on the version).

use std::borrow::Borrow;
use std::collections::HashSet;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, RwLock};

use futures::stream::{self, BoxStream, StreamExt};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher::{self, Event};
use tokio::sync::watch;

use super::child_meta::CachedChild;
use crate::core::watch::keys;
use crate::obc::CachedClaim;

/// One watch's events: `Ok` events of the children it sees, or its errors.
pub type ChildWatch<K> = BoxStream<'static, Result<Event<CachedChild<K>>, watcher::Error>>;

/// The claims a child's change concerns (its owners), once the cache holds
/// the change.
pub type OwnerFeed = BoxStream<'static, ObjectRef<CachedClaim>>;

/// The cache of one kind of child `K`, shared by every reconcile.
///
/// ```ignore
/// let (secrets, feed) = ChildCache::<Secret>::filled_by(vec![(None, watch)], label);
/// secrets.wait_until_ready().await;
/// let meta = secrets.get("team-a", "photos");
/// ```
pub struct ChildCache<K> {
    entries: Arc<RwLock<HashSet<Slot<K>>>>,
    ready: watch::Receiver<bool>,
}

impl<K> Clone for ChildCache<K> {
    fn clone(&self) -> Self {
        Self {
            entries: self.entries.clone(),
            ready: self.ready.clone(),
        }
    }
}

impl<K: 'static> ChildCache<K> {
    /// A cache filled by `watches`, each with the namespace it lists
    /// (`None`: all), and the feed of the claims each change concerns.
    /// The feed fills the cache as it is polled. `label`, the provisioner
    /// label's value the watches select, is kept once for all children.
    pub fn filled_by(
        watches: Vec<(Option<String>, ChildWatch<K>)>,
        label: &str,
    ) -> (Self, OwnerFeed) {
        let (ready_tx, ready) = watch::channel(false);
        let entries = Arc::new(RwLock::new(HashSet::new()));
        let scopes = watches.iter().map(|(ns, _)| ns.clone()).collect();
        let mut fill = Fill::new(entries.clone(), scopes, label.into(), ready_tx);
        let tagged = watches
            .into_iter()
            .enumerate()
            .map(|(i, (_, watch))| watch.map(move |event| (i, event)));
        let feed = stream::select_all(tagged)
            .flat_map(move |(i, event)| stream::iter(fill.take(i, event)))
            .boxed();
        (Self { entries, ready }, feed)
    }
}

impl<K> ChildCache<K> {
    /// The metadata of child `name` in `ns`, as the decisions read it.
    pub fn get(&self, ns: &str, name: &str) -> Option<ObjectMeta> {
        let key = keys::packed(Some(ns), name);
        let entries = self.entries.read().unwrap_or_else(|p| p.into_inner());
        entries.get(key.as_str()).map(|s| s.child.object_meta())
    }

    /// How many children it holds.
    pub fn len(&self) -> usize {
        self.entries.read().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Resolves once every watch has listed (see the module docs).
    pub async fn wait_until_ready(&self) {
        let mut ready = self.ready.clone();
        // An error means the fill was dropped: nothing will come.
        let _ = ready.wait_for(|r| *r).await;
    }
}

/// A child in the set, with the list that last saw it.
struct Slot<K> {
    child: CachedChild<K>,
    /// The number of its watch's list that saw it (or a later event).
    seen_in: u32,
}

impl<K> Hash for Slot<K> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // As `str` hashes, so that the set is searched by `&str`.
        self.child.key().hash(state);
    }
}

impl<K> PartialEq for Slot<K> {
    fn eq(&self, other: &Self) -> bool {
        self.child.key() == other.child.key()
    }
}

impl<K> Eq for Slot<K> {}

impl<K> Borrow<str> for Slot<K> {
    fn borrow(&self) -> &str {
        self.child.key()
    }
}

/// The filling side: what each watch has listed.
struct Fill<K> {
    entries: Arc<RwLock<HashSet<Slot<K>>>>,
    /// Per watch: its namespace (`None`: all).
    scopes: Vec<Option<String>>,
    /// Per watch: the number of its current (or last) list.
    lists: Vec<u32>,
    /// Per watch: whether it counts as listed for readiness.
    listed: Vec<bool>,
    label: Arc<str>,
    ready: watch::Sender<bool>,
}

impl<K> Fill<K> {
    fn new(
        entries: Arc<RwLock<HashSet<Slot<K>>>>,
        scopes: Vec<Option<String>>,
        label: Arc<str>,
        ready: watch::Sender<bool>,
    ) -> Self {
        let n = scopes.len();
        Self {
            entries,
            scopes,
            lists: vec![0; n],
            listed: vec![false; n],
            label,
            ready,
        }
    }

    /// Applies watch `i`'s `event` (or error); returns the claims it
    /// concerns.
    fn take(
        &mut self,
        i: usize,
        event: Result<Event<CachedChild<K>>, watcher::Error>,
    ) -> Vec<ObjectRef<CachedClaim>> {
        match event {
            Ok(event) => self.apply(i, event),
            Err(_) => {
                // Logged where the watch is tracked.
                self.failed(i);
                Vec::new()
            }
        }
    }

    fn apply(&mut self, i: usize, event: Event<CachedChild<K>>) -> Vec<ObjectRef<CachedClaim>> {
        match event {
            Event::Init => {
                self.lists[i] = self.lists[i].wrapping_add(1);
                Vec::new()
            }
            Event::InitApply(child) | Event::Apply(child) => self.insert(i, child),
            Event::InitDone => self.list_done(i),
            Event::Delete(child) => {
                self.write().remove(child.key());
                child.owner_keys()
            }
        }
    }

    fn insert(&mut self, i: usize, mut child: CachedChild<K>) -> Vec<ObjectRef<CachedClaim>> {
        let owners = child.owner_keys();
        child.share_label(&self.label);
        let seen_in = self.lists[i];
        self.write().replace(Slot { child, seen_in });
        owners
    }

    /// Watch `i` has listed: the children of its namespace that its list
    /// did not see are gone. Returns the claims they concern.
    fn list_done(&mut self, i: usize) -> Vec<ObjectRef<CachedClaim>> {
        let (scope, list) = (self.scopes[i].as_deref(), self.lists[i]);
        let gone: Vec<Slot<K>> = self
            .write()
            .extract_if(|s| s.seen_in != list && scope.is_none_or(|ns| s.child.namespace() == ns))
            .collect();
        self.mark_listed(i);
        gone.iter().flat_map(|s| s.child.owner_keys()).collect()
    }

    /// Watch `i` failed. With several watches, one that fails before it
    /// has listed no longer holds the others back: its children come when
    /// it lists. A single watch is the whole cache: it must list.
    fn failed(&mut self, i: usize) {
        if self.scopes.len() > 1 {
            self.mark_listed(i);
        }
    }

    fn mark_listed(&mut self, i: usize) {
        self.listed[i] = true;
        if self.listed.iter().all(|l| *l) {
            self.ready.send_replace(true);
        }
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashSet<Slot<K>>> {
        self.entries.write().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use std::marker::PhantomData;

    use k8s_openapi::api::core::v1::Secret;
    use kube::core::PartialObjectMeta;

    use super::*;
    use crate::obc::api::ObjectBucketClaim;

    fn child(ns: &str, name: &str) -> CachedChild<Secret> {
        let mut claim = ObjectBucketClaim::new(name, Default::default());
        claim.metadata.uid = Some("638ffacd-f666-4402-ba10-7848c66ef576".into());
        let owner = crate::obc::writes::owner_reference(&claim).expect("a UID");
        CachedChild::from(PartialObjectMeta {
            types: None,
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some(ns.into()),
                owner_references: Some(vec![owner]),
                ..ObjectMeta::default()
            },
            _phantom: PhantomData,
        })
    }

    fn new_cache(scopes: &[Option<&str>]) -> (ChildCache<Secret>, Fill<Secret>) {
        let (ready_tx, ready) = watch::channel(false);
        let entries = Arc::new(RwLock::new(HashSet::new()));
        let scopes = scopes.iter().map(|s| s.map(str::to_owned)).collect();
        let fill = Fill::new(entries.clone(), scopes, "p".into(), ready_tx);
        (ChildCache { entries, ready }, fill)
    }

    fn list(fill: &mut Fill<Secret>, i: usize, children: &[(&str, &str)]) -> Vec<String> {
        fill.apply(i, Event::Init);
        for (ns, name) in children {
            fill.apply(i, Event::InitApply(child(ns, name)));
        }
        keys(fill.apply(i, Event::InitDone))
    }

    fn keys(refs: Vec<ObjectRef<CachedClaim>>) -> Vec<String> {
        refs.iter()
            .map(|r| format!("{}/{}", r.namespace.as_deref().unwrap_or(""), r.name))
            .collect()
    }

    fn ready(cache: &ChildCache<Secret>) -> bool {
        *cache.ready.borrow()
    }

    #[test]
    fn events_reach_the_cache_and_name_the_owner_claim() {
        let (cache, mut fill) = new_cache(&[None]);
        assert!(list(&mut fill, 0, &[("a", "x")]).is_empty());
        assert!(ready(&cache));
        let meta = cache.get("a", "x").expect("listed");
        assert_eq!(meta.name.as_deref(), Some("x"));
        assert_eq!(keys(fill.apply(0, Event::Apply(child("b", "y")))), ["b/y"]);
        assert!(cache.get("b", "y").is_some());
        assert!(cache.get("a", "y").is_none(), "keyed by namespace too");
        assert_eq!(keys(fill.apply(0, Event::Delete(child("b", "y")))), ["b/y"]);
        assert!(cache.get("b", "y").is_none());
        assert_eq!(cache.len(), 1);
    }

    #[test]
    fn a_relist_drops_what_it_did_not_see_in_its_own_namespace_only() {
        let (cache, mut fill) = new_cache(&[Some("a"), Some("b")]);
        list(&mut fill, 0, &[("a", "x"), ("a", "gone")]);
        assert!(!ready(&cache), "b has not listed");
        list(&mut fill, 1, &[("b", "z")]);
        assert!(ready(&cache));
        let gone = list(&mut fill, 0, &[("a", "x"), ("a", "new")]);
        assert_eq!(gone, ["a/gone"], "the claim of what went is told");
        for (ns, name) in [("a", "x"), ("a", "new"), ("b", "z")] {
            assert!(cache.get(ns, name).is_some(), "{ns}/{name}");
        }
        assert!(cache.get("a", "gone").is_none());
    }

    #[test]
    fn a_child_changed_after_its_list_survives_the_next_one_only_if_listed() {
        let (cache, mut fill) = new_cache(&[None]);
        list(&mut fill, 0, &[]);
        fill.apply(0, Event::Apply(child("a", "live")));
        assert!(cache.get("a", "live").is_some());
        list(&mut fill, 0, &[("a", "other")]);
        assert!(cache.get("a", "live").is_none(), "deleted during a gap");
        assert!(cache.get("a", "other").is_some());
    }

    #[test]
    fn a_failed_namespace_does_not_hold_back_the_others_but_a_single_watch_must_list() {
        let (cache, mut fill) = new_cache(&[Some("a"), Some("b")]);
        list(&mut fill, 0, &[("a", "x")]);
        fill.take(1, Err(watcher::Error::NoResourceVersion));
        assert!(ready(&cache));

        let (single, mut fill) = new_cache(&[None]);
        fill.take(0, Err(watcher::Error::NoResourceVersion));
        assert!(!ready(&single));
        list(&mut fill, 0, &[]);
        assert!(ready(&single));
    }

    #[tokio::test]
    async fn the_feed_fills_the_cache_as_it_is_polled() {
        let events = vec![
            Ok(Event::Init),
            Ok(Event::InitApply(child("a", "x"))),
            Ok(Event::InitDone),
        ];
        let watch: ChildWatch<Secret> = stream::iter(events).boxed();
        let (cache, feed) = ChildCache::filled_by(vec![(None, watch)], "p");
        assert!(cache.is_empty());
        let claims: Vec<_> = feed.collect().await;
        assert_eq!(keys(claims), ["a/x"]);
        cache.wait_until_ready().await;
        assert!(cache.get("a", "x").is_some());
    }
}
