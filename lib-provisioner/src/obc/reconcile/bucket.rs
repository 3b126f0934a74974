//! The ObjectBucket reconciler: what happens to ObjectBuckets whose claim is
//! gone, and to ObjectBuckets deleted directly.
//!
//! Claims drive everything else; this reconciler only acts when the claim
//! cannot, because it no longer exists (force-deleted, or deleted while an
//! older controller was not running) or because it was recreated under the
//! same name and is a different claim now.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use tracing::{info, warn};

use super::Context;
use super::plan::{self, has_finalizer, has_label};
use crate::core::error::{Error, Result};
use crate::core::failpoint;
use crate::core::provisioner::{Provisioner, TeardownRequest};
use crate::obc::api::{BucketPhase, ObjectBucket, ObjectBucketClaim};
use crate::obc::writes;
use crate::obc::{CachedBucket, CachedClaim};

/// Reconciles one ObjectBucket, timed into the metrics.
pub(crate) async fn reconcile<P: Provisioner>(
    cached: Arc<CachedBucket>,
    ctx: Arc<Context<P>>,
) -> Result<Action> {
    ctx.runtime.caches_ready().await;
    let started = std::time::Instant::now();
    let result = reconcile_object_bucket(cached.object(), &ctx).await;
    ctx.runtime
        .metrics
        .bucket_reconciled(started.elapsed(), result.as_ref().err());
    result
}

async fn reconcile_object_bucket<P: Provisioner>(
    ob: ObjectBucket,
    ctx: &Arc<Context<P>>,
) -> Result<Action> {
    if !has_label(&ob.metadata, &ctx.label) || !has_finalizer(&ob.metadata) {
        // Not ours, or nothing of ours left on it.
        return Ok(Action::await_change());
    }
    if let Some(action) = claim_holds(&ob, ctx).await? {
        return Ok(action);
    }
    // Decide on the API's copy, not the cache's: after an apiserver restart
    // a watch can lag seconds behind the claim's last pass, and a stale copy
    // that still looks reserved (or not yet released) would delete or
    // revoke a bucket that pass has just retained.
    let Some(fresh) = super::read::get_opt(
        &Api::<ObjectBucket>::all(ctx.client.clone()),
        &ob.name_any(),
        "read the ObjectBucket",
    )
    .await?
    else {
        return Ok(Action::await_change());
    };
    if !has_label(&fresh.metadata, &ctx.label) || !has_finalizer(&fresh.metadata) {
        return Ok(Action::await_change());
    }
    if fresh.spec.claim_ref != ob.spec.claim_ref
        && let Some(action) = claim_holds(&fresh, ctx).await?
    {
        return Ok(action);
    }
    let ob = fresh;
    let released = ob.status.as_ref().and_then(|s| s.phase) == Some(BucketPhase::Released);
    ctx.runtime.ensure_leading()?;
    if released {
        // Retained: the bucket stays; the ObjectBucket may go.
        if ob.metadata.deletion_timestamp.is_some() {
            writes::release_object_bucket(&ctx.client, &ob).await?;
        }
        return Ok(Action::await_change());
    }
    // Secret and ConfigMap first: a pass that raced the claim's deletion may
    // have written them for the vanished claim after its ObjectBucket.
    release_children(&ob, ctx).await?;

    // Orphaned: its claim is gone without having released it.
    let class = ctx.class_state(&ob.spec.storage_class_name);
    let plan = plan::teardown_plan(&ob, &class);
    let request = teardown_request(&ob, &class);
    info!(object_bucket = %ob.name_any(), delete_bucket = plan.delete_bucket, "claim is gone; tearing down its ObjectBucket");
    let (operation, result) = ctx.teardown(&request, plan.delete_bucket).await;
    result.map_err(|source| Error::Provisioner { operation, source })?;
    failpoint::hit("after-bucket-deleted");
    if plan.delete_object_bucket {
        writes::remove_object_bucket(&ctx.client, &ob).await?;
    } else {
        let updated =
            writes::set_object_bucket_phase(&ctx.client, &ob, BucketPhase::Released).await?;
        writes::release_object_bucket(&ctx.client, &updated).await?;
    }
    failpoint::hit("after-object-bucket-released");
    Ok(Action::await_change())
}

/// What to do instead of tearing down, if the ObjectBucket's claim still
/// holds it: the claim exists, the claimRef names none, or the claim's last
/// pass is still running. `None`: the claim is gone.
async fn claim_holds<P: Provisioner>(
    ob: &ObjectBucket,
    ctx: &Context<P>,
) -> Result<Option<Action>> {
    match claim_state(ob, ctx).await? {
        // The claim's reconciler owns this ObjectBucket, also while it is
        // being deleted directly: it stays until the claim is deleted. The
        // claim's deletion triggers this reconciler; the paced resync
        // (`core::watch::resync`) looks again for a deletion that a watch
        // gap (a relist) never reported.
        ClaimState::Live => return Ok(Some(Action::await_change())),
        ClaimState::Unknown => return Ok(Some(Action::await_change())),
        ClaimState::Gone => {}
    }
    if let Some(uid) = ob.spec.claim_ref.as_ref().and_then(|r| r.uid.as_deref())
        && ctx.in_flight.contains(uid)
    {
        // Its claim's last pass is still running (and may be creating the
        // bucket): look again once it has finished.
        return Ok(Some(Action::requeue(std::time::Duration::from_secs(1))));
    }
    Ok(None)
}

#[derive(Debug, PartialEq, Eq)]
enum ClaimState {
    /// The claim exists and is the one the ObjectBucket was bound to.
    Live,
    /// No claim of that name, or one with another UID.
    Gone,
    /// The claimRef does not say which claim: touch nothing.
    Unknown,
}

/// Whether the ObjectBucket's claim still exists. Read from the API, not the
/// cache: acting on a claim that only looks gone would tear down a live bucket.
async fn claim_state<P: Provisioner>(ob: &ObjectBucket, ctx: &Context<P>) -> Result<ClaimState> {
    let Some((ns, name)) = ob
        .spec
        .claim_ref
        .as_ref()
        .and_then(|r| Some((r.namespace.as_deref()?, r.name.as_deref()?)))
    else {
        warn!(object_bucket = %ob.name_any(), "ObjectBucket has no usable claimRef; leaving it alone");
        return Ok(ClaimState::Unknown);
    };
    if !ctx.serves_namespace(ns) {
        // Namespaced mode: another namespace's claim is not this
        // controller's to look at (nor, with Role-only RBAC, readable).
        return Ok(ClaimState::Unknown);
    }
    let key = ObjectRef::<CachedClaim>::new(name).within(ns);
    if ctx
        .claims
        .get(&key)
        .is_some_and(|c| plan::claim_ref_matches(ob, c.without_maps()))
    {
        return Ok(ClaimState::Live);
    }
    let claim = Api::<ObjectBucketClaim>::namespaced(ctx.client.clone(), ns)
        .get_opt(name)
        .await
        .map_err(Error::kube("read the ObjectBucket's claim"))?;
    Ok(match claim {
        Some(c) if plan::claim_ref_matches(ob, &c) => ClaimState::Live,
        _ => ClaimState::Gone,
    })
}

/// Releases the Secret and ConfigMap named after the ObjectBucket's claim
/// if they belong to that claim (its UID is their owner) and carry the
/// finalizer older versions put on children: the claim is gone, and garbage
/// collection cannot delete them while they carry it. Children written by
/// this version need nothing: the collector deletes them.
async fn release_children<P: Provisioner>(ob: &ObjectBucket, ctx: &Context<P>) -> Result<()> {
    let Some(claim_ref) = &ob.spec.claim_ref else {
        return Ok(());
    };
    let (Some(ns), Some(name), Some(uid)) = (
        claim_ref.namespace.as_deref(),
        claim_ref.name.as_deref(),
        claim_ref.uid.as_deref(),
    ) else {
        return Ok(());
    };
    release_child_of::<Secret, P>(ctx, &ctx.secrets, ns, name, uid).await?;
    release_child_of::<ConfigMap, P>(ctx, &ctx.config_maps, ns, name, uid).await
}

async fn release_child_of<K: writes::Child, P>(
    ctx: &Context<P>,
    cache: &super::child_cache::ChildCache<K>,
    ns: &str,
    name: &str,
    uid: &str,
) -> Result<()> {
    let meta = super::claim::child_meta(ctx, Some(cache), ns, name).await?;
    let Some(meta) = meta else {
        return Ok(());
    };
    let owned = meta.owner_references.iter().flatten().any(|r| r.uid == uid);
    if owned && has_finalizer(&meta) {
        info!(
            namespace = ns,
            name,
            kind = K::KIND,
            "releasing what belonged to a deleted claim"
        );
        writes::release_child::<K>(&ctx.client, &meta).await?;
    }
    Ok(())
}

fn teardown_request(ob: &ObjectBucket, class: &plan::ClassState) -> TeardownRequest {
    let parameters = plan::records::parameters_for(Some(ob), class).unwrap_or_default();
    TeardownRequest::for_object_bucket(ob, parameters)
}
