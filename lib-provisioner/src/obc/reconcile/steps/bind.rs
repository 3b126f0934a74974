//! The binding: on the ObjectBucket's and the claim's status (and on the
//! claim's spec for claims prepared without it by older versions).

use kube::ResourceExt;
use kube::runtime::events::EventType;

use crate::core::error::{Error, Result};
use crate::core::failpoint;
use crate::core::provisioner::Provisioner;
use crate::obc::api::{BucketPhase, ClaimPhase, ObjectBucket};
use crate::obc::reconcile::plan::{self, Observed};
use crate::obc::reconcile::steps::Flow;
use crate::obc::reconcile::{Context, status};
use crate::obc::writes;

/// Records `spec.objectBucketName` on a claim an older version prepared
/// without it (this version writes it with the finalizer).
pub(super) async fn bind_claim<P: Provisioner>(o: &mut Observed, ctx: &Context<P>) -> Result<Flow> {
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

/// Sets the ObjectBucket's status phase to Bound.
pub(super) async fn mark_object_bucket_bound<P: Provisioner>(
    o: &mut Observed,
    ctx: &Context<P>,
) -> Result<Flow> {
    let ob = o.ob.as_ref().ok_or(Error::MissingField("ObjectBucket"))?;
    o.ob = Some(writes::set_object_bucket_phase(&ctx.client, ob, BucketPhase::Bound).await?);
    failpoint::hit("after-object-bucket-bound");
    Ok(Flow::Continue)
}

/// Sets the claim's status to Bound, with an Event.
pub(super) async fn mark_claim_bound<P: Provisioner>(
    o: &mut Observed,
    ctx: &Context<P>,
) -> Result<Flow> {
    let bucket =
        o.ob.as_ref()
            .and_then(ObjectBucket::bucket_name)
            .unwrap_or_default();
    let message = format!(
        "bucket {bucket:?} is bound: credentials in Secret {name:?}, endpoint in ConfigMap {name:?}",
        name = o.claim.name_any()
    );
    let was_bound = o.claim.status.as_ref().and_then(|s| s.phase) == Some(ClaimPhase::Bound);
    let mut desired = status::desired(&o.claim, ClaimPhase::Bound, "Provisioned", &message);
    if plan::holds_generation(o) {
        // The current config was refused (the plan says so): its
        // ConfigApplied=False stays, and the generation is not observed.
        desired = status::keeping_observed_generation(&o.claim, desired);
    } else {
        desired = status::with_condition(
            &o.claim,
            desired,
            status::CONFIG_APPLIED_CONDITION,
            true,
            "Applied",
            "spec.additionalConfig is applied to the bucket",
        );
    }
    o.claim = writes::write_claim_status(&ctx.client, &o.claim, &desired).await?;
    // A spec change of a bound claim is told by the update's own Event.
    if !was_bound {
        ctx.event(&o.claim, EventType::Normal, "Bound", "Provision", message)
            .await;
    }
    Ok(Flow::Continue)
}
