//! The OBC family's gauge: `obc_claims`, the cached claims by phase.

use std::collections::BTreeMap;

use kube::runtime::reflector::Store;

use crate::core::metrics::CacheGauge;
use crate::obc::api::{ClaimPhase, ObjectBucketClaim};

/// Counts the claims in the claim cache by phase at scrape time (every
/// phase shown, at zero too).
pub(crate) struct ClaimPhases(pub Store<ObjectBucketClaim>);

impl CacheGauge for ClaimPhases {
    fn describe(&self) -> (&'static str, &'static str) {
        ("obc_claims", "Claims in the cache by phase")
    }

    fn count(&self) -> (&'static str, BTreeMap<&'static str, i64>) {
        let mut counts: BTreeMap<&'static str, i64> = [
            ClaimPhase::Pending,
            ClaimPhase::Bound,
            ClaimPhase::Released,
            ClaimPhase::Failed,
        ]
        .iter()
        .map(|p| (p.as_str(), 0))
        .collect();
        for claim in self.0.state() {
            let phase = claim
                .status
                .as_ref()
                .and_then(|s| s.phase)
                .unwrap_or(ClaimPhase::Pending);
            *counts.entry(phase.as_str()).or_default() += 1;
        }
        ("phase", counts)
    }
}
