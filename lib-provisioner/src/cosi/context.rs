//! What every COSI reconcile reads: the client, the provisioner, the
//! driver name, the caches used to map events, and the shared settings.

use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use kube::runtime::controller::Action;
use kube::runtime::events::Recorder;
use kube::runtime::reflector::Store;

use super::api::BucketAccess;
use crate::core::error::Error;
use crate::core::leader::Leadership;
use crate::core::metrics::Metrics;
use crate::core::provisioner::{ProvisionError, Provisioner};
use crate::core::backoff::Backoffs;

/// Everything the COSI reconcilers share.
pub(crate) struct CosiContext<P> {
    /// Writes go through the leader lease gate (as the OBC reconcilers').
    pub client: Client,
    pub provisioner: Arc<P>,
    /// The driver the driver role serves.
    pub driver: String,
    /// Whether the binding role runs.
    pub binding: bool,
    pub recorder: Recorder,
    pub metrics: Arc<Metrics>,
    pub leadership: Option<Arc<Leadership>>,
    pub provisioner_timeout: Duration,
    pub backoff: Backoffs,
    /// BucketAccesses (a claim's deletion waits for those naming it).
    pub accesses: Store<BucketAccess>,
    /// Becomes true once every COSI cache has listed.
    pub synced: tokio::sync::watch::Receiver<bool>,
    /// Provisioner refusals standing per object generation.
    pub refusals: super::refusals::Refusals,
}

/// How long a refused object waits before it is looked at again (a class
/// or Bucket fixed elsewhere may unblock it).
pub(crate) const REFUSED_RETRY: Duration = Duration::from_secs(300);
/// How often a settled object is looked at again without any event.
pub(crate) const RESYNC: Duration = Duration::from_secs(600);
/// Steps one pass may take; more is a bug.
pub(crate) const MAX_STEPS: usize = 24;

impl<P> CosiContext<P> {
    /// `Ok` unless leader election is on and this replica's lease ran out.
    pub(crate) fn ensure_leading(&self) -> Result<(), Error> {
        self.leadership.as_ref().map_or(Ok(()), |l| l.check())
    }

    /// Waits until the COSI caches have listed once.
    pub(crate) async fn caches_ready(&self) {
        let mut ready = self.synced.clone();
        let _ = ready.wait_for(|synced| *synced).await;
    }
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
        let result = self.timed(operation, call).await;
        match &result {
            Ok(_) => self.refusals.clear(meta),
            Err(e) if !e.is_retryable() => self.refusals.record(meta, e.message()),
            Err(_) => {}
        }
        result
    }

    /// Runs a provisioner call as every call runs
    /// ([`crate::core::calls::timed`]: timeout, lease, metrics).
    pub(crate) async fn timed<T>(
        &self,
        operation: &'static str,
        call: impl Future<Output = Result<T, ProvisionError>>,
    ) -> Result<T, ProvisionError> {
        crate::core::calls::timed(
            self.leadership.as_deref(),
            self.provisioner_timeout,
            &self.metrics,
            operation,
            call,
        )
        .await
    }
}

/// The error policy of every COSI controller: as every family's
/// ([`retry_delay`](crate::core::backoff::retry_delay)).
pub(crate) fn error_policy<K, P>(obj: Arc<K>, error: &Error, ctx: Arc<CosiContext<P>>) -> Action
where
    K: kube::Resource<DynamicType = ()>,
{
    Action::requeue(crate::core::backoff::retry_delay(
        obj.as_ref(),
        error,
        &ctx.backoff,
    ))
}
