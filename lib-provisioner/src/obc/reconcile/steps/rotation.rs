//! A rotation's steps (the order is decided in `plan/rotation.rs`): record
//! it, issue new credentials, (record them and switch the Secret:
//! `RecordAccess`, `WriteSecret`), revoke the previous ones, tell the claim
//! what became of them and record the rotation done; or end it, saying why.

use tracing::info;

use super::provisioner_failed;
use crate::core::error::{Error, Result};
use crate::core::failpoint;
use crate::core::provisioner::{
    BucketRequest, ErrorKind, Provisioner, Revocation, RotationRequest,
};
use crate::obc::api::{
    ObjectBucket, ROTATED_ANNOTATION, ROTATION_PENDING_ANNOTATION, ROTATION_PREVIOUS_KEY_ANNOTATION,
};
use crate::obc::reconcile::plan::{Observed, Problem, records};
use crate::obc::reconcile::read::claim_key;
use crate::obc::reconcile::steps::Flow;
use crate::obc::reconcile::{Context, status};
use crate::obc::writes;

fn request(o: &Observed, ob: &ObjectBucket, rotation: &str, previous: &str) -> RotationRequest {
    let parameters = records::parameters_for(Some(ob), &o.class).unwrap_or_default();
    RotationRequest::new(
        BucketRequest::for_bound_claim(&o.claim, ob, parameters),
        rotation,
        previous,
    )
    .with_state(ob.spec.additional_state.clone().unwrap_or_default())
}

fn object_bucket(o: &Observed) -> Result<&ObjectBucket> {
    o.ob.as_ref().ok_or(Error::MissingField("ObjectBucket"))
}

/// Records the rotation and the key it replaces (the ObjectBucket's own
/// record of the Secret's key) on the ObjectBucket.
pub(super) async fn start<P: Provisioner>(
    rotation: String,
    previous: String,
    o: &mut Observed,
    ctx: &Context<P>,
) -> Result<Flow> {
    let ob = object_bucket(o)?;
    let records = [
        (ROTATION_PENDING_ANNOTATION, Some(rotation)),
        (ROTATION_PREVIOUS_KEY_ANNOTATION, Some(previous)),
    ];
    o.ob = Some(writes::set_object_bucket_annotations(&ctx.client, ob, &records, None).await?);
    failpoint::hit("after-rotation-started");
    Ok(Flow::Continue)
}

/// Asks the provisioner for new credentials; a refusal ends the rotation
/// and says why on the claim.
pub(super) async fn rotate<P: Provisioner>(
    rotation: String,
    previous: String,
    o: &mut Observed,
    ctx: &Context<P>,
) -> Result<Flow> {
    let ob = object_bucket(o)?;
    let req = request(o, ob, &rotation, &previous);
    match ctx
        .runtime
        .timed("rotate", ctx.provisioner.rotate(&req))
        .await
    {
        Ok(access) => {
            failpoint::hit("after-credentials-rotated");
            o.access = Some(access);
            o.rotated_now = true;
            // Recorded and written into the Secret next (plan: children
            // first); the ConfigMap stands (the endpoint is the one recorded).
            o.secret_synced = false;
            o.config_map_synced = true;
            Ok(Flow::Continue)
        }
        Err(source) if source.is_retryable() => {
            Err(provisioner_failed(o, ctx, "rotate", source).await)
        }
        Err(source) => {
            let reason = if source.kind() == ErrorKind::Unsupported {
                "RotationNotSupported"
            } else {
                "RotationRefused"
            };
            let message = format!(
                "credentials were not rotated ({rotation:?}): {source}. The claim keeps its credentials"
            );
            end(rotation, Problem { reason, message }, o, ctx).await
        }
    }
}

/// Revokes the credentials the Secret held before the rotation, and keeps
/// what the provisioner says it did with them.
pub(super) async fn revoke_previous<P: Provisioner>(
    rotation: String,
    previous: String,
    o: &mut Observed,
    ctx: &Context<P>,
) -> Result<Flow> {
    let ob = object_bucket(o)?;
    let req = request(o, ob, &rotation, &previous);
    match ctx
        .runtime
        .timed("revoke_previous", ctx.provisioner.revoke_previous_key(&req))
        .await
    {
        Ok(revocation) => {
            failpoint::hit("after-previous-credentials-revoked");
            o.revocation = Some(revocation);
            Ok(Flow::Continue)
        }
        Err(source) => Err(provisioner_failed(o, ctx, "revoke_previous", source).await),
    }
}

/// Tells the claim (condition and Event) which key the Secret holds and
/// what became of the previous one, then records the rotation done.
pub(super) async fn finish<P: Provisioner>(
    rotation: String,
    previous: String,
    o: &mut Observed,
    ctx: &Context<P>,
) -> Result<Flow> {
    let ob = object_bucket(o)?;
    let key = records::recorded_key(ob).unwrap_or_default().to_owned();
    let revocation = o.revocation.clone().unwrap_or(Revocation::Unreported);
    let rotated =
        format!("credentials rotated ({rotation:?}): the Secret holds access key {key:?}");
    let (done, reason, message) = match &revocation {
        Revocation::Kept(why) => (
            false,
            "PreviousKeyKept",
            format!(
                "{rotated}, but the provisioner kept the previous key {previous:?}: {why}. That key may still work: revoke it in the store"
            ),
        ),
        other => (
            true,
            "Rotated",
            format!("{rotated}; the previous key {previous:?} was {other}"),
        ),
    };
    tell(o, ctx, done, reason, &message).await?;
    record_over(rotation, o, ctx).await?;
    failpoint::hit("after-rotation-finished");
    info!(claim = %claim_key(&o.claim), %revocation, "credentials rotated");
    Ok(Flow::Continue)
}

/// Ends a rotation that cannot be done: `CredentialsRotated=False` with
/// the reason, an Event, and the rotation recorded (not asked again).
pub(super) async fn end<P: Provisioner>(
    rotation: String,
    problem: Problem,
    o: &mut Observed,
    ctx: &Context<P>,
) -> Result<Flow> {
    let message = if problem.message.contains(&format!("{rotation:?}")) {
        problem.message
    } else {
        format!(
            "credentials were not rotated ({rotation:?}): {}",
            problem.message
        )
    };
    tell(o, ctx, false, problem.reason, &message).await?;
    record_over(rotation, o, ctx).await?;
    Ok(Flow::Continue)
}

/// Records on the ObjectBucket that `rotation` is over.
async fn record_over<P: Provisioner>(
    rotation: String,
    o: &mut Observed,
    ctx: &Context<P>,
) -> Result<()> {
    let ob = object_bucket(o)?;
    let records = [
        (ROTATED_ANNOTATION, Some(rotation)),
        (ROTATION_PENDING_ANNOTATION, None),
        (ROTATION_PREVIOUS_KEY_ANNOTATION, None),
    ];
    o.ob = Some(writes::set_object_bucket_annotations(&ctx.client, ob, &records, None).await?);
    Ok(())
}

/// Records, before the Secret is written with the access obtained in this
/// pass, its access key id and the provisioner's state on the ObjectBucket.
/// An older ObjectBucket's rotation under way (its previous key was read
/// from the Secret) is dropped in the same patch: it starts again from
/// this record.
pub(super) async fn record_access<P: Provisioner>(
    o: &mut Observed,
    ctx: &Context<P>,
) -> Result<Flow> {
    let ob = object_bucket(o)?;
    let access = o
        .access
        .as_ref()
        .ok_or(Error::MissingField("bucket access"))?;
    let restart: &[(&'static str, Option<String>)] = if records::recorded_key(ob).is_none() {
        &[
            (ROTATION_PENDING_ANNOTATION, None),
            (ROTATION_PREVIOUS_KEY_ANNOTATION, None),
        ]
    } else {
        &[]
    };
    o.ob = Some(writes::record_access(&ctx.client, ob, access, restart).await?);
    failpoint::hit("after-access-recorded");
    Ok(Flow::Continue)
}

/// The `CredentialsRotated` condition, and an Event, when it changes.
async fn tell<P: Provisioner>(
    o: &mut Observed,
    ctx: &Context<P>,
    done: bool,
    reason: &'static str,
    message: &str,
) -> Result<()> {
    let condition = status::CREDENTIALS_ROTATED_CONDITION;
    super::show_condition(o, ctx, condition, done, reason, ("Rotate", message)).await
}
