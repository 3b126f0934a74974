//! A Bound claim's changed `spec.additionalConfig`: the provisioner's
//! `update`, then the config recorded as applied on the ObjectBucket.
//!
//! The record is written after the store changed, so a crash in between
//! calls `update` again with the same request (it is idempotent); a refusal
//! is shown on the claim, which stays Bound, and settles that generation.

use kube::runtime::events::EventType;
use tracing::info;

use crate::core::error::{Error, Result};
use crate::core::failpoint;
use crate::core::provisioner::{BucketRequest, ErrorKind, Provisioner, UpdateRequest};
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
