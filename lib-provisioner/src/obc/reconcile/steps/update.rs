//! A Bound claim's changed `spec.additionalConfig`: the provisioner's
//! `update`, then the config recorded as applied on the ObjectBucket; and
//! the periodic check that the bucket still holds it (`check_config`).
//!
//! The record is written after the store changed, so a crash in between
//! calls `update` again with the same request (it is idempotent); a refusal
//! is shown on the claim, which stays Bound, and settles that generation.

use kube::runtime::events::EventType;
use tracing::info;

use crate::core::error::{Error, Result};
use crate::core::failpoint;
use crate::core::provisioner::{BucketRequest, ConfigCheck, ErrorKind, Provisioner, UpdateRequest};
use crate::obc::api::{APPLIED_CONFIG_ANNOTATION, ObjectBucket};
use crate::obc::reconcile::plan::{Observed, records};
use crate::obc::reconcile::read::claim_key;
use crate::obc::reconcile::steps::Flow;
use crate::obc::reconcile::{Context, status};
use crate::obc::writes;

/// Calls the provisioner's `update` and records the config as applied; or
/// shows on the claim why it was not.
pub(super) async fn update_bucket<P: Provisioner>(
    o: &mut Observed,
    ctx: &Context<P>,
) -> Result<Flow> {
    let ob = o.ob.as_ref().ok_or(Error::MissingField("ObjectBucket"))?;
    let request = update_request(o, ob);
    let changed = request.changed_keys().join(", ");
    match ctx
        .runtime
        .timed("update", ctx.provisioner.update(&request))
        .await
    {
        Ok(()) => {
            failpoint::hit("after-bucket-updated");
            let wanted = records::encode(&request.bucket.additional_config);
            o.ob = Some(
                writes::annotate_object_bucket(
                    &ctx.client,
                    ob,
                    &[(APPLIED_CONFIG_ANNOTATION, wanted)],
                )
                .await?,
            );
            failpoint::hit("after-config-recorded");
            info!(claim = %claim_key(&o.claim), changed, "config applied");
            let note = format!(
                "spec.additionalConfig applied to bucket {:?} (changed: {changed})",
                request.bucket.bucket_name
            );
            ctx.event(&o.claim, EventType::Normal, "Updated", "Update", note)
                .await;
            Ok(Flow::Continue)
        }
        Err(source) => {
            let (reason, settled) = match source.kind() {
                ErrorKind::Unsupported => ("UpdateNotSupported", true),
                ErrorKind::Retryable => ("UpdatePending", false),
                _ => ("UpdateRefused", true),
            };
            let message = if settled {
                format!(
                    "spec.additionalConfig (changed: {changed}) was not applied: {source}. The bucket keeps the config last applied; status.observedGeneration stays at that spec"
                )
            } else {
                format!(
                    "applying spec.additionalConfig (changed: {changed}) failed, retrying: {source}"
                )
            };
            show_update_problem(o, ctx, reason, &message).await?;
            if settled {
                Ok(Flow::Continue)
            } else {
                Err(Error::Provisioner {
                    operation: "update",
                    source,
                })
            }
        }
    }
}

/// Asks the provisioner whether the bucket still holds the config recorded
/// as applied, and shows what it put back or could not. Writes nothing when
/// the bucket is as it should be.
pub(super) async fn check_config<P: Provisioner>(
    o: &mut Observed,
    ctx: &Context<P>,
) -> Result<Flow> {
    let ob = o.ob.as_ref().ok_or(Error::MissingField("ObjectBucket"))?;
    let request = check_request(o, ob);
    let uid = o.claim.metadata.uid.clone().unwrap_or_default();
    o.config_check_due = false;
    match ctx
        .runtime
        .timed("check_config", ctx.provisioner.check_config(&request))
        .await
    {
        Ok(found) => {
            ctx.config_checks.checked(&uid);
            if let ConfigCheck::Restored(what) = &found {
                let what = what.join(", ");
                info!(claim = %claim_key(&o.claim), restored = %what, "bucket settings changed on the store were put back");
                let note = format!(
                    "bucket {:?} no longer held what spec.additionalConfig asks ({what}), changed on the store outside the claim: put back",
                    request.bucket.bucket_name
                );
                ctx.event(
                    &o.claim,
                    EventType::Warning,
                    "ConfigRestored",
                    "CheckConfig",
                    note,
                )
                .await;
            }
            Ok(Flow::Continue)
        }
        Err(source) => {
            let message = format!(
                "bucket {:?} no longer holds what spec.additionalConfig asks and it could not be put back: {source}",
                request.bucket.bucket_name
            );
            show_update_problem(o, ctx, "ConfigDrifted", &message).await?;
            Err(Error::Provisioner {
                operation: "check_config",
                source,
            })
        }
    }
}

/// The check compares with what was applied, which is the spec unless a
/// change of it was refused.
fn check_request(o: &Observed, ob: &ObjectBucket) -> UpdateRequest {
    let mut request = update_request(o, ob);
    request.bucket.additional_config = request.previous_config.clone();
    request
}

fn update_request(o: &Observed, ob: &ObjectBucket) -> UpdateRequest {
    let parameters = records::parameters_for(Some(ob), &o.class).unwrap_or_default();
    let previous = records::applied_config(ob).unwrap_or_default();
    UpdateRequest::new(
        BucketRequest::for_bound_claim(&o.claim, ob, parameters),
        previous,
    )
    .with_state(ob.spec.additional_state.clone().unwrap_or_default())
}

/// `ConfigApplied=False` on a claim that stays Bound, and an Event, when
/// either changes.
async fn show_update_problem<P: Provisioner>(
    o: &mut Observed,
    ctx: &Context<P>,
    reason: &'static str,
    message: &str,
) -> Result<()> {
    let condition = status::CONFIG_APPLIED_CONDITION;
    super::show_condition(o, ctx, condition, false, reason, ("Update", message)).await
}
