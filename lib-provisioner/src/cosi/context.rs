//! What every COSI reconcile reads: the client, the provisioner, the
//! driver name, the caches used to map events, and the shared settings.

use std::sync::Arc;

use kube::Client;
use kube::runtime::controller::Action;
use kube::runtime::reflector::Store;

use crate::core::backoff::{Backoffs, retry_delay};
use crate::core::error::Error;
use crate::core::events::Events;
use crate::core::provisioner::{ProvisionError, Provisioner};
use crate::core::runtime::Runtime;
use crate::cosi::access::by_claim::AccessesByClaim;
use crate::cosi::api::{Bucket, BucketAccessClass, BucketClaim, BucketClass};
use crate::cosi::fresh::OwnWrites;
use crate::cosi::pace::Pace;
use crate::cosi::refusals::Refusals;

/// Everything the COSI reconcilers share.
pub(crate) struct CosiContext<P> {
    /// Writes go through the leader lease gate (as the OBC reconcilers').
    pub client: Client,
    pub provisioner: Arc<P>,
    /// The driver the driver role serves.
    pub driver: String,
    /// Whether the binding role runs.
    pub binding: bool,
    pub events: Events,
    /// Leading, timed provisioner calls, cache readiness.
    pub runtime: Runtime,
    pub backoff: Backoffs,
    /// The BucketAccesses naming each claim (a claim's deletion waits for
    /// them).
    pub accesses: AccessesByClaim,
    /// The other watched kinds, read where a plan looks at them
    /// ([`crate::cosi::fresh`]).
    pub caches: Caches,
    /// The objects written since their cache last showed them.
    pub own_writes: OwnWrites,
    /// How often each object's events may start a pass.
    pub pace: Pace,
    /// Provisioner refusals standing per object generation.
    pub refusals: Refusals,
}

impl<P: Provisioner> CosiContext<P> {
    /// A provisioner call for the object of `meta`, unless the provisioner
    /// refused this generation of it lately (then that refusal again). A
    /// refusal (not a retryable error) is remembered; a success forgets it.
    pub(crate) async fn call<T>(
        &self,
        meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
        operation: &'static str,
        call: impl Future<Output = Result<T, ProvisionError>>,
    ) -> Result<T, ProvisionError> {
        if let Some(message) = self.refusals.standing(meta) {
            return Err(ProvisionError::permanent(message));
        }
        let result = self.runtime.timed(operation, call).await;
        match &result {
            Ok(_) => self.refusals.clear(meta),
            Err(e) if !e.is_retryable() => self.refusals.record(meta, e.message()),
            Err(_) => {}
        }
        result
    }
}

/// The caches of the kinds a plan looks at besides its own object. Claims
/// and classes are watched only where the binding role or the sweep runs;
/// elsewhere their caches stay empty and every read is a GET.
pub(crate) struct Caches {
    pub buckets: Store<Bucket>,
    pub claims: Store<BucketClaim>,
    pub classes: Store<BucketClass>,
    pub access_classes: Store<BucketAccessClass>,
}

/// The error policy of every COSI controller: as every family's
/// ([`retry_delay`]).
pub(crate) fn error_policy<K, P>(obj: Arc<K>, error: &Error, ctx: Arc<CosiContext<P>>) -> Action
where
    K: kube::Resource<DynamicType = ()>,
{
    Action::requeue(retry_delay(obj.as_ref(), error, &ctx.backoff))
}
