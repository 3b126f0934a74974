//! Which claims a pass is working on right now.

use std::sync::{Arc, Mutex};

/// UIDs of claims a claim pass is working on. The ObjectBucket reconciler
/// leaves an ObjectBucket alone while its claim's pass runs: a pass whose
/// claim vanished may still be creating the bucket the ObjectBucket names,
/// and tearing down before it finishes would miss that bucket.
#[derive(Default)]
pub(crate) struct InFlight(Arc<Mutex<std::collections::HashSet<String>>>);

/// Marks a claim's pass as running until dropped.
pub(crate) struct InFlightGuard {
    set: Arc<Mutex<std::collections::HashSet<String>>>,
    uid: String,
}

impl InFlight {
    pub(crate) fn enter(&self, uid: &str) -> InFlightGuard {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(uid.to_owned());
        InFlightGuard {
            set: self.0.clone(),
            uid: uid.to_owned(),
        }
    }

    pub(crate) fn contains(&self, uid: &str) -> bool {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(uid)
    }
}

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        self.set
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.uid);
    }
}
