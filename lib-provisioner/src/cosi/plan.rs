//! What a COSI planner answers, for every kind.

use std::time::Duration;

/// The next thing to do for one object.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Next<S> {
    /// Take this step (one write or one provisioner call), then plan again.
    Step(S),
    /// Something outside the object must happen first; retried with
    /// backoff. The message says what (status `error`, an Event).
    Wait(String),
    /// A wait in the normal course of things (a driver's first answer
    /// takes a moment): not shown, so that the user's object is not
    /// written twice for a wait nobody needs to know about. Looked at
    /// again after this long, or on the next event; a wait that outlasts
    /// it is a [`Next::Wait`].
    Pending(Duration),
    /// The object cannot be served as written; the message says how to
    /// fix it (status `error`, a Warning Event). Retried slowly.
    Refuse(String),
    /// Nothing left to do.
    Done,
}

/// Whether `finalizers` holds COSI's protection finalizer.
pub(crate) fn has_finalizer(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> bool {
    meta.finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|f| f == super::api::FINALIZER))
}

/// Whether an annotation is present.
pub(crate) fn has_annotation(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    key: &str,
) -> bool {
    meta.annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(key))
}
