//! The Events the controllers send, at the level the application asks for.
//!
//! Every transition and every problem is an Event on the object it is
//! about, with the same message as the object's status. An application at
//! scale may keep only the Warnings ([`EventLevel::WarningsOnly`]): each
//! Normal Event is one apiserver write (and one etcd object for an hour),
//! the `Bound` of a new claim one of its eight.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder};

/// Which Events the controllers send
/// ([`ControllerBuilder::events`](crate::ControllerBuilder::events)).
///
/// ```
/// use lib_provisioner::EventLevel;
/// assert_eq!(EventLevel::default(), EventLevel::All);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum EventLevel {
    /// Every transition (`Bound`, `BucketDeleted`, `Released`, `Updated`,
    /// `TakenOver`, ...) and every problem: what `kubectl describe` shows.
    #[default]
    All,
    /// Only the Warnings: problems a user must act on, and repairs of what
    /// someone changed. The Normal ones are left out; the objects' status
    /// and conditions still say what they would have said. A new claim
    /// then costs 7 writes instead of 8, a deletion 3 instead of 4.
    WarningsOnly,
}

/// Publishes Events through one `Recorder`, leaving out those `level` does
/// not ask for.
pub(crate) struct Events {
    recorder: Recorder,
    level: EventLevel,
}

impl Events {
    pub(crate) fn new(recorder: Recorder, level: EventLevel) -> Self {
        Self { recorder, level }
    }

    /// Publishes `event` on `on`, unless the level leaves it out.
    pub(crate) async fn publish(
        &self,
        event: &Event,
        on: &ObjectReference,
    ) -> Result<(), kube::Error> {
        if !self.sends(event.type_) {
            return Ok(());
        }
        self.recorder.publish(event, on).await
    }

    fn sends(&self, type_: EventType) -> bool {
        match self.level {
            EventLevel::All => true,
            EventLevel::WarningsOnly => type_ == EventType::Warning,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Events through a client whose apiserver refuses every connection:
    /// a publish that reaches it fails.
    fn events(level: EventLevel) -> Events {
        let config = kube::Config::new("http://127.0.0.1:1".parse().expect("url"));
        let client = kube::Client::try_from(config).expect("client");
        let reporter = kube::runtime::events::Reporter {
            controller: "test".into(),
            instance: None,
        };
        Events::new(Recorder::new(client, reporter), level)
    }

    fn event(type_: EventType) -> Event {
        Event {
            type_,
            reason: "Bound".into(),
            note: None,
            action: "Provision".into(),
            secondary: None,
        }
    }

    fn claim() -> ObjectReference {
        ObjectReference {
            api_version: Some("objectbucket.io/v1alpha1".into()),
            kind: Some("ObjectBucketClaim".into()),
            name: Some("photos".into()),
            namespace: Some("team".into()),
            ..ObjectReference::default()
        }
    }

    #[tokio::test]
    async fn warnings_only_sends_the_warnings_and_nothing_else() {
        let warnings = events(EventLevel::WarningsOnly);
        // Left out: no request, so the refused connection is never seen.
        warnings
            .publish(&event(EventType::Normal), &claim())
            .await
            .expect("a Normal Event is not sent");
        assert!(
            warnings
                .publish(&event(EventType::Warning), &claim())
                .await
                .is_err(),
            "a Warning is sent"
        );
        assert!(
            events(EventLevel::All)
                .publish(&event(EventType::Normal), &claim())
                .await
                .is_err(),
            "with every Event, a Normal one is sent"
        );
    }
}
