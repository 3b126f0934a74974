//! Showing a wait or a refusal: `status.error` on the object (with the
//! time), and an Event on the user's object, once per new message.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Resource;
use kube::runtime::events::{Event, EventType};
use serde_json::json;
use tracing::warn;

use kube::Api;

use super::api::TimestampedError;
use super::context::CosiContext;
use super::writes::{self, Object};
use crate::core::error::Error;

/// Writes `message` into the object's `status.error` (the object's
/// current error `shown` and `ready` flag given) unless it shows it
/// already. Says whether it wrote: only a new message deserves an Event.
/// An object deleted meanwhile has nothing to show it on: not written.
pub(crate) async fn write_error<K: Object>(
    api: &Api<K>,
    name: &str,
    (shown, ready): (Option<&TimestampedError>, Option<bool>),
    message: &str,
    action: &'static str,
) -> Result<bool, Error> {
    if shows(shown, message) {
        return Ok(false);
    }
    match writes::patch_status(api, name, &error_patch(message, ready), action).await {
        Err(Error::Kube { source, .. }) if crate::core::error::is_status(&source, 404) => Ok(false),
        other => other.map(|()| true),
    }
}

/// Whether a status already shows `message`.
fn shows(error: Option<&TimestampedError>, message: &str) -> bool {
    error.and_then(|e| e.message.as_deref()) == Some(message)
}

/// The merge patch that sets `status.error` (and `readyToUse` when the
/// status has none yet: it is required).
fn error_patch(message: &str, ready: Option<bool>) -> serde_json::Value {
    json!({"status": {
        "readyToUse": ready.unwrap_or(false),
        "error": TimestampedError::now(message),
    }})
}

/// A reference to an object, for its Events.
pub(crate) fn reference<K: Resource<DynamicType = ()>>(obj: &K) -> ObjectReference {
    obj.object_ref(&())
}

impl<P> CosiContext<P> {
    /// Publishes an Event on `on`. Failing to publish never fails the
    /// reconcile: the status carries the same message.
    pub(crate) async fn event(
        &self,
        on: &ObjectReference,
        warning: bool,
        reason: &str,
        note: &str,
    ) {
        let event = Event {
            type_: if warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: reason.to_owned(),
            note: Some(truncate(note, 1000)),
            action: "Reconcile".to_owned(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&event, on).await {
            warn!(object = ?on.name, error = %e, "could not publish event");
        }
    }
}

fn truncate(s: &str, max: usize) -> String {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_owned()
}

/// What a pass stopped on, for the caller's status write.
pub(crate) enum Halt {
    Wait(String),
    Refuse(String),
}

impl Halt {
    pub(crate) fn message(&self) -> &str {
        match self {
            Self::Wait(m) | Self::Refuse(m) => m,
        }
    }

    pub(crate) fn is_refusal(&self) -> bool {
        matches!(self, Self::Refuse(_))
    }

    /// The reason of its Event.
    pub(crate) fn reason(&self) -> &'static str {
        match self {
            Self::Wait(_) => "Waiting",
            Self::Refuse(_) => "Refused",
        }
    }
}

/// A provisioner error as a halt: retryable ones wait, the rest refuse.
pub(crate) fn provisioner_halt(
    operation: &str,
    err: &crate::core::provisioner::ProvisionError,
) -> Halt {
    let message = format!("{operation}: {}", err.message());
    if err.is_retryable() {
        Halt::Wait(message)
    } else {
        Halt::Refuse(message)
    }
}

/// When to look at a halted object again: refusals slowly, waits with the
/// object's backoff.
pub(crate) fn retry_after<P>(ctx: &CosiContext<P>, key: &str, halt: &Halt) -> std::time::Duration {
    if halt.is_refusal() {
        super::context::REFUSED_RETRY
    } else {
        ctx.backoff.next(key)
    }
}
