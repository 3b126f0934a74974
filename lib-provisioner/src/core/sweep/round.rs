//! One round's observation, shared by the sweep and the audit: what the
//! families see, what each class's store lists, what the families see
//! afterwards, and the plan from all three.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::core::provisioner::{InventoryRequest, Provisioner};
use crate::core::runtime::Runtime;

use super::plan::{Listing, Sightings, SweepPlan, plan};
use super::source::{Snapshot, SweepSource};

/// Every family's snapshot merged; the first family that cannot see makes
/// the whole round wait (its message says which).
pub(crate) async fn snapshot(sources: &[Arc<dyn SweepSource>]) -> Result<Snapshot, String> {
    let mut all = Snapshot::default();
    for source in sources {
        let seen = source
            .snapshot()
            .await
            .map_err(|why| format!("{}: {why}", source.family()))?;
        all = all.merge(seen);
    }
    Ok(all)
}

/// Lists every class's store (each call under the provisioner timeout)
/// and plans. The owners are read before and after the listings and
/// counted together, so that a thing made for an owner while the store
/// was listed finds it live.
pub(crate) async fn observe<P: Provisioner>(
    runtime: &Runtime,
    provisioner: &P,
    sources: &[Arc<dyn SweepSource>],
    seen: &Sightings,
    grace: Duration,
) -> Result<SweepPlan, String> {
    let before = snapshot(sources).await?;
    let mut listings = Vec::with_capacity(before.classes.len());
    for class in &before.classes {
        let req = InventoryRequest::new(&class.name, class.parameters.clone())
            .with_class_kind(&class.kind)
            .with_owners(before.owners.clone());
        let result = runtime
            .timed("inventory", provisioner.inventory(&req))
            .await
            .map_err(|e| e.message().to_owned());
        listings.push(Listing {
            class: class.clone(),
            result,
        });
    }
    let after = snapshot(sources).await?;
    let mut live = before.owners;
    live.extend(after.owners);
    Ok(plan(listings, &live, seen, Instant::now(), grace))
}

#[cfg(test)]
#[path = "round_tests.rs"]
mod tests;
