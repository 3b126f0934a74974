//! Showing a wait or a refusal: `status.error` on the object (with the
//! time), and an Event on the user's object, once per new message.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType};
use kube::{Api, Resource};
use serde_json::json;
use tracing::warn;

use crate::core::error::{Error, is_status};
use crate::core::provisioner::ProvisionError;
use crate::cosi::api::{Bucket, BucketAccess, BucketClaim, TimestampedError};
use crate::cosi::context::CosiContext;
use crate::cosi::writes::{self, Object};

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

/// A failed provisioner call as a halt, `operation: message` (for
/// `map_err`): retryable errors wait, the rest refuse.
pub(crate) fn provisioner_halt(operation: &'static str) -> impl FnOnce(ProvisionError) -> Halt {
    move |err| {
        let message = format!("{operation}: {}", err.message());
        if err.is_retryable() {
            Halt::Wait(message)
        } else {
            Halt::Refuse(message)
        }
    }
}

/// An object whose status shows a halt: `status.error` beside `readyToUse`.
pub(crate) trait Shown {
    /// The error the status shows now, and its ready flag (both `None`
    /// without a status).
    fn shown(&self) -> (Option<&TimestampedError>, Option<bool>);
}

/// Every kind a pass runs on has the two status fields.
macro_rules! shown_in_status {
    ($($kind:ty),*) => {$(
        impl Shown for $kind {
            fn shown(&self) -> (Option<&TimestampedError>, Option<bool>) {
                let status = self.status.as_ref();
                (status.and_then(|s| s.error.as_ref()), status.map(|s| s.ready_to_use))
            }
        }
    )*};
}
shown_in_status!(Bucket, BucketClaim, BucketAccess);

/// Shows `halt` in `obj`'s status and, when the status did not show it
/// yet, as the Event `(on, note)`. Says whether it wrote the status.
pub(crate) async fn show_halt<P, K: Object + Shown>(
    ctx: &CosiContext<P>,
    api: &Api<K>,
    obj: &K,
    halt: &Halt,
    action: &'static str,
    (on, note): (ObjectReference, String),
) -> Result<bool, Error> {
    let wrote = write_error(api, obj, halt.message(), action).await?;
    if wrote {
        ctx.event(&on, halt.is_refusal(), halt.reason(), &note)
            .await;
    }
    Ok(wrote)
}

/// Writes `message` into the object's `status.error` unless it shows it
/// already. Says whether it wrote: only a new message deserves an Event.
/// An object deleted meanwhile has nothing to show it on: not written.
async fn write_error<K: Object + Shown>(
    api: &Api<K>,
    obj: &K,
    message: &str,
    action: &'static str,
) -> Result<bool, Error> {
    let (shown, ready) = obj.shown();
    if shows(shown, message) {
        return Ok(false);
    }
    let patch = error_patch(message, ready);
    match writes::patch_status(api, obj, &patch, action).await {
        Err(Error::Kube { source, .. }) if is_status(&source, 404) => Ok(false),
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
        if let Err(e) = self.events.publish(&event, on).await {
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
