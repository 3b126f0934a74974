//! The reconcilers: claims ([`claim`]) and ObjectBuckets ([`bucket`]), the
//! pure state machine they follow ([`plan`]), and status ([`status`]).

pub(crate) mod bucket;
pub(crate) mod bucket_names;
pub(crate) mod claim;
pub(crate) mod drift;
pub(crate) mod plan;
mod read;
pub(crate) mod status;
mod steps;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::core::PartialObjectMeta;
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType, Recorder};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};
use tracing::warn;

use crate::core::backoff::Backoffs;
use crate::core::error::Error;
use crate::core::provisioner::{ProvisionError, Provisioner};
use crate::core::runtime::Runtime;
use crate::obc::api::{ObjectBucket, ObjectBucketClaim};

/// The metadata cache of one kind of child, over every namespace served.
pub(crate) struct ChildStores<K: Resource<DynamicType = ()> + Clone + 'static>(
    pub Store<PartialObjectMeta<K>>,
);

impl<K: Resource<DynamicType = ()> + Clone + 'static> ChildStores<K> {
    pub(crate) fn get(&self, ns: &str, name: &str) -> Option<ObjectMeta> {
        let key = ObjectRef::new(name).within(ns);
        self.0.get(&key).map(|m| m.metadata.clone())
    }
}

/// Everything the reconcilers share.
pub(crate) struct Context<P> {
    pub client: Client,
    pub provisioner: Arc<P>,
    pub provisioner_name: String,
    pub label: String,
    pub classes: Store<StorageClass>,
    pub buckets: Store<ObjectBucket>,
    pub claims: Store<ObjectBucketClaim>,
    pub secrets: ChildStores<k8s_openapi::api::core::v1::Secret>,
    pub config_maps: ChildStores<k8s_openapi::api::core::v1::ConfigMap>,
    pub recorder: Recorder,
    /// Leading, timed provisioner calls, cache readiness.
    pub runtime: Runtime,
    pub backoff: Backoffs,
    pub resync: Duration,
    /// UIDs of claims whose `spec.objectBucketName` the apiserver pruned.
    pub pruned_binds: Mutex<std::collections::HashSet<String>>,
    /// Claim versions this controller's own writes replaced, per claim UID.
    pub superseded: Superseded,
    /// The same for ObjectBuckets, per ObjectBucket UID.
    pub superseded_buckets: Superseded,
    /// UIDs of claims a pass is working on right now.
    pub in_flight: InFlight,
    /// Children whose contents were verified, at which version.
    pub verified: drift::Verified,
    /// Since when each claim's passes fail on a Kubernetes API error.
    pub api_errors: ApiErrors,
    /// The namespaces served; `None`: all.
    pub namespaces: Option<std::collections::BTreeSet<String>>,
    /// The provisioner's own namespace, where greenfield bucket names are
    /// held (see [`bucket_names`]); `None`: not arbitrated.
    pub name_records: Option<String>,
}

impl<P> Context<P> {
    /// Whether claims in `namespace` are this controller's.
    pub(crate) fn serves_namespace(&self, namespace: &str) -> bool {
        self.namespaces
            .as_ref()
            .is_none_or(|list| list.contains(namespace))
    }
}

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

/// Object versions this controller's own writes replaced, per object UID
/// (one map for claims, one for ObjectBuckets).
///
/// A pass's writes trigger watch events for the same claim, and the next
/// pass may start from a cache that does not hold the last write yet. An
/// object in a version that one of our writes replaced is such a stale copy:
/// acting on it would repeat the write (an Event twice, a 409, a PATCH
/// answered 404, the ObjectBucket's `Bound` status again). Equality only:
/// resourceVersions are opaque, not ordered.
#[derive(Default)]
pub(crate) struct Superseded(Mutex<HashMap<String, (Vec<String>, std::time::Instant)>>);

impl Superseded {
    /// Past this age a remembered version no longer holds a pass back: a
    /// cache that has not caught up by then is re-read from the API instead.
    const PATIENCE: Duration = Duration::from_secs(10);

    /// Records that our writes replaced these versions of object `uid`.
    pub(crate) fn record(&self, uid: &str, versions: Vec<String>) {
        if versions.is_empty() {
            return;
        }
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        // Entries past their patience no longer count; dropping them here
        // keeps objects deleted before their next lookup from piling up.
        map.retain(|_, (_, at)| at.elapsed() < Self::PATIENCE);
        map.insert(uid.to_owned(), (versions, std::time::Instant::now()));
    }

    /// Whether this copy of the object is one our writes replaced (and the
    /// cache has not caught up yet). Forgets the object once it has.
    pub(crate) fn is_stale(&self, meta: &ObjectMeta) -> bool {
        let (Some(uid), Some(rv)) = (&meta.uid, &meta.resource_version) else {
            return false;
        };
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match map.get(uid) {
            Some((versions, at)) if at.elapsed() < Self::PATIENCE && versions.contains(rv) => true,
            Some(_) => {
                map.remove(uid);
                false
            }
            None => false,
        }
    }

    /// Forgets an object (deleted).
    pub(crate) fn forget(&self, uid: &str) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).remove(uid);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

impl<P> Context<P> {
    /// The class named `name`, from its cache, as the plan sees it.
    pub(crate) fn class_state(&self, name: &str) -> plan::ClassState {
        use plan::ClassState;
        match name {
            "" => ClassState::Unnamed,
            name => match self.classes.get(&ObjectRef::new(name)) {
                None => ClassState::NotFound(name.to_owned()),
                Some(class) if class.provisioner != self.provisioner_name => ClassState::Foreign,
                Some(class) => ClassState::Ours(Box::new(StorageClass::clone(&class))),
            },
        }
    }
}

impl<P: Provisioner> Context<P> {
    /// Calls Delete (`delete_bucket`) or Revoke; returns the operation's name.
    pub(crate) async fn teardown(
        &self,
        request: &crate::core::provisioner::TeardownRequest,
        delete_bucket: bool,
    ) -> (&'static str, Result<(), ProvisionError>) {
        if delete_bucket {
            (
                "delete",
                self.runtime
                    .timed("delete", self.provisioner.delete(request))
                    .await,
            )
        } else {
            (
                "revoke",
                self.runtime
                    .timed("revoke", self.provisioner.revoke(request))
                    .await,
            )
        }
    }

    /// Publishes an Event on the claim. Failing to publish never fails the
    /// reconcile: the status carries the same message.
    pub(crate) async fn event(
        &self,
        claim: &ObjectBucketClaim,
        type_: EventType,
        reason: &str,
        action: &str,
        note: String,
    ) {
        let event = Event {
            type_,
            reason: reason.to_owned(),
            note: Some(truncate(note, 1000)),
            action: action.to_owned(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&event, &claim.object_ref(&())).await {
            warn!(claim = %claim.name_any(), error = %e, "could not publish event");
        }
    }

    /// Another claim or ObjectBucket that holds greenfield bucket `bucket`
    /// before this claim does.
    ///
    /// The holder is decided by what is persisted (finalizer, fixed name,
    /// creation time, UID), never by which reconcile runs first, so two
    /// claims asking for one name get the same answer after any restart.
    /// With name records (see [`bucket_names`]) only ObjectBuckets count
    /// here; between claims the Lease decides.
    pub(crate) fn name_holder(&self, claim: &ObjectBucketClaim, bucket: &str) -> Option<String> {
        if let Some(ob) = self
            .buckets
            .state()
            .iter()
            .find(|ob| ob.bucket_name() == Some(bucket) && !plan::claim_ref_matches(ob, claim))
        {
            let owner = ob
                .spec
                .claim_ref
                .as_ref()
                .map(|r| {
                    format!(
                        " (claim {}/{})",
                        r.namespace.as_deref().unwrap_or_default(),
                        r.name.as_deref().unwrap_or_default()
                    )
                })
                .unwrap_or_default();
            return Some(format!("ObjectBucket {}{owner}", ob.name_any()));
        }
        if self.name_records.is_some() {
            // Among claims, the name's Lease decides (bucket_names): a rule
            // of its own here could reject the Lease's holder in a pass
            // after it took the Lease and before its ObjectBucket existed
            // (a crash in between), while the Lease rejects the other.
            return None;
        }
        let prepared = plan::has_finalizer(&claim.metadata);
        let key = |c: &ObjectBucketClaim| {
            (
                c.metadata.creation_timestamp.clone().map(|t| t.0),
                c.metadata.uid.clone(),
            )
        };
        self.claims
            .state()
            .into_iter()
            .filter(|other| {
                other.metadata.uid != claim.metadata.uid
                    && plan::has_finalizer(&other.metadata)
                    && plan::fixed_bucket_name(other) == Some(bucket)
                    && (!prepared || key(other) < key(claim))
            })
            .map(|other| {
                format!(
                    "claim {}/{}",
                    other.namespace().unwrap_or_default(),
                    other.name_any()
                )
            })
            .next()
    }
}

fn truncate(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
    s
}

/// What to do after a failed reconcile: as every family's
/// ([`retry_delay`](crate::core::backoff::retry_delay)).
pub(crate) fn error_policy<K, P>(obj: Arc<K>, error: &Error, ctx: Arc<Context<P>>) -> Action
where
    K: Resource<DynamicType = ()>,
{
    let delay = crate::core::backoff::retry_delay(obj.as_ref(), error, &ctx.backoff);
    Action::requeue(delay)
}

#[cfg(test)]
mod superseded_tests {
    use super::*;

    fn meta(uid: &str, rv: &str) -> ObjectMeta {
        ObjectMeta {
            uid: Some(uid.into()),
            resource_version: Some(rv.into()),
            ..Default::default()
        }
    }

    #[test]
    fn a_replaced_version_is_stale_until_the_cache_catches_up() {
        let s = Superseded::default();
        s.record("u", vec!["1".into(), "2".into()]);
        assert!(s.is_stale(&meta("u", "1")));
        assert!(s.is_stale(&meta("u", "2")));
        assert!(!s.is_stale(&meta("other", "1")), "per UID");
        assert!(!s.is_stale(&meta("u", "3")), "the newer version");
        assert!(!s.is_stale(&meta("u", "1")), "forgotten once caught up");
        assert_eq!(s.len(), 0);
    }

    #[test]
    fn nothing_is_recorded_for_a_pass_that_replaced_nothing() {
        let s = Superseded::default();
        s.record("u", Vec::new());
        assert_eq!(s.len(), 0);
        assert!(!s.is_stale(&ObjectMeta::default()));
    }

    #[test]
    fn entries_past_their_patience_are_dropped_when_others_are_recorded() {
        let s = Superseded::default();
        s.record("gone", vec!["1".into()]);
        let long_ago = std::time::Instant::now()
            .checked_sub(Superseded::PATIENCE)
            .expect("the monotonic clock is past 10 s");
        s.0.lock().expect("lock").get_mut("gone").expect("entry").1 = long_ago;
        s.record("new", vec!["7".into()]);
        assert_eq!(s.len(), 1);
        assert!(s.is_stale(&meta("new", "7")));
    }
}
