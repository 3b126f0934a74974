//! What every OBC reconcile reads: the client, the provisioner, the caches,
//! the settings and what passes remember of each other; and what the
//! reconcilers do after a failed pass.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::storage::v1::StorageClass;
use kube::Client;
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};
use tracing::warn;

use super::api_errors::ApiErrors;
use super::child_cache::ChildCache;
use super::in_flight::InFlight;
use super::superseded::Superseded;
use super::{drift, plan};
use crate::core::backoff::Backoffs;
use crate::core::error::Error;
use crate::core::events::Events;
use crate::core::provisioner::{ProvisionError, Provisioner};
use crate::core::runtime::Runtime;
use crate::obc::api::ObjectBucketClaim;
use crate::obc::{CachedBucket, CachedClaim};

/// Everything the reconcilers share.
pub(crate) struct Context<P> {
    pub client: Client,
    pub provisioner: Arc<P>,
    pub provisioner_name: String,
    pub label: String,
    pub classes: Store<StorageClass>,
    pub buckets: Store<CachedBucket>,
    pub claims: Store<CachedClaim>,
    pub secrets: ChildCache<k8s_openapi::api::core::v1::Secret>,
    pub config_maps: ChildCache<k8s_openapi::api::core::v1::ConfigMap>,
    pub events: Events,
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
    /// When each Bound claim's bucket was last checked against its config.
    pub config_checks: super::config_checks::ConfigChecks,
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
        if let Err(e) = self.events.publish(&event, &claim.object_ref(&())).await {
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
        if let Some(ob) = self.buckets.state().iter().find(|ob| {
            let ob = ob.without_maps();
            ob.bucket_name() == Some(bucket) && !plan::claim_ref_matches(ob, claim)
        }) {
            let owner = ob
                .without_maps()
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
                let bare = other.without_maps();
                bare.metadata.uid != claim.metadata.uid
                    && plan::has_finalizer(&bare.metadata)
                    && plan::cached_fixed_bucket_name(other) == Some(bucket)
                    && (!prepared || key(bare) < key(claim))
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
