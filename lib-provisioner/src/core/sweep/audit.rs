//! The read-only audit: what the sweep would decide now, from the API
//! rather than caches, removing nothing ([`Audit`]).

use std::fmt::{self, Write as _};
use std::sync::Arc;
use std::time::Duration;

use crate::core::metrics::Metrics;
use crate::core::provisioner::Provisioner;
use crate::core::runtime::Runtime;

use super::plan::{Decision, Sightings, SweepPlan};
use super::round::observe;
use super::source::SweepSource;

/// The audit could not read what the cluster holds.
#[derive(Debug, thiserror::Error)]
#[error(
    "the audit could not read the classes and owners from the Kubernetes API ({0}): check the kubeconfig, and that its identity may list what the provisioner's RBAC lets it list"
)]
pub struct AuditError(pub String);

/// What the sweep would do now with everything the stores hold, each
/// orphan as if first seen now (the sweep removes it after the grace
/// period, if it is still orphaned then).
#[derive(Clone, Debug, serde::Serialize)]
pub struct Audit {
    /// The grace period an orphan waits before the sweep removes it.
    pub grace_seconds: u64,
    /// The decisions.
    #[serde(flatten)]
    pub plan: SweepPlan,
}

/// Lists every class's store and plans, removing nothing.
pub(crate) async fn audit<P: Provisioner>(
    provisioner: &P,
    sources: &[Arc<dyn SweepSource>],
    timeout: Duration,
    grace: Duration,
) -> Result<Audit, AuditError> {
    let runtime = Runtime::standalone(timeout, Arc::new(Metrics::new()));
    let plan = observe(&runtime, provisioner, sources, &Sightings::new(), grace)
        .await
        .map_err(AuditError)?;
    Ok(Audit {
        grace_seconds: grace.as_secs(),
        plan,
    })
}

impl Audit {
    /// Whether any store holds something without a live owner.
    pub fn has_orphans(&self) -> bool {
        self.plan.items.iter().any(|i| i.decision.is_orphan())
    }
}

/// What the sweep does with it, in words.
fn said(decision: &Decision) -> &'static str {
    match decision {
        Decision::Owned => "owned",
        Decision::Waiting { .. } | Decision::Remove => "orphan: removed after the grace period",
        Decision::ReportBucket => "orphan bucket: reported, kept (no Delete recorded)",
        Decision::DeleteBucket => "orphan bucket: deleted after the grace period",
    }
}

/// A table: one line per thing the stores hold, then the classes not swept.
impl fmt::Display for Audit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{:<10} {:<36} {:<28} {:<38} {:<30} WHAT THE SWEEP DOES",
            "KIND", "NAME", "STORE", "OWNER UID", "CLASS"
        );
        for item in &self.plan.items {
            let m = &item.made;
            let _ = writeln!(
                out,
                "{:<10} {:<36} {:<28} {:<38} {:<30} {}",
                m.kind.to_string(),
                m.name,
                m.store,
                m.owner_uid.as_deref().unwrap_or("-"),
                item.class.to_string(),
                said(&item.decision),
            );
        }
        for skipped in &self.plan.not_swept {
            let _ = writeln!(out, "not swept: {}: {}", skipped.class, skipped.reason);
        }
        let orphans = self
            .plan
            .items
            .iter()
            .filter(|i| i.decision.is_orphan())
            .count();
        let _ = write!(
            out,
            "{} listed, {orphans} without a live owner (grace period {}s); nothing was removed",
            self.plan.items.len(),
            self.grace_seconds
        );
        f.write_str(&out)
    }
}
