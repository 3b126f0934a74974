//! The BucketClaim pass: observe (from the API), plan, take one step,
//! again, until done or halted; one function per step.

use std::sync::Arc;

use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::controller::Action;
use serde_json::json;

use super::plan::{self, Observed, Step};
use crate::core::error::Error;
use crate::core::provisioner::Provisioner;
use crate::cosi::api::{
    BUCKETCLAIM_BEING_DELETED_ANNOTATION, Bucket, BucketAccess, BucketClaim, BucketClass,
};
use crate::cosi::context::{CosiContext, MAX_STEPS, REFUSED_RETRY, RESYNC};
use crate::cosi::failpoint;
use crate::cosi::plan::Next;
use crate::cosi::show::{self, Halt};
use crate::cosi::writes;

/// Reconciles one BucketClaim.
pub(crate) async fn reconcile<P: Provisioner>(
    claim: Arc<BucketClaim>,
    ctx: Arc<CosiContext<P>>,
) -> Result<Action, Error> {
    ctx.runtime.caches_ready().await;
    let ns = claim.namespace().ok_or(Error::MissingField("namespace"))?;
    let claims: Api<BucketClaim> = Api::namespaced(ctx.client.clone(), &ns);
    let key = crate::core::backoff::backoff_key(claim.as_ref());
    for _ in 0..MAX_STEPS {
        let Some(o) = observe(&ctx, &claims, &claim.name_any()).await? else {
            return Ok(Action::await_change());
        };
        let halt = match plan::next_step(&o) {
            Next::Done => {
                ctx.backoff.reset(&key);
                return Ok(Action::requeue(RESYNC));
            }
            Next::Wait(m) => Halt::Wait(m),
            Next::Refuse(m) => Halt::Refuse(m),
            Next::Step(step) => {
                ctx.runtime.ensure_leading()?;
                execute(&ctx, &claims, &o, step).await?;
                continue;
            }
        };
        show_halt(&ctx, &claims, &o.claim, &halt).await?;
        return Ok(Action::requeue(if halt.is_refusal() {
            REFUSED_RETRY
        } else {
            ctx.backoff.next(&key)
        }));
    }
    Err(Error::NoConvergence(MAX_STEPS))
}

async fn observe<P>(
    ctx: &CosiContext<P>,
    claims: &Api<BucketClaim>,
    name: &str,
) -> Result<Option<Observed>, Error> {
    let Some(claim) = writes::get(claims, name, "read the BucketClaim").await? else {
        return Ok(None);
    };
    let buckets: Api<Bucket> = Api::all(ctx.client.clone());
    let bucket = match plan::bucket_name(&claim) {
        Some(b) => writes::get(&buckets, &b, "read the claim's Bucket").await?,
        None => None,
    };
    let class = match (&claim.spec.bucket_class_name, &bucket) {
        (Some(class), None) => {
            let classes: Api<BucketClass> = Api::all(ctx.client.clone());
            writes::get(&classes, class, "read the BucketClass").await?
        }
        _ => None,
    };
    let ns = claim.namespace().unwrap_or_default();
    let accesses = ctx
        .accesses
        .state()
        .iter()
        .filter(|a| a.namespace().as_deref() == Some(&ns) && names_claim(a, name))
        .map(|a| a.name_any())
        .collect();
    Ok(Some(Observed {
        claim,
        bucket,
        class,
        accesses,
    }))
}

fn names_claim(access: &BucketAccess, claim: &str) -> bool {
    access
        .spec
        .bucket_claims
        .iter()
        .any(|c| c.bucket_claim_name == claim)
}

async fn show_halt<P>(
    ctx: &CosiContext<P>,
    claims: &Api<BucketClaim>,
    claim: &BucketClaim,
    halt: &Halt,
) -> Result<(), Error> {
    let status = claim.status.as_ref();
    let shown = (
        status.and_then(|s| s.error.as_ref()),
        status.map(|s| s.ready_to_use),
    );
    if !show::write_error(
        claims,
        &claim.name_any(),
        shown,
        halt.message(),
        "show the claim's error",
    )
    .await?
    {
        return Ok(());
    }
    ctx.event(
        &show::reference(claim),
        halt.is_refusal(),
        halt.reason(),
        halt.message(),
    )
    .await;
    Ok(())
}

async fn execute<P>(
    ctx: &CosiContext<P>,
    claims: &Api<BucketClaim>,
    o: &Observed,
    step: Step,
) -> Result<(), Error> {
    let buckets: Api<Bucket> = Api::all(ctx.client.clone());
    let claim = &o.claim;
    let bucket = || {
        o.bucket
            .as_ref()
            .ok_or(Error::MissingField("the claim's Bucket"))
    };
    match step {
        Step::AddFinalizer => {
            writes::add_finalizer(claims, claim, "add the claim's finalizer").await?;
            failpoint::hit("cosi-after-claim-finalizer-added");
        }
        Step::CreateBucket(new) => {
            writes::create(&buckets, new.as_ref(), "create the claim's Bucket").await?;
            failpoint::hit("cosi-after-bucket-object-created");
        }
        Step::BindBucket => {
            let spec = json!({"bucketClaimRef": {"uid": claim.uid()}});
            writes::patch_spec(
                &buckets,
                bucket()?,
                spec,
                "bind the static Bucket to the claim",
            )
            .await?;
        }
        Step::RecordBinding => {
            let ready = claim.status.as_ref().is_some_and(|s| s.ready_to_use);
            let patch =
                json!({"status": {"boundBucketName": bucket()?.name_any(), "readyToUse": ready}});
            writes::patch_status(
                claims,
                &claim.name_any(),
                &patch,
                "record the claim's Bucket",
            )
            .await?;
            failpoint::hit("cosi-after-claim-bound");
        }
        Step::CopyBucketStatus { ready, protocols } => {
            let patch =
                json!({"status": {"readyToUse": ready, "protocols": protocols, "error": null}});
            writes::patch_status(
                claims,
                &claim.name_any(),
                &patch,
                "copy the Bucket's status",
            )
            .await?;
            if ready {
                let note = format!("Bucket {} is ready", bucket()?.name_any());
                ctx.event(&show::reference(claim), false, "Ready", &note)
                    .await;
            }
        }
        Step::MarkNotReady => {
            let patch = json!({"status": {"readyToUse": false}});
            writes::patch_status(
                claims,
                &claim.name_any(),
                &patch,
                "mark the claim not ready",
            )
            .await?;
        }
        Step::ReleaseBucket => {
            writes::annotate(
                &buckets,
                bucket()?,
                BUCKETCLAIM_BEING_DELETED_ANNOTATION,
                "",
                "release the Bucket",
            )
            .await?;
            failpoint::hit("cosi-after-bucket-released");
        }
        Step::DeleteBucket => {
            writes::delete(&buckets, bucket()?, "delete the Bucket").await?;
            failpoint::hit("cosi-after-bucket-object-deleted");
        }
        Step::RemoveFinalizer => {
            writes::remove_finalizer(claims, claim, "remove the claim's finalizer").await?;
            failpoint::hit("cosi-after-claim-finalizer-removed");
        }
    }
    Ok(())
}
