//! The periodic look at every cached object, paced over the period.
//!
//! A reconciler that answers "nothing to do" with `Action::requeue(period)`
//! leaves kube-runtime's scheduler an entry per object (its `ObjectRef`,
//! held in the scheduler's map and in its delay queue): at 100,000 claims
//! about 700 bytes per claim, for the whole life of the process. [`paced`]
//! keeps no entry per object: each round it takes the cache's current
//! objects (one pointer each) and hands them to the controller a few at a
//! time, spread evenly over the period, so the apiserver and the store see
//! a steady trickle instead of a burst every period.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use futures::stream::{self, BoxStream, StreamExt};
use kube::Resource;
use kube::runtime::reflector::{ObjectRef, Store};
use tokio::time::{Instant, MissedTickBehavior, interval_at};

use super::keys::key_of;

/// How often a round hands over its next few objects.
const TICK: Duration = Duration::from_millis(100);

/// Every object of `store`, once per `period`, spread over it: a round
/// starts one period after the stream does (the start itself reconciles
/// everything), takes the objects cached then, and hands them over in
/// equal parts every [`TICK`] until the period is over. Objects cached
/// during a round are in the next one; an object gone from the cache by
/// its turn is skipped. A zero `period` never hands anything over.
pub(crate) fn paced<K>(store: Store<K>, period: Duration) -> BoxStream<'static, ObjectRef<K>>
where
    K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
{
    if period.is_zero() {
        return stream::pending().boxed();
    }
    let ticks = (period.as_nanos() / TICK.as_nanos()).max(1) as usize;
    let mut timer = interval_at(Instant::now() + period, TICK.min(period));
    // A busy runtime delays the trickle; it does not make up for it at once.
    timer.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let round = Round {
        store,
        ticks,
        left: VecDeque::new(),
        per_tick: 0,
        ticks_left: 0,
    };
    stream::unfold((round, timer), |(mut round, mut timer)| async move {
        timer.tick().await;
        let batch = round.next_batch();
        Some((stream::iter(batch), (round, timer)))
    })
    .flatten()
    .boxed()
}

/// One round's objects still to hand over.
struct Round<K: Resource<DynamicType = ()> + 'static> {
    store: Store<K>,
    /// Ticks in a period.
    ticks: usize,
    left: VecDeque<Arc<K>>,
    per_tick: usize,
    ticks_left: usize,
}

impl<K> Round<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    /// The objects of this tick; at a round's start, takes the cache anew.
    fn next_batch(&mut self) -> Vec<ObjectRef<K>> {
        if self.ticks_left == 0 {
            self.left = self.store.state().into();
            self.per_tick = self.left.len().div_ceil(self.ticks);
            self.ticks_left = self.ticks;
        }
        self.ticks_left -= 1;
        let take = self.per_tick.min(self.left.len());
        self.left
            .drain(..take)
            .map(|object| key_of(object.as_ref()))
            .filter(|key| self.store.get(key).is_some())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::runtime::reflector::{self, store::Writer};
    use kube::runtime::watcher;

    use super::*;

    fn map(name: &str) -> ConfigMap {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(name.into());
        cm.metadata.namespace = Some("ns".into());
        cm
    }

    fn filled(n: usize) -> (Store<ConfigMap>, Writer<ConfigMap>) {
        let (store, mut writer) = reflector::store();
        for i in 0..n {
            writer.apply_watcher_event(&watcher::Event::Apply(map(&format!("m{i}"))));
        }
        (store, writer)
    }

    /// What the stream hands over by `after` from now (the clock paused).
    async fn handed_within(
        stream: &mut BoxStream<'static, ObjectRef<ConfigMap>>,
        after: Duration,
    ) -> Vec<String> {
        let deadline = Instant::now() + after;
        let mut names = Vec::new();
        while let Ok(Some(key)) = tokio::time::timeout_at(deadline, stream.next()).await {
            names.push(key.name);
        }
        names
    }

    #[tokio::test(start_paused = true)]
    async fn nothing_in_the_first_period_then_every_object_once_per_period() {
        let (store, _writer) = filled(25);
        let mut s = paced(store, Duration::from_secs(1));
        assert!(
            handed_within(&mut s, Duration::from_millis(999))
                .await
                .is_empty()
        );
        let mut first = handed_within(&mut s, Duration::from_secs(1)).await;
        first.sort();
        let mut all: Vec<String> = (0..25).map(|i| format!("m{i}")).collect();
        all.sort();
        assert_eq!(first, all);
        let mut second = handed_within(&mut s, Duration::from_secs(1)).await;
        second.sort();
        assert_eq!(second, all);
    }

    #[tokio::test(start_paused = true)]
    async fn a_round_is_spread_over_its_period() {
        let (store, _writer) = filled(100);
        let mut s = paced(store, Duration::from_secs(1));
        let _ = handed_within(&mut s, Duration::from_millis(999)).await;
        // Ten ticks of ten: the first half of the period hands half.
        let half = handed_within(&mut s, Duration::from_millis(451)).await;
        assert_eq!(half.len(), 50, "{half:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn objects_gone_by_their_turn_are_skipped_and_new_ones_wait_a_round() {
        let (store, mut writer) = filled(10);
        let mut s = paced(store, Duration::from_secs(1));
        let _ = handed_within(&mut s, Duration::from_millis(999)).await;
        // The round has started with m0..m9; one not handed yet goes, m10
        // comes.
        let first_tick = handed_within(&mut s, Duration::from_millis(1)).await;
        assert_eq!(first_tick.len(), 1);
        let gone = if first_tick[0] == "m0" { "m1" } else { "m0" };
        writer.apply_watcher_event(&watcher::Event::Delete(map(gone)));
        writer.apply_watcher_event(&watcher::Event::Apply(map("m10")));
        let rest = handed_within(&mut s, Duration::from_millis(950)).await;
        assert_eq!(rest.len(), 8, "{rest:?}");
        assert!(!rest.contains(&gone.to_owned()) && !rest.contains(&"m10".to_owned()));
        let next = handed_within(&mut s, Duration::from_secs(1)).await;
        assert!(next.contains(&"m10".to_owned()), "{next:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_zero_period_hands_nothing_over() {
        let (store, _writer) = filled(3);
        let mut s = paced(store, Duration::ZERO);
        assert!(
            handed_within(&mut s, Duration::from_secs(3600))
                .await
                .is_empty()
        );
    }
}
