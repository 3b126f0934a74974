//! The sweep's decisions as a pure function: what each class's store
//! listed, the live owners, and when each orphan was first seen go in; a
//! decision per thing the stores hold comes out ([`plan`]).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use crate::core::provisioner::{Made, MadeKind, ReclaimPolicy};

use super::source::SweepClass;

/// What one class's [`inventory`](crate::core::provisioner::Provisioner::inventory)
/// returned: the things it lists, or why it could not list (the message).
#[derive(Clone, Debug)]
pub struct Listing {
    /// The class listed through.
    pub class: SweepClass,
    /// What the store holds, or why the provisioner could not say.
    pub result: Result<Vec<Made>, String>,
}

/// One thing a store holds, by the only key the sweep trusts: which store,
/// what kind, which name.
pub type MadeKey = (String, MadeKind, String);

/// When each orphan was first seen orphaned: kept by the sweep from one
/// round to the next, and replaced by every [`SweepPlan::sightings`].
pub type Sightings = BTreeMap<MadeKey, Instant>;

/// What the sweep does with one thing a store holds.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case", tag = "decision")]
#[non_exhaustive]
pub enum Decision {
    /// Its owner lives: kept.
    Owned,
    /// No live owner, but not yet past the grace period, or seen orphaned
    /// in this round only: looked at again in the next one.
    Waiting {
        /// How much of the grace period is left.
        #[serde(rename = "remaining_seconds", serialize_with = "seconds")]
        remaining: Duration,
    },
    /// A principal or policy orphaned past its grace period, seen so in an
    /// earlier round too: removed.
    Remove,
    /// A bucket without a live owner and without a recorded `Delete`:
    /// reported, kept.
    ReportBucket,
    /// A bucket without a live owner whose store records reclaim policy
    /// `Delete`, past its grace period: deleted.
    DeleteBucket,
}

fn seconds<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(d.as_secs())
}

impl Decision {
    /// Whether the sweep acts on it now (a removal or a deletion).
    pub fn acts(&self) -> bool {
        matches!(self, Self::Remove | Self::DeleteBucket)
    }

    /// Whether it has no live owner.
    pub fn is_orphan(&self) -> bool {
        !matches!(self, Self::Owned)
    }
}

/// One thing a store holds and what the sweep does with it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Planned {
    /// As the store listed it.
    #[serde(flatten)]
    pub made: Made,
    /// The class it was (first) listed through: a removal goes to its store.
    pub class: SweepClass,
    /// What happens to it.
    #[serde(flatten)]
    pub decision: Decision,
}

/// A class whose store could not be listed, and why.
#[derive(Clone, Debug, serde::Serialize)]
pub struct NotSwept {
    /// The class.
    pub class: SweepClass,
    /// The provisioner's message.
    pub reason: String,
}

/// The sweep's decisions for one round.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct SweepPlan {
    /// One per thing the stores hold, deduplicated by store, kind and name.
    pub items: Vec<Planned>,
    /// Classes whose store was listed.
    pub swept: Vec<SweepClass>,
    /// Classes whose provisioner could not list their store.
    pub not_swept: Vec<NotSwept>,
    /// When each orphan still waiting (or acted on now) was first seen:
    /// the next round's input.
    #[serde(skip)]
    pub sightings: Sightings,
}

impl SweepPlan {
    /// How many orphans each store holds, by kind.
    pub fn orphans(&self) -> BTreeMap<(String, MadeKind), i64> {
        let mut counts = BTreeMap::new();
        for item in self.items.iter().filter(|i| i.decision.is_orphan()) {
            *counts
                .entry((item.made.store.clone(), item.made.kind))
                .or_default() += 1;
        }
        counts
    }
}

/// Decides, for everything `listings` hold (deduplicated by store, kind and
/// name; the first class listing a thing is the one it is removed
/// through), whether its owner is among `live`; an orphan is removed only
/// when it was already orphaned in an earlier round (`seen`) and `grace`
/// has passed since, so that two observations, `grace` apart, stand behind
/// every removal. Buckets are only reported unless their store recorded
/// `Delete`.
pub fn plan(
    listings: Vec<Listing>,
    live: &BTreeSet<String>,
    seen: &Sightings,
    now: Instant,
    grace: Duration,
) -> SweepPlan {
    let mut out = SweepPlan::default();
    let mut found: BTreeMap<MadeKey, (Made, SweepClass)> = BTreeMap::new();
    for listing in listings {
        match listing.result {
            Err(reason) => out.not_swept.push(NotSwept {
                class: listing.class,
                reason,
            }),
            Ok(made) => {
                out.swept.push(listing.class.clone());
                for m in made {
                    merge(&mut found, m, &listing.class);
                }
            }
        }
    }
    for (key, (made, class)) in found {
        let decision = decide(&made, live, seen.get(&key).copied(), now, grace);
        if decision.is_orphan() && needs_sighting(&made) {
            let since = seen.get(&key).copied().unwrap_or(now);
            out.sightings.insert(key, since);
        }
        out.items.push(Planned {
            made,
            class,
            decision,
        });
    }
    out
}

/// Adds `made` unless its store, kind and name are there already; a second
/// listing naming a live-looking owner the first did not is kept (the
/// owner counts, whichever class said it).
fn merge(found: &mut BTreeMap<MadeKey, (Made, SweepClass)>, made: Made, class: &SweepClass) {
    let key = (made.store.clone(), made.kind, made.name.clone());
    match found.get_mut(&key) {
        Some((kept, _)) => {
            if kept.owner_uid.is_none() {
                kept.owner_uid = made.owner_uid;
            }
            if kept.reclaim.is_none() {
                kept.reclaim = made.reclaim;
            }
        }
        None => {
            found.insert(key, (made, class.clone()));
        }
    }
}

/// Whether an orphan's first sighting is remembered: everything that can
/// be acted on (principals, policies, buckets recorded `Delete`).
fn needs_sighting(made: &Made) -> bool {
    made.kind != MadeKind::Bucket || made.reclaim == Some(ReclaimPolicy::Delete)
}

fn decide(
    made: &Made,
    live: &BTreeSet<String>,
    first_seen: Option<Instant>,
    now: Instant,
    grace: Duration,
) -> Decision {
    if made
        .owner_uid
        .as_ref()
        .is_some_and(|uid| live.contains(uid))
    {
        return Decision::Owned;
    }
    if !needs_sighting(made) {
        return Decision::ReportBucket;
    }
    // Seen orphaned for the first time now: never acted on in the same
    // round, whatever the grace (a grant racing this round is not lost).
    let Some(since) = first_seen.filter(|since| *since < now) else {
        return Decision::Waiting { remaining: grace };
    };
    let waited = now.saturating_duration_since(since);
    if waited < grace {
        return Decision::Waiting {
            remaining: grace - waited,
        };
    }
    match made.kind {
        MadeKind::Bucket => Decision::DeleteBucket,
        _ => Decision::Remove,
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
