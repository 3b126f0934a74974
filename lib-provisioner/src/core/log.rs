//! How controller errors reach the log: a failing object is logged at warn
//! at most once a minute, its repeats at debug.

use tracing::warn;

/// Logs what a controller's stream yielded as an error.
pub(crate) fn log_controller_error<R, Q>(what: &str, e: &kube::runtime::controller::Error<R, Q>)
where
    R: std::error::Error + 'static,
    Q: std::error::Error + 'static,
{
    use kube::runtime::controller::Error as E;
    match e {
        // On the claim already (status, Events) and in the metrics; an
        // operator sees it too, once a minute per object at most.
        E::ReconcilerFailed(err, obj) => {
            let key = format!("{what}/{obj}");
            if LOG_LIMIT.allows(&key) {
                warn!(controller = what, object = %obj, error = %err, "reconcile failed; retrying with backoff (repeats of this object's failures are logged at debug for a minute)");
            } else {
                tracing::debug!(controller = what, object = %obj, error = %err, "reconcile failed")
            }
        }
        // Deleted between the trigger and the reconcile: nothing to do.
        E::ObjectNotFound(obj) => {
            tracing::debug!(controller = what, object = %obj, "object is gone")
        }
        other => warn!(controller = what, error = %other, "controller error"),
    }
}

/// At most one warning a minute per key.
struct LogLimit(std::sync::Mutex<std::collections::HashMap<String, std::time::Instant>>);

static LOG_LIMIT: std::sync::LazyLock<LogLimit> =
    std::sync::LazyLock::new(|| LogLimit(Default::default()));

impl LogLimit {
    const EVERY: std::time::Duration = std::time::Duration::from_secs(60);

    fn allows(&self, key: &str) -> bool {
        let mut last = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let now = std::time::Instant::now();
        if last.len() > 10_000 {
            last.retain(|_, at| now.duration_since(*at) < Self::EVERY);
        }
        match last.get(key) {
            Some(at) if now.duration_since(*at) < Self::EVERY => false,
            _ => {
                last.insert(key.to_owned(), now);
                true
            }
        }
    }
}
