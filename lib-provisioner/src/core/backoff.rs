//! How long a failed object waits before its next pass: a capped
//! exponential backoff per object, reset on success, and the one rule both
//! families' error policies follow.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};
use kube::Resource;
use kube::runtime::reflector::ObjectRef;
use tracing::debug;

use crate::core::error::Error;

/// Per-object capped exponential backoff (with jitter), reset on success.
pub(crate) struct Backoffs {
    builder: ExponentialBuilder,
    state: Mutex<HashMap<String, ExponentialBackoff>>,
}

impl Backoffs {
    pub(crate) fn new(min: Duration, max: Duration) -> Self {
        Self {
            builder: ExponentialBuilder::default()
                .with_min_delay(min)
                .with_max_delay(max)
                .with_jitter()
                .without_max_times(),
            state: Mutex::new(HashMap::new()),
        }
    }

    /// The next delay for the object of `key` (its UID: a claim recreated
    /// with the same name starts afresh).
    pub(crate) fn next(&self, key: &str) -> Duration {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state
            .entry(key.to_owned())
            .or_insert_with(|| self.builder.build())
            .next()
            .unwrap_or(Duration::from_secs(300))
    }

    pub(crate) fn reset(&self, key: &str) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.remove(key);
    }

    /// Forgets every object's backoff: after an outage of the API, delays
    /// grown during it say nothing about what comes next.
    pub(crate) fn reset_all(&self) {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }
}

/// The key of an object's backoff: its UID, else (never, for objects read
/// from the API) its reference.
pub(crate) fn backoff_key<K: Resource<DynamicType = ()>>(obj: &K) -> String {
    obj.meta()
        .uid
        .clone()
        .unwrap_or_else(|| ObjectRef::from_obj(obj).to_string())
}

/// The delay after a failed pass of `obj`: conflicts retry at once (the
/// next pass re-reads), a provisioner's `retry_after` is honoured as a
/// floor, everything else backs off per object.
pub(crate) fn retry_delay<K>(obj: &K, error: &Error, backoff: &Backoffs) -> Duration
where
    K: Resource<DynamicType = ()>,
{
    let key = backoff_key(obj);
    let delay = match error {
        Error::Conflict { .. } => Duration::from_millis(200),
        Error::Provisioner { source, .. } if source.retry_after().is_some() => source
            .retry_after()
            .unwrap_or_default()
            .max(backoff.next(&key)),
        _ => backoff.next(&key),
    };
    debug!(object = %ObjectRef::from_obj(obj), error = %error, ?delay, "reconcile failed; retrying later");
    delay
}
