//! After an outage of the API: every waiting claim is retried at once.

use std::sync::Arc;

use futures::future::{BoxFuture, FutureExt};
use kube::runtime::reflector::{ObjectRef, Store};
use tokio::sync::{mpsc, watch};
use tracing::info;

use crate::core::provisioner::Provisioner;
use crate::core::server::Health;
use crate::core::watch::keys::key_of;
use crate::core::watch::triggers::stopped;
use crate::obc::CachedClaim;
use crate::obc::api::{ClaimPhase, ObjectBucketClaim};
use crate::obc::reconcile::Context;

/// After the watches come back from a failure (an apiserver outage, say),
/// forgets every backoff grown during it and retries every claim still
/// waiting (not Bound for its generation, or being deleted) at once, rather
/// than when its backoff, grown through the outage, would have it.
pub(super) fn retry_after_reconnect<P: Provisioner>(
    health: Arc<Health>,
    ctx: Arc<Context<P>>,
    claims: Store<CachedClaim>,
    retry: mpsc::UnboundedSender<ObjectRef<CachedClaim>>,
    stop: watch::Receiver<bool>,
) -> BoxFuture<'static, ()> {
    let work = async move {
        loop {
            health.watches.reconnected().await;
            // The watches come back one after another: retry once they
            // have (a later one wakes this again).
            tokio::time::sleep(RECONNECT_SETTLE).await;
            ctx.backoff.reset_all();
            let mut retried = 0;
            for claim in claims.state() {
                if is_waiting(claim.without_maps()) {
                    retried += 1;
                    let _ = retry.send(key_of(claim.as_ref()));
                }
            }
            let still_failing = health.watches.failing();
            info!(
                retried,
                still_failing,
                "a watch that had failed delivers events again; the waiting claims were retried"
            );
        }
    };
    async move {
        tokio::select! {
            () = work => {}
            () = stopped(stop) => {}
        }
    }
    .boxed()
}

/// How long after a watch comes back the waiting claims are retried: the
/// other watches of an outage reconnect within it, and one retry covers
/// them all.
const RECONNECT_SETTLE: std::time::Duration = std::time::Duration::from_millis(300);

fn is_waiting(claim: &ObjectBucketClaim) -> bool {
    let status = claim.status.as_ref();
    claim.metadata.deletion_timestamp.is_some()
        || status.and_then(|s| s.phase) != Some(ClaimPhase::Bound)
        || status.and_then(|s| s.observed_generation) != claim.metadata.generation
}
