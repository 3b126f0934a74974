//! One claim cache over the watches of several namespaces, so that one
//! controller (one concurrency limit, one queue) serves every listed
//! namespace. (The children's `ChildCache` does the same on its own.)
//!
//! kube-runtime's reflector takes one watch: each list it starts replaces
//! the whole store at its end. Fed the merged watches of several
//! namespaces, a relist of one would wipe the others. [`reflect`] keeps one
//! store over them instead: a namespace's list replaces only that
//! namespace's objects, and the store is marked ready (which releases the
//! controller) only once every namespace has listed or failed, so nothing
//! decides on a half-filled cache, and a namespace the controller may not
//! read (a RoleBinding missing) does not hold back the others. (A cache miss
//! is never taken for absence: the reconcilers then ask the API.)

use std::collections::HashMap;

use futures::stream::{self, BoxStream, StreamExt};
use kube::Resource;
use kube::runtime::reflector::{self, ObjectRef, store::Writer};
use kube::runtime::watcher::{self, Event};

type Watch<K> = BoxStream<'static, Result<Event<K>, watcher::Error>>;

/// Applies the watches of `namespaces` (one each, in order) to `writer`'s
/// store and passes their events on once the store holds them: a list's
/// objects at its end (with a `Delete` for each object it no longer has),
/// `Apply` and `Delete` as they come. With one watch this is kube-runtime's
/// reflector.
pub(super) fn reflect<K>(writer: Writer<K>, watches: Vec<(Option<String>, Watch<K>)>) -> Watch<K>
where
    K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
{
    let mut watches = watches;
    if watches.len() == 1
        && let Some((_, watch)) = watches.pop()
    {
        return reflector::reflector(writer, watch).boxed();
    }
    let mut merge = Merge::new(writer, watches.iter().map(|(ns, _)| ns.clone()).collect());
    let tagged = watches
        .into_iter()
        .enumerate()
        .map(|(i, (_, watch))| watch.map(move |event| (i, event)));
    stream::select_all(tagged)
        .flat_map(move |(i, event)| {
            let out: Vec<_> = match event {
                Ok(event) => merge.apply(i, event).into_iter().map(Ok).collect(),
                Err(e) => {
                    let mut out: Vec<_> = merge.failed(i).into_iter().map(Ok).collect();
                    out.push(Err(e));
                    out
                }
            };
            stream::iter(out)
        })
        .boxed()
}

/// The state of the merge: the store, the lists in progress, and (until
/// every namespace has listed once) what is staged for the first fill.
struct Merge<K: Resource<DynamicType = ()> + Clone + 'static> {
    writer: Writer<K>,
    namespaces: Vec<Option<String>>,
    /// Per watch: the objects of the list it is in, if it is listing.
    listing: Vec<Option<Vec<K>>>,
    /// Per watch: whether it has finished a list.
    listed: Vec<bool>,
    /// Until every watch has listed: the objects so far (the store is
    /// written once, whole, so that it is ready only when complete).
    staged: Option<HashMap<ObjectRef<K>, K>>,
}

impl<K: Resource<DynamicType = ()> + Clone + 'static> Merge<K> {
    fn new(writer: Writer<K>, namespaces: Vec<Option<String>>) -> Self {
        let n = namespaces.len();
        Self {
            writer,
            namespaces,
            listing: vec![None; n],
            listed: vec![false; n],
            staged: Some(HashMap::new()),
        }
    }

    /// Applies watch `i`'s `event`; returns the events to pass on.
    fn apply(&mut self, i: usize, event: Event<K>) -> Vec<Event<K>> {
        match event {
            Event::Init => {
                self.listing[i] = Some(Vec::new());
                Vec::new()
            }
            Event::InitApply(obj) => {
                self.listing[i].get_or_insert_with(Vec::new).push(obj);
                Vec::new()
            }
            Event::InitDone => {
                let list = self.listing[i].take().unwrap_or_default();
                self.listed[i] = true;
                self.list_done(i, list)
            }
            Event::Apply(obj) => match &mut self.staged {
                Some(staged) => {
                    staged.insert(ObjectRef::from_obj(&obj), obj);
                    Vec::new()
                }
                None => {
                    let event = Event::Apply(obj);
                    self.writer.apply_watcher_event(&event);
                    vec![event]
                }
            },
            Event::Delete(obj) => {
                match &mut self.staged {
                    Some(staged) => {
                        staged.remove(&ObjectRef::from_obj(&obj));
                    }
                    None => self.writer.apply_watcher_event(&Event::Delete(obj.clone())),
                }
                vec![Event::Delete(obj)]
            }
        }
    }

    /// Watch `i` failed. Before the first fill, a watch that fails before
    /// it has listed no longer holds the others back: its objects come
    /// when it lists.
    fn failed(&mut self, i: usize) -> Vec<Event<K>> {
        if self.staged.is_none() || self.listed[i] {
            return Vec::new();
        }
        self.listed[i] = true;
        self.fill_if_listed()
    }

    /// Before the first fill: once every watch has listed (or failed),
    /// writes the store, whole, and passes every object on.
    fn fill_if_listed(&mut self) -> Vec<Event<K>> {
        if !self.listed.iter().all(|l| *l) {
            return Vec::new();
        }
        let events: Vec<Event<K>> = self
            .staged
            .take()
            .unwrap_or_default()
            .into_values()
            .map(Event::InitApply)
            .collect();
        self.writer.apply_watcher_event(&Event::Init);
        for event in &events {
            self.writer.apply_watcher_event(event);
        }
        // Ready from here: the controller starts.
        self.writer.apply_watcher_event(&Event::InitDone);
        events
    }

    /// Watch `i` has listed `list`: it replaces namespace `i`'s objects.
    fn list_done(&mut self, i: usize, list: Vec<K>) -> Vec<Event<K>> {
        let ns = self.namespaces[i].clone();
        let in_ns = |o: &K| o.meta().namespace == ns;
        if let Some(staged) = &mut self.staged {
            staged.retain(|_, o| !in_ns(o));
            staged.extend(list.into_iter().map(|o| (ObjectRef::from_obj(&o), o)));
            return self.fill_if_listed();
        }
        let listed: std::collections::HashSet<ObjectRef<K>> =
            list.iter().map(ObjectRef::from_obj).collect();
        // The other namespaces' objects stay as they are: only this
        // namespace's change, one event each.
        let removed: Vec<K> = self
            .writer
            .as_reader()
            .state()
            .iter()
            .filter(|o| in_ns(o) && !listed.contains(&ObjectRef::from_obj(o.as_ref())))
            .map(|o| o.as_ref().clone())
            .collect();
        let events: Vec<Event<K>> = list
            .into_iter()
            .map(Event::Apply)
            .chain(removed.into_iter().map(Event::Delete))
            .collect();
        for event in &events {
            self.writer.apply_watcher_event(event);
        }
        events
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::obc::api::ObjectBucketClaim;
    use kube::runtime::reflector::{Store, store};

    fn claim(ns: &str, name: &str) -> ObjectBucketClaim {
        let mut c = ObjectBucketClaim::new(name, Default::default());
        c.metadata.namespace = Some(ns.to_owned());
        c
    }

    fn merge() -> (Store<ObjectBucketClaim>, Merge<ObjectBucketClaim>) {
        let (reader, writer) = store();
        (
            reader,
            Merge::new(writer, vec![Some("a".into()), Some("b".into())]),
        )
    }

    fn list(m: &mut Merge<ObjectBucketClaim>, i: usize, objs: &[ObjectBucketClaim]) -> usize {
        m.apply(i, Event::Init);
        for o in objs {
            m.apply(i, Event::InitApply(o.clone()));
        }
        m.apply(i, Event::InitDone).len()
    }

    fn names(s: &Store<ObjectBucketClaim>) -> Vec<String> {
        let mut v: Vec<String> = s
            .state()
            .iter()
            .map(|c| {
                format!(
                    "{}/{}",
                    c.metadata.namespace.as_deref().unwrap_or(""),
                    c.metadata.name.as_deref().unwrap_or("")
                )
            })
            .collect();
        v.sort();
        v
    }

    #[test]
    fn the_store_is_filled_once_every_namespace_has_listed() {
        let (reader, mut m) = merge();
        assert_eq!(list(&mut m, 0, &[claim("a", "x")]), 0, "held back");
        assert!(reader.is_empty());
        m.apply(0, Event::Apply(claim("a", "y")));
        assert!(reader.is_empty(), "staged, not yet in the store");
        assert_eq!(list(&mut m, 1, &[claim("b", "z")]), 3, "all three trigger");
        assert_eq!(names(&reader), ["a/x", "a/y", "b/z"]);
    }

    #[test]
    fn a_namespace_whose_watch_fails_does_not_hold_back_the_others() {
        let (reader, mut m) = merge();
        assert_eq!(list(&mut m, 0, &[claim("a", "x")]), 0);
        assert_eq!(m.failed(1).len(), 1, "a's claim is passed on");
        assert_eq!(names(&reader), ["a/x"]);
        assert_eq!(list(&mut m, 1, &[claim("b", "late")]), 1);
        assert_eq!(names(&reader), ["a/x", "b/late"]);
        assert!(m.failed(1).is_empty(), "later failures change nothing");
    }

    #[test]
    fn a_relist_of_one_namespace_keeps_the_others_and_reports_what_it_lost() {
        let (reader, mut m) = merge();
        list(&mut m, 0, &[claim("a", "x"), claim("a", "gone")]);
        list(&mut m, 1, &[claim("b", "z")]);
        let out = {
            m.apply(0, Event::Init);
            m.apply(0, Event::InitApply(claim("a", "x")));
            m.apply(0, Event::InitApply(claim("a", "new")));
            m.apply(0, Event::InitDone)
        };
        assert_eq!(names(&reader), ["a/new", "a/x", "b/z"]);
        let deleted: Vec<_> = out
            .iter()
            .filter_map(|e| match e {
                Event::Delete(c) => c.metadata.name.clone(),
                _ => None,
            })
            .collect();
        assert_eq!(deleted, ["gone"]);
        assert_eq!(out.len(), 3, "two listed objects trigger, one deletion");
    }

    #[test]
    fn live_events_reach_the_store_before_they_are_passed_on() {
        let (reader, mut m) = merge();
        list(&mut m, 0, &[]);
        list(&mut m, 1, &[]);
        assert_eq!(m.apply(1, Event::Apply(claim("b", "q"))).len(), 1);
        assert_eq!(names(&reader), ["b/q"]);
        assert_eq!(m.apply(1, Event::Delete(claim("b", "q"))).len(), 1);
        assert!(reader.is_empty());
    }
}
