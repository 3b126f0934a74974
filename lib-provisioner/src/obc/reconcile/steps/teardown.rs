//! A claim's deletion: the provisioner's Delete or Revoke, the ObjectBucket
//! deleted or released, and the claim's finalizer removed last.

use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;

use super::provisioner_failed;
use crate::core::error::{Error, Result};
use crate::core::failpoint;
use crate::core::provisioner::{ClaimIdentity, ProvisionError, Provisioner, TeardownRequest};
use crate::obc::api::{BucketPhase, FINALIZER, ObjectBucket, ReclaimPolicy};
use crate::obc::reconcile::Context;
use crate::obc::reconcile::plan::{self, Observed, records};
use crate::obc::reconcile::read::get_opt;
use crate::obc::reconcile::steps::Flow;
use crate::obc::writes;

/// Calls Delete (or Revoke) for a claim being deleted, and says so.
pub(super) async fn teardown<P: Provisioner>(
    delete_bucket: bool,
    o: &mut Observed,
    ctx: &Context<P>,
) -> Result<Flow> {
    if delete_bucket && object_bucket_moved(o, ctx).await? {
        return Ok(Flow::Continue);
    }
    let request = teardown_request(o);
    let (operation, result) = ctx.teardown(&request, delete_bucket).await;
    match result {
        Ok(()) => {}
        // A claim that never got an ObjectBucket, and whose class the
        // provisioner rejects outright, most likely never got a bucket
        // either (provisioning fails on the same parameters). Holding
        // its deletion forever would wedge it; let it go, and say so.
        Err(source) if !source.is_retryable() && request.object_bucket_name.is_none() => {
            ctx.event(
                &o.claim,
                EventType::Warning,
                "TeardownSkipped",
                "Delete",
                format!(
                    "{operation} of bucket {:?} failed permanently ({source}); the claim was never bound, so it is released anyway: check the store for a bucket of that name",
                    request.bucket_name
                ),
            )
            .await;
            o.torn_down = true;
            return Ok(Flow::Continue);
        }
        Err(source) => {
            let source = with_unblock_hint(source, o);
            return Err(provisioner_failed(o, ctx, operation, source).await);
        }
    }
    o.torn_down = true;
    failpoint::hit("after-bucket-deleted");
    let note = if delete_bucket {
        format!(
            "bucket {:?} and its credentials were deleted",
            request.bucket_name
        )
    } else {
        format!(
            "access to bucket {:?} was revoked; the bucket is kept",
            request.bucket_name
        )
    };
    ctx.event(
        &o.claim,
        EventType::Normal,
        if delete_bucket {
            "BucketDeleted"
        } else {
            "AccessRevoked"
        },
        "Delete",
        note,
    )
    .await;
    Ok(Flow::Continue)
}

/// Deleting under Retain: only a reserved (never completed) ObjectBucket
/// says so, and a cached copy may be an old, reserved version of one that
/// is complete by now (a watch lagging after an apiserver restart). Confirm
/// with the API; if it differs, take the current copy (`true`: plan again).
async fn object_bucket_moved<P: Provisioner>(o: &mut Observed, ctx: &Context<P>) -> Result<bool> {
    let Some(ob) =
        o.ob.as_ref()
            .filter(|ob| ob.spec.reclaim_policy == ReclaimPolicy::Retain)
    else {
        return Ok(false);
    };
    let current = get_opt(
        &Api::<ObjectBucket>::all(ctx.client.clone()),
        &ob.name_any(),
        "read the ObjectBucket",
    )
    .await?;
    let moved = current.as_ref().map(|c| &c.metadata.resource_version)
        != Some(&ob.metadata.resource_version);
    if moved {
        o.ob = current;
    }
    Ok(moved)
}

/// Reclaim policy Delete: removes the ObjectBucket's finalizer and deletes it.
pub(super) async fn delete_object_bucket<P: Provisioner>(
    o: &mut Observed,
    ctx: &Context<P>,
) -> Result<Flow> {
    let ob = o.ob.take().ok_or(Error::MissingField("ObjectBucket"))?;
    writes::remove_object_bucket(&ctx.client, &ob).await?;
    failpoint::hit("after-object-bucket-released");
    Ok(Flow::Continue)
}

/// Reclaim policy Retain: marks the ObjectBucket Released, drops its finalizer.
pub(super) async fn release_object_bucket<P: Provisioner>(
    o: &mut Observed,
    ctx: &Context<P>,
) -> Result<Flow> {
    let mut ob = o.ob.take().ok_or(Error::MissingField("ObjectBucket"))?;
    if ob.status.as_ref().and_then(|s| s.phase) != Some(BucketPhase::Released) {
        ob = writes::set_object_bucket_phase(&ctx.client, &ob, BucketPhase::Released).await?;
    }
    o.ob = writes::release_object_bucket(&ctx.client, &ob).await?;
    failpoint::hit("after-object-bucket-released");
    ctx.event(&o.claim, EventType::Normal, "Released", "Delete", format!(
        "bucket {:?} is retained; ObjectBucket {} is Released and may be deleted by an administrator",
        ob.bucket_name().unwrap_or_default(), ob.name_any()
    )).await;
    Ok(Flow::Continue)
}

/// The last write of a deletion.
pub(super) async fn remove_claim_finalizer<P: Provisioner>(
    o: &mut Observed,
    ctx: &Context<P>,
) -> Result<Flow> {
    writes::remove_claim_finalizer(&ctx.client, &o.claim).await?;
    if let Some(uid) = &o.claim.metadata.uid {
        ctx.config_checks.forget(uid);
    }
    failpoint::hit("after-claim-finalizer-removed");
    Ok(Flow::Stop(Action::await_change()))
}

/// A teardown refused outright blocks the claim's deletion (and its
/// namespace's): say how to unblock it. When the class is gone and the
/// ObjectBucket recorded no parameters, the provisioner was asked without
/// any, and recreating the class is the fix.
fn with_unblock_hint(source: ProvisionError, o: &Observed) -> ProvisionError {
    if source.is_retryable() {
        return source;
    }
    let ob = o.ob.as_ref().map(|ob| ob.name_any()).unwrap_or_default();
    let class = &o.claim.spec.storage_class_name;
    let unknown = records::parameters_for(o.ob.as_ref(), &o.class).is_none();
    let fix = if unknown {
        format!(
            "StorageClass {class:?} is gone and ObjectBucket {ob} recorded no parameters (it was bound by an older version): recreate StorageClass {class:?} with the parameters it had"
        )
    } else {
        "fix what the provisioner reports".to_owned()
    };
    ProvisionError::permanent(format!(
        "{source}. {fix}; or, to give up and leave the bucket in the store, remove the finalizer {FINALIZER} from this claim and from ObjectBucket {ob}"
    ))
}

/// Builds the teardown request from the ObjectBucket, or, when provisioning
/// died before the ObjectBucket existed, from the claim.
fn teardown_request(o: &Observed) -> TeardownRequest {
    let ob =
        o.ob.as_ref()
            .filter(|ob| plan::claim_ref_matches(ob, &o.claim));
    let parameters = records::parameters_for(ob, &o.class).unwrap_or_default();
    if let Some(ob) = ob {
        let mut request = TeardownRequest::for_object_bucket(ob, parameters);
        request.claim = ClaimIdentity::of(&o.claim);
        return request;
    }
    let bucket_name = plan::fixed_bucket_name(&o.claim)
        .map(str::to_owned)
        .or_else(|| {
            parameters
                .get(crate::obc::api::BROWNFIELD_BUCKET_PARAMETER)
                .cloned()
        })
        .unwrap_or_default();
    TeardownRequest::new(
        ClaimIdentity::of(&o.claim),
        bucket_name,
        &o.claim.spec.storage_class_name,
    )
    .with_parameters(parameters)
}
