//! The sweep's effects: every `interval`, while leading and once every
//! family can see, one round ([`super::round::observe`]), then the
//! removals it decided, one log line and one counter per action, and the
//! gauges.

use std::collections::BTreeSet;
use std::sync::Arc;

use tokio::sync::watch;
use tracing::{info, warn};

use crate::core::metrics::Metrics;
use crate::core::provisioner::{InventoryRequest, OrphanRemoval, Provisioner};
use crate::core::runtime::Runtime;

use super::SweepSettings;
use super::plan::{Decision, MadeKey, Planned, Sightings, SweepPlan};
use super::round::observe;
use super::source::SweepSource;

/// What the loop keeps from one round to the next.
#[derive(Default)]
struct Memory {
    /// When each orphan was first seen orphaned.
    seen: Sightings,
    /// Orphans already logged (once each, not every round).
    logged: BTreeSet<MadeKey>,
    /// Classes whose store could not be listed, already logged.
    unswept: BTreeSet<String>,
}

/// Sweeps until `stop`; a replica that does not lead only waits (and
/// forgets its sightings: a new leader starts every grace afresh).
pub(crate) async fn run<P: Provisioner>(
    settings: SweepSettings,
    runtime: Runtime,
    provisioner: Arc<P>,
    sources: Vec<Arc<dyn SweepSource>>,
    mut stop: watch::Receiver<bool>,
    leading: watch::Receiver<bool>,
) {
    let mut memory = Memory::default();
    loop {
        tokio::select! {
            () = tokio::time::sleep(settings.interval) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        if !*leading.borrow() || runtime.ensure_leading().is_err() {
            memory = Memory::default();
            continue;
        }
        match observe(
            &runtime,
            provisioner.as_ref(),
            &sources,
            &memory.seen,
            settings.grace,
        )
        .await
        {
            Ok(plan) => act(&runtime, provisioner.as_ref(), plan, &mut memory).await,
            Err(why) => info!(
                act = "sweep-skipped",
                "not sweeping the stores this round, nothing is removed: {why}"
            ),
        }
    }
}

/// Carries `plan` out: removals, logs, gauges; updates `memory`.
async fn act<P: Provisioner>(
    runtime: &Runtime,
    provisioner: &P,
    plan: SweepPlan,
    memory: &mut Memory,
) {
    let metrics = &runtime.metrics;
    metrics.swept(&plan);
    let unswept = log_not_swept(&plan, &memory.unswept);
    let mut seen = plan.sightings.clone();
    let mut logged = BTreeSet::new();
    for item in &plan.items {
        let key = (
            item.made.store.clone(),
            item.made.kind,
            item.made.name.clone(),
        );
        if item.decision.is_orphan() {
            if !memory.logged.contains(&key) {
                log_found(item);
            }
            logged.insert(key.clone());
        }
        if !item.decision.acts() {
            continue;
        }
        if remove(runtime, provisioner, item, metrics).await {
            seen.remove(&key);
            logged.remove(&key);
        }
    }
    // What was not listed again is forgotten: sightings only of things
    // still orphaned, logs only of orphans still there.
    memory.seen = seen;
    memory.logged = logged;
    memory.unswept = unswept;
}

/// Logs each class not swept once (until it is swept again); returns them.
fn log_not_swept(plan: &SweepPlan, logged: &BTreeSet<String>) -> BTreeSet<String> {
    let mut unswept = BTreeSet::new();
    for skipped in &plan.not_swept {
        let class = skipped.class.to_string();
        if !logged.contains(&class) {
            info!(act = "sweep-not-swept", %class, "the store of this class is not swept: {}", skipped.reason);
        }
        unswept.insert(class);
    }
    unswept
}

/// Logs an orphan found (once, while it stays one).
fn log_found(item: &Planned) {
    let m = &item.made;
    match &item.decision {
        Decision::ReportBucket => info!(
            act = "sweep-report", store = %m.store, bucket = %m.name, class = %item.class,
            "bucket has no live owner; kept: no reclaim policy Delete is recorded with it in the store (delete it by hand if it should go)"
        ),
        Decision::Waiting { remaining } => info!(
            act = "sweep-orphan", store = %m.store, kind = %m.kind, name = %m.name, class = %item.class,
            "found without a live owner; removed unless an owner appears within {}s", remaining.as_secs()
        ),
        _ => {}
    }
}

/// One removal; whether it succeeded.
async fn remove<P: Provisioner>(
    runtime: &Runtime,
    provisioner: &P,
    item: &Planned,
    metrics: &Metrics,
) -> bool {
    let m = &item.made;
    if runtime.ensure_leading().is_err() {
        return false;
    }
    let request = InventoryRequest::new(&item.class.name, item.class.parameters.clone())
        .with_class_kind(&item.class.kind);
    let removal = OrphanRemoval::new(&request, m.clone());
    match runtime
        .timed("remove_orphan", provisioner.remove_orphan(&removal))
        .await
    {
        Ok(()) => {
            info!(
                act = "sweep-removed", store = %m.store, kind = %m.kind, name = %m.name, class = %item.class,
                "removed: no live owner for longer than the grace period, in two sweeps"
            );
            metrics.sweep_removal(m.kind, true);
            true
        }
        Err(e) => {
            warn!(
                act = "sweep-remove-failed", store = %m.store, kind = %m.kind, name = %m.name, class = %item.class,
                "could not remove an orphan (retried next sweep): {}", e.message()
            );
            metrics.sweep_removal(m.kind, false);
            false
        }
    }
}
