//! Executing the plan's steps: one function per step that needs more than a
//! line or two, each doing one write or one provisioner call and recording
//! what it changed in [`Observed`]; and showing problems on the claim.

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use tracing::info;

use super::claim::{Flow, claim_key, get_opt, refresh_claim};
use super::plan::{self, ClassState, Observed, Problem, Step};
use super::{Context, status};
use crate::api::{BucketOrigin, BucketPhase, ClaimPhase, ObjectBucket, ReclaimPolicy};
use crate::error::{Error, Result};
use crate::failpoint;
use crate::names;
use crate::provisioner::{
    BucketRequest, ClaimIdentity, ProvisionError, Provisioner, TeardownRequest,
};
use crate::writes::{self, NewObjectBucket};

/// Performs one step and records what it changed.
pub(super) async fn execute<P: Provisioner>(
    step: Step,
    o: &mut Observed,
    ctx: &Context<P>,
) -> Result<Flow> {
    match step {
        Step::Ignore => Ok(Flow::Stop(Action::await_change())),
        Step::Done => Ok(Flow::Stop(Action::requeue(ctx.resync))),
        Step::Reject(problem) => {
            show_problem(o, ctx, ClaimPhase::Failed, &problem).await?;
            Err(Error::InvalidClaim(problem.message))
        }
        Step::Wait(problem) => {
            show_problem(o, ctx, ClaimPhase::Pending, &problem).await?;
            Err(Error::Waiting(problem.message))
        }
        Step::PrepareClaim { generate_from } => prepare_claim(generate_from, o, ctx).await,
        Step::ObtainAccess {
            bucket_name,
            origin,
        } => obtain_access(bucket_name, origin, o, ctx).await,
        Step::CreateObjectBucket {
            bucket_name,
            origin,
            reclaim_policy,
        } => {
            let ob_name = plan::object_bucket_name(&o.claim);
            let ob = writes::create_object_bucket(
                &ctx.client,
                NewObjectBucket {
                    name: &ob_name,
                    claim: &o.claim,
                    class_name: &o.claim.spec.storage_class_name,
                    bucket_name: &bucket_name,
                    origin,
                    reclaim_policy,
                    access: o.access.as_ref(),
                    label: &ctx.label,
                },
            )
            .await?;
            o.ob = Some(ob);
            failpoint::hit("after-object-bucket-created");
            Ok(Flow::Continue)
        }
        Step::CompleteObjectBucket => {
            let access = o
                .access
                .as_ref()
                .ok_or(Error::MissingField("bucket access"))?;
            let ob = o.ob.as_ref().ok_or(Error::MissingField("ObjectBucket"))?;
            o.ob = Some(writes::complete_object_bucket(&ctx.client, ob, access).await?);
            failpoint::hit("after-object-bucket-completed");
            Ok(Flow::Continue)
        }
        Step::AdoptObjectBucket { origin } => {
            let ob = o.ob.as_ref().ok_or(Error::MissingField("ObjectBucket"))?;
            let adopted = writes::adopt_object_bucket(&ctx.client, ob, &ctx.label, origin).await?;
            let note = format!(
                "ObjectBucket {} was written by another version; it now carries this provisioner's label and finalizer",
                adopted.name_any()
            );
            o.ob = Some(adopted);
            ctx.event(&o.claim, EventType::Normal, "TakenOver", "TakeOver", note)
                .await;
            Ok(Flow::Continue)
        }
        Step::WriteSecret => {
            let access = o
                .access
                .as_ref()
                .ok_or(Error::MissingField("bucket access"))?;
            let secret = writes::secret(&o.claim, &ctx.label, &access.credentials)?;
            o.secret = Some(writes::write_child(&ctx.client, &o.claim, secret).await?);
            o.secret_synced = true;
            failpoint::hit("after-secret-written");
            Ok(Flow::Continue)
        }
        Step::AdoptSecret => {
            let meta = o.secret.as_ref().ok_or(Error::MissingField("Secret"))?;
            o.secret = Some(writes::adopt_child::<Secret>(&ctx.client, meta, &ctx.label).await?);
            Ok(Flow::Continue)
        }
        Step::WriteConfigMap => {
            let endpoint =
                o.ob.as_ref()
                    .and_then(|ob| ob.spec.endpoint.clone())
                    .ok_or(Error::MissingField("ObjectBucket endpoint"))?;
            let cm = writes::config_map(&o.claim, &ctx.label, &endpoint)?;
            o.config_map = Some(writes::write_child(&ctx.client, &o.claim, cm).await?);
            o.config_map_synced = true;
            failpoint::hit("after-config-map-written");
            Ok(Flow::Continue)
        }
        Step::AdoptConfigMap => {
            let meta = o
                .config_map
                .as_ref()
                .ok_or(Error::MissingField("ConfigMap"))?;
            o.config_map =
                Some(writes::adopt_child::<ConfigMap>(&ctx.client, meta, &ctx.label).await?);
            Ok(Flow::Continue)
        }
        Step::BindClaim => {
            let ob_name = plan::object_bucket_name(&o.claim);
            o.claim = writes::bind_claim(&ctx.client, &o.claim, &ob_name).await?;
            failpoint::hit("after-claim-bound");
            if o.claim.spec.object_bucket_name.as_deref() != Some(ob_name.as_str()) {
                // The CRD's schema lacks the field and the apiserver pruned it.
                // The ObjectBucket's claimRef still records the binding, and
                // observation finds it by name, so carry on without it.
                o.bind_pruned = true;
                if let Some(uid) = o.claim.metadata.uid.clone() {
                    ctx.pruned_binds
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(uid);
                }
                ctx.event(&o.claim, EventType::Warning, "ObjectBucketNameDropped", "Bind", format!(
                    "the apiserver dropped spec.objectBucketName ({ob_name}): the installed ObjectBucketClaim CRD lacks the field; install the CRDs shipped in crds/. The claim is bound through ObjectBucket {ob_name}'s claimRef meanwhile"
                )).await;
            }
            Ok(Flow::Continue)
        }
        Step::MarkObjectBucketBound => {
            let ob = o.ob.as_ref().ok_or(Error::MissingField("ObjectBucket"))?;
            o.ob =
                Some(writes::set_object_bucket_phase(&ctx.client, ob, BucketPhase::Bound).await?);
            failpoint::hit("after-object-bucket-bound");
            Ok(Flow::Continue)
        }
        Step::MarkClaimBound => {
            let bucket =
                o.ob.as_ref()
                    .and_then(ObjectBucket::bucket_name)
                    .unwrap_or_default();
            let message = format!(
                "bucket {bucket:?} is bound: credentials in Secret {name:?}, endpoint in ConfigMap {name:?}",
                name = o.claim.name_any()
            );
            let desired = status::desired(&o.claim, ClaimPhase::Bound, "Provisioned", &message);
            o.claim = writes::write_claim_status(&ctx.client, &o.claim, &desired).await?;
            ctx.event(&o.claim, EventType::Normal, "Bound", "Provision", message)
                .await;
            Ok(Flow::Continue)
        }
        Step::Teardown { delete_bucket } => teardown(delete_bucket, o, ctx).await,
        Step::DeleteObjectBucket => {
            let ob = o.ob.take().ok_or(Error::MissingField("ObjectBucket"))?;
            writes::remove_object_bucket(&ctx.client, &ob).await?;
            failpoint::hit("after-object-bucket-released");
            Ok(Flow::Continue)
        }
        Step::ReleaseObjectBucket => {
            let mut ob = o.ob.take().ok_or(Error::MissingField("ObjectBucket"))?;
            if ob.status.as_ref().and_then(|s| s.phase) != Some(BucketPhase::Released) {
                ob = writes::set_object_bucket_phase(&ctx.client, &ob, BucketPhase::Released)
                    .await?;
            }
            o.ob = writes::release_object_bucket(&ctx.client, &ob).await?;
            failpoint::hit("after-object-bucket-released");
            ctx.event(&o.claim, EventType::Normal, "Released", "Delete", format!(
                "bucket {:?} is retained; ObjectBucket {} is Released and may be deleted by an administrator",
                ob.bucket_name().unwrap_or_default(), ob.name_any()
            )).await;
            Ok(Flow::Continue)
        }
        Step::ReleaseSecret => {
            let meta = o.secret.take().ok_or(Error::MissingField("Secret"))?;
            writes::release_child::<Secret>(&ctx.client, &meta).await?;
            failpoint::hit("after-secret-released");
            Ok(Flow::Continue)
        }
        Step::ReleaseConfigMap => {
            let meta = o
                .config_map
                .take()
                .ok_or(Error::MissingField("ConfigMap"))?;
            writes::release_child::<ConfigMap>(&ctx.client, &meta).await?;
            failpoint::hit("after-config-map-released");
            Ok(Flow::Continue)
        }
        Step::RemoveClaimFinalizer => {
            writes::remove_claim_finalizer(&ctx.client, &o.claim).await?;
            failpoint::hit("after-claim-finalizer-removed");
            Ok(Flow::Stop(Action::await_change()))
        }
    }
}

/// Finalizer, label and a generated name in one patch, then a read-back.
async fn prepare_claim<P: Provisioner>(
    generate_from: Option<String>,
    o: &mut Observed,
    ctx: &Context<P>,
) -> Result<Flow> {
    let generated = match generate_from {
        Some(prefix) => Some(names::generate_bucket_name(&prefix).map_err(Error::InvalidClaim)?),
        None => None,
    };
    o.claim =
        writes::prepare_claim(&ctx.client, &o.claim, &ctx.label, generated.as_deref()).await?;
    failpoint::hit("after-claim-prepared");
    // A DELETE that raced the finalizer may still remove the claim:
    // the apiserver decided before the finalizer landed. Confirm the
    // claim is there before anything is created for it (and reserve
    // the ObjectBucket before the provisioner runs: see next_step).
    if !refresh_claim(o, ctx).await? {
        return Err(Error::ClaimGone {
            action: "confirm the claim after adding the finalizer",
        });
    }
    o.prepared_now = true;
    Ok(Flow::Continue)
}

/// Asks the provisioner for the bucket (greenfield) or access (brownfield).
async fn obtain_access<P: Provisioner>(
    bucket_name: String,
    origin: BucketOrigin,
    o: &mut Observed,
    ctx: &Context<P>,
) -> Result<Flow> {
    let ClassState::Ours(class) = &o.class else {
        return Err(Error::Waiting(
            "the StorageClass is needed to provision".into(),
        ));
    };
    let request = BucketRequest::for_claim(&o.claim, bucket_name, class);
    let (operation, result) = match origin {
        BucketOrigin::Greenfield => (
            "provision",
            ctx.timed("provision", ctx.provisioner.provision(&request))
                .await,
        ),
        BucketOrigin::Brownfield => (
            "grant",
            ctx.timed("grant", ctx.provisioner.grant(&request)).await,
        ),
    };
    match result {
        Ok(access) => {
            info!(claim = %claim_key(&o.claim), bucket = %request.bucket_name, operation, "provisioner succeeded");
            o.access = Some(access);
            failpoint::hit("after-bucket-created");
            Ok(Flow::Continue)
        }
        Err(source) => {
            if let (false, Some(ob)) = (source.is_retryable(), &o.ob)
                && plan::is_reserved(ob)
            {
                // Refused outright: no bucket was made, so the
                // reservation would only be something half-created.
                writes::remove_object_bucket(&ctx.client, ob).await?;
                o.ob = None;
            }
            Err(provisioner_failed(o, ctx, operation, source).await)
        }
    }
}

/// Calls Delete (or Revoke) for a claim being deleted, and says so.
async fn teardown<P: Provisioner>(
    delete_bucket: bool,
    o: &mut Observed,
    ctx: &Context<P>,
) -> Result<Flow> {
    if delete_bucket
        && let Some(ob) = &o.ob
        && ob.spec.reclaim_policy == ReclaimPolicy::Retain
    {
        // Deleting under Retain: only a reserved (never completed)
        // ObjectBucket says so, and a cached copy may be an old,
        // reserved version of one that is complete by now (a watch
        // lagging after an apiserver restart). Confirm with the API;
        // if it differs, plan again on the current copy.
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
            return Ok(Flow::Continue);
        }
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
        Err(source) => return Err(provisioner_failed(o, ctx, operation, source).await),
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

/// Builds the teardown request from the ObjectBucket, or, when provisioning
/// died before the ObjectBucket existed, from the claim.
fn teardown_request(o: &Observed) -> TeardownRequest {
    let parameters = plan::class_parameters(&o.class);
    if let Some(ob) =
        o.ob.as_ref()
            .filter(|ob| plan::claim_ref_matches(ob, &o.claim))
    {
        let mut request = TeardownRequest::for_object_bucket(ob, parameters);
        request.claim = ClaimIdentity::of(&o.claim);
        return request;
    }
    let bucket_name = plan::fixed_bucket_name(&o.claim)
        .map(str::to_owned)
        .or_else(|| {
            parameters
                .get(crate::api::BROWNFIELD_BUCKET_PARAMETER)
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

/// Shows a provisioner failure on the claim and turns it into the error
/// that drives the retry.
async fn provisioner_failed<P: Provisioner>(
    o: &mut Observed,
    ctx: &Context<P>,
    operation: &'static str,
    source: ProvisionError,
) -> Error {
    let timed_out = std::error::Error::source(&source).is_some_and(|s| s.is::<super::TimedOut>());
    let (phase, reason) = match (source.is_retryable(), timed_out) {
        (false, _) => (ClaimPhase::Failed, "ProvisionerRejected"),
        (true, true) => (ClaimPhase::Pending, "ProvisionerTimeout"),
        (true, false) => (ClaimPhase::Pending, "ProvisionerUnavailable"),
    };
    let problem = Problem {
        reason,
        message: format!("{operation} failed: {source}"),
    };
    if let Err(e) = show_problem(o, ctx, phase, &problem).await {
        return e;
    }
    Error::Provisioner { operation, source }
}

/// Writes a problem into the claim's status and, when the status changes,
/// an Event. Unchanged problems are not rewritten on every retry.
async fn show_problem<P: Provisioner>(
    o: &mut Observed,
    ctx: &Context<P>,
    phase: ClaimPhase,
    problem: &Problem,
) -> Result<()> {
    // A claim being deleted keeps its phase; the message tells what blocks it.
    let phase = if o.claim.metadata.deletion_timestamp.is_some() {
        o.claim
            .status
            .as_ref()
            .and_then(|s| s.phase)
            .unwrap_or(phase)
    } else {
        phase
    };
    let desired = status::desired(&o.claim, phase, problem.reason, &problem.message);
    if !status::differs(&o.claim, &desired) {
        return Ok(());
    }
    match writes::write_claim_status(&ctx.client, &o.claim, &desired).await {
        Ok(updated) => o.claim = updated,
        // Deleted meanwhile: nothing to show it on.
        Err(Error::ClaimGone { .. }) => return Ok(()),
        Err(e) => return Err(e),
    }
    let type_ = if phase == ClaimPhase::Failed || problem.reason != "StorageClassNotFound" {
        EventType::Warning
    } else {
        EventType::Normal
    };
    ctx.event(
        &o.claim,
        type_,
        problem.reason,
        "Provision",
        problem.message.clone(),
    )
    .await;
    Ok(())
}
