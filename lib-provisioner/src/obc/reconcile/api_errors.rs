//! Since when each claim's passes fail on Kubernetes API errors.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use crate::obc::api::ObjectBucketClaim;

/// Since when each claim (by UID) has failed on Kubernetes API errors: one
/// that lasts past [`ApiErrors::GRACE`] is shown on the claim (an RBAC
/// verb missing, say), a passing one (a restart, a conflict) is not.
#[derive(Default)]
pub(crate) struct ApiErrors(Mutex<HashMap<String, std::time::Instant>>);

impl ApiErrors {
    /// How long API errors may last before the claim shows them.
    pub(crate) const GRACE: Duration = Duration::from_secs(10);

    /// Records a failure; `true` once failures have lasted past the grace.
    pub(crate) fn failed(&self, claim: &ObjectBucketClaim) -> bool {
        let Some(uid) = &claim.metadata.uid else {
            return false;
        };
        let mut since = self.0.lock().unwrap_or_else(|p| p.into_inner());
        since
            .entry(uid.clone())
            .or_insert_with(std::time::Instant::now)
            .elapsed()
            >= Self::GRACE
    }

    pub(crate) fn clear(&self, claim: &ObjectBucketClaim) {
        if let Some(uid) = &claim.metadata.uid {
            self.0.lock().unwrap_or_else(|p| p.into_inner()).remove(uid);
        }
    }
}
