//! A rotation's steps (the order is decided in `plan/rotation.rs`): record
//! it, issue new credentials, (the Secret is switched by `WriteSecret`),
//! revoke the previous ones, tell the claim and record it done.

use tracing::info;

use super::provisioner_failed;
use crate::api::{
    ObjectBucket, ROTATED_ANNOTATION, ROTATION_PENDING_ANNOTATION, ROTATION_PREVIOUS_KEY_ANNOTATION,
};
use crate::error::{Error, Result};
use crate::failpoint;
use crate::provisioner::{BucketRequest, ErrorKind, Provisioner, RotationRequest};
use crate::reconcile::claim::{Flow, claim_key};
use crate::reconcile::plan::{Observed, records};
use crate::reconcile::{Context, status};
use crate::writes;

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

/// Records the rotation and the key it replaces on the ObjectBucket.
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
    match ctx.timed("rotate", ctx.provisioner.rotate(&req)).await {
        Ok(access) => {
            failpoint::hit("after-credentials-rotated");
            o.access = Some(access);
            // The Secret is written with them next (plan: children first);
            // the ConfigMap stands (the endpoint is the one recorded).
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
            tell(o, ctx, false, reason, &message).await?;
            let ob = object_bucket(o)?;
            let records = [
                (ROTATED_ANNOTATION, Some(rotation)),
                (ROTATION_PENDING_ANNOTATION, None),
                (ROTATION_PREVIOUS_KEY_ANNOTATION, None),
            ];
            o.ob =
                Some(writes::set_object_bucket_annotations(&ctx.client, ob, &records, None).await?);
            Ok(Flow::Continue)
        }
    }
}

/// Revokes the credentials the Secret held before the rotation.
pub(super) async fn revoke_previous<P: Provisioner>(
    rotation: String,
    previous: String,
    o: &mut Observed,
    ctx: &Context<P>,
) -> Result<Flow> {
    let ob = object_bucket(o)?;
    let req = request(o, ob, &rotation, &previous);
    match ctx
        .timed("revoke_previous", ctx.provisioner.revoke_previous(&req))
        .await
    {
        Ok(()) => {
            failpoint::hit("after-previous-credentials-revoked");
            o.previous_revoked = true;
            Ok(Flow::Continue)
        }
        Err(source) => Err(provisioner_failed(o, ctx, "revoke_previous", source).await),
    }
}

/// Tells the claim (condition and Event), then records the rotation done
/// (with the provisioner's new state when this pass issued the credentials).
pub(super) async fn finish<P: Provisioner>(
    rotation: String,
    o: &mut Observed,
    ctx: &Context<P>,
) -> Result<Flow> {
    let key = o.secret_key_id.clone().unwrap_or_default();
    let message = format!(
        "credentials rotated ({rotation:?}): the Secret holds access key {key:?}; the previous key is revoked"
    );
    tell(o, ctx, true, "Rotated", &message).await?;
    let ob = object_bucket(o)?;
    let records = [
        (ROTATED_ANNOTATION, Some(rotation)),
        (ROTATION_PENDING_ANNOTATION, None),
        (ROTATION_PREVIOUS_KEY_ANNOTATION, None),
    ];
    let state = o.access.as_ref().map(|a| &a.additional_state);
    o.ob = Some(writes::set_object_bucket_annotations(&ctx.client, ob, &records, state).await?);
    failpoint::hit("after-rotation-finished");
    info!(claim = %claim_key(&o.claim), "credentials rotated");
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
