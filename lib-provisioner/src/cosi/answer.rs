//! What a pass's writes answered: the copies the next round plans on,
//! instead of GETs ([`crate::cosi::fresh`] says where else a pass reads).
//!
//! A PATCH or a POST answers with the object as stored after it: what a
//! GET right after would return, unless another writer came in between;
//! then the next write, guarded by this copy's resourceVersion, is refused
//! (409) and the round after it reads with a GET, as after any conflict.
//! So the answer is as safe to plan on as the GET it saves.
//!
//! * The pass's **own object**: the next round plans on the last answer
//!   ([`take`]). A step that wrote nothing of it (a provisioner call, a
//!   write of another object) leaves the copy the round planned on as
//!   current as it was ([`Taken::Untouched`]): no GET either.
//! * **Other objects** the pass created or patched (a claim's Bucket):
//!   [`other`] gives the last answer, which [`crate::cosi::fresh::read`]
//!   prefers to a cache that may not show the write yet.
//!
//! The slot is task-local: [`scope`] opens it for one pass and one object
//! (by UID), every write offers its answer ([`offer`]), and the pass takes
//! its own after a step. Writes outside a pass (none today) offer into
//! nothing.

use std::any::{Any, TypeId};
use std::cell::RefCell;
use std::collections::HashMap;

use kube::Resource;

tokio::task_local! {
    static ANSWER: RefCell<Slot>;
}

/// Another object than the pass's own: its type, namespace and name.
type OtherKey = (TypeId, Option<String>, String);

fn other_key<K: 'static>(namespace: Option<&str>, name: &str) -> OtherKey {
    (
        TypeId::of::<K>(),
        namespace.map(str::to_owned),
        name.to_owned(),
    )
}

/// The object a pass is about, its last answer, and the last answers
/// about the other objects the pass wrote.
struct Slot {
    uid: String,
    answer: Option<Box<dyn Any + Send>>,
    others: HashMap<OtherKey, Box<dyn Any + Send>>,
}

/// Runs `pass` with a slot for answers about the object of `uid`.
pub(crate) async fn scope<F: Future>(uid: Option<String>, pass: F) -> F::Output {
    let slot = Slot {
        uid: uid.unwrap_or_default(),
        answer: None,
        others: HashMap::new(),
    };
    ANSWER.scope(RefCell::new(slot), pass).await
}

/// Keeps `answer`: as the own object's last answer if it is the pass's
/// object (replacing an earlier one), else as that other object's.
pub(crate) fn offer<K: Resource + Send + 'static>(answer: K) {
    let meta = answer.meta();
    let uid = meta.uid.clone();
    let key = meta
        .name
        .as_deref()
        .map(|name| other_key::<K>(meta.namespace.as_deref(), name));
    let _outside_a_pass = ANSWER.try_with(|slot| {
        let mut slot = slot.borrow_mut();
        if !slot.uid.is_empty() && uid.as_deref() == Some(slot.uid.as_str()) {
            slot.answer = Some(Box::new(answer));
        } else if let Some(key) = key {
            slot.others.insert(key, Box::new(answer));
        }
    });
}

/// What the own object's writes since the previous take left.
pub(crate) enum Taken<K> {
    /// The last write's answer.
    Answer(K),
    /// A write removed its last finalizer: it is gone (the next round's
    /// GET says so, and the pass forgets it).
    Gone,
    /// No write of it succeeded: the copy planned on is still the newest
    /// this pass knows.
    Untouched,
}

/// The own object's last answer kept since the previous take.
pub(crate) fn take<K: Resource + 'static>() -> Taken<K> {
    let answer = ANSWER
        .try_with(|slot| slot.borrow_mut().answer.take())
        .ok()
        .flatten();
    let Some(object) = answer.and_then(|a| a.downcast::<K>().ok()) else {
        return Taken::Untouched;
    };
    let meta = object.meta();
    let gone =
        meta.deletion_timestamp.is_some() && meta.finalizers.as_ref().is_none_or(Vec::is_empty);
    if gone {
        Taken::Gone
    } else {
        Taken::Answer(*object)
    }
}

/// The last answer about another object this pass wrote, if any.
pub(crate) fn other<K: Resource + Clone + 'static>(
    namespace: Option<&str>,
    name: &str,
) -> Option<K> {
    let key = other_key::<K>(namespace, name);
    ANSWER
        .try_with(|slot| {
            let slot = slot.borrow();
            slot.others.get(&key)?.downcast_ref::<K>().cloned()
        })
        .ok()
        .flatten()
}

/// Drops the last answer about another object (it is being deleted).
pub(crate) fn forget_other<K: Resource + 'static>(namespace: Option<&str>, name: &str) {
    let key = other_key::<K>(namespace, name);
    let _outside_a_pass = ANSWER.try_with(|slot| slot.borrow_mut().others.remove(&key));
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

    use super::*;

    fn object(uid: &str, rv: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(format!("name-of-{uid}")),
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
            let Taken::Answer(taken) = take::<ConfigMap>() else {
                panic!("an answer")
            };
            assert_eq!(taken.metadata.resource_version.as_deref(), Some("3"));
            assert!(
                matches!(take::<ConfigMap>(), Taken::Untouched),
                "taken once"
            );
            offer(object("other", "4"));
            assert!(
                matches!(take::<ConfigMap>(), Taken::Untouched),
                "another object's"
            );
        })
        .await;
        offer(object("own", "5"));
        assert!(
            matches!(take::<ConfigMap>(), Taken::Untouched),
            "outside a pass: nothing"
        );
    }

    #[tokio::test]
    async fn an_answer_showing_the_object_gone_is_not_planned_on() {
        scope(Some("own".into()), async {
            let mut gone = object("own", "7");
            gone.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::now()));
            offer(gone.clone());
            assert!(matches!(take::<ConfigMap>(), Taken::Gone));
            gone.metadata.finalizers = Some(vec!["other/finalizer".into()]);
            offer(gone);
            assert!(
                matches!(take::<ConfigMap>(), Taken::Answer(_)),
                "deleting, not gone"
            );
        })
        .await;
    }

    #[tokio::test]
    async fn another_objects_last_answer_is_kept_by_kind_namespace_and_name() {
        scope(Some("own".into()), async {
            let mut first = object("other", "4");
            first.metadata.namespace = Some("ns".into());
            offer(first.clone());
            first.metadata.resource_version = Some("6".into());
            offer(first);
            let kept = other::<ConfigMap>(Some("ns"), "name-of-other").expect("kept");
            assert_eq!(kept.metadata.resource_version.as_deref(), Some("6"));
            assert!(
                other::<ConfigMap>(None, "name-of-other").is_none(),
                "namespace"
            );
            assert!(
                other::<k8s_openapi::api::core::v1::Secret>(Some("ns"), "name-of-other").is_none(),
                "kind"
            );
            assert!(
                other::<ConfigMap>(Some("ns"), "name-of-own").is_none(),
                "the own object's answer is not another's"
            );
            forget_other::<ConfigMap>(Some("ns"), "name-of-other");
            assert!(other::<ConfigMap>(Some("ns"), "name-of-other").is_none());
        })
        .await;
    }
}
