//! A pass's own object as its last write answered: the copy the next round
//! plans on, instead of a GET ([`crate::cosi::fresh`] says where else a
//! pass reads).
//!
//! A PATCH answers with the object as stored after it: what a GET right
//! after would return, unless another writer came in between; then the
//! next write, guarded by this copy's resourceVersion, is refused (409)
//! and the round after it reads with a GET, as after any conflict. So the
//! answer is as safe to plan on as the GET it saves.
//!
//! The slot is task-local: [`scope`] opens it for one pass and one object
//! (by UID), every merge patch offers its answer ([`offer`], kept only if
//! it is that object), and the pass takes it after a step ([`take`]).
//! Writes outside a pass (none today) offer into nothing.

use std::any::Any;
use std::cell::RefCell;

use kube::Resource;

tokio::task_local! {
    static ANSWER: RefCell<Slot>;
}

/// The object a pass is about, and its last answer.
struct Slot {
    uid: String,
    answer: Option<Box<dyn Any + Send>>,
}

/// Runs `pass` with a slot for answers about the object of `uid`.
pub(crate) async fn scope<F: Future>(uid: Option<String>, pass: F) -> F::Output {
    let slot = Slot {
        uid: uid.unwrap_or_default(),
        answer: None,
    };
    ANSWER.scope(RefCell::new(slot), pass).await
}

/// Keeps `answer` if it is the pass's own object (replacing an earlier
/// one); anything else is dropped.
pub(crate) fn offer<K: Resource + Send + 'static>(answer: K) {
    let uid = answer.meta().uid.clone();
    let _outside_a_pass = ANSWER.try_with(|slot| {
        let mut slot = slot.borrow_mut();
        if !slot.uid.is_empty() && uid.as_deref() == Some(slot.uid.as_str()) {
            slot.answer = Some(Box::new(answer));
        }
    });
}

/// The last answer kept since the previous take, if it still shows the
/// object: one whose last finalizer the write removed is gone (the next
/// round's GET says so, and the pass forgets it).
pub(crate) fn take<K: Resource + 'static>() -> Option<K> {
    let answer = ANSWER
        .try_with(|slot| slot.borrow_mut().answer.take())
        .ok()
        .flatten()?;
    let object = *answer.downcast::<K>().ok()?;
    let meta = object.meta();
    let gone =
        meta.deletion_timestamp.is_some() && meta.finalizers.as_ref().is_none_or(Vec::is_empty);
    (!gone).then_some(object)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

    use super::*;

    fn object(uid: &str, rv: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                uid: Some(uid.into()),
                resource_version: Some(rv.into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn only_the_own_objects_last_answer_is_taken_once() {
        scope(Some("own".into()), async {
            offer(object("own", "1"));
            offer(object("other", "2"));
            offer(object("own", "3"));
            let taken = take::<ConfigMap>().expect("an answer");
            assert_eq!(taken.metadata.resource_version.as_deref(), Some("3"));
            assert!(take::<ConfigMap>().is_none(), "taken once");
            offer(object("other", "4"));
            assert!(take::<ConfigMap>().is_none(), "another object's");
        })
        .await;
        offer(object("own", "5"));
        assert!(take::<ConfigMap>().is_none(), "outside a pass: nothing");
    }

    #[tokio::test]
    async fn an_answer_showing_the_object_gone_is_not_planned_on() {
        scope(Some("own".into()), async {
            let mut gone = object("own", "7");
            gone.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::now()));
            offer(gone.clone());
            assert!(take::<ConfigMap>().is_none());
            gone.metadata.finalizers = Some(vec!["other/finalizer".into()]);
            offer(gone);
            assert!(take::<ConfigMap>().is_some(), "deleting, not gone");
        })
        .await;
    }
}
