//! The Bucket pass (driver role): observe, plan, one step, again; one
//! function per step.

use std::sync::Arc;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::plan::{self, Observed, SUPPORTED, Step};
use crate::core::error::Error;
use crate::core::provisioner::{BucketRequest, ClaimIdentity, Provisioner, TeardownRequest};
use crate::cosi::api::{Bucket, BucketClaim, BucketDeletionPolicy};
use crate::cosi::context::{CosiContext, MAX_STEPS, RESYNC};
use crate::cosi::failpoint;
use crate::cosi::keys;
use crate::cosi::plan::Next;
use crate::cosi::show::{self, Halt, retry_after};
use crate::cosi::writes;
use crate::obc::api::ReclaimPolicy;

/// Reconciles one Bucket, if it is this driver's.
pub(crate) async fn reconcile<P: Provisioner>(
    bucket: Arc<Bucket>,
    ctx: Arc<CosiContext<P>>,
) -> Result<Action, Error> {
    if !plan::is_ours(&bucket, &ctx.driver) {
        return Ok(Action::await_change());
    }
    ctx.runtime.caches_ready().await;
    let api: Api<Bucket> = Api::all(ctx.client.clone());
    let key = crate::core::backoff::backoff_key(bucket.as_ref());
    let (mut found, mut deleted) = (None, false);
    for _ in 0..MAX_STEPS {
        let Some(current) = writes::get(&api, &bucket.name_any(), "read the Bucket").await? else {
            return Ok(Action::await_change());
        };
        let o = Observed {
            bucket: current,
            found: found.clone(),
            deleted,
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
                match execute(&ctx, &api, &o, step).await? {
                    Outcome::Found(info) => found = Some(*info),
                    Outcome::Recorded => found = None,
                    Outcome::Deleted => deleted = true,
                    Outcome::Wrote => {}
                    Outcome::Halted(halt) => {
                        show_halt(&ctx, &api, &o.bucket, &halt).await?;
                        return Ok(Action::requeue(retry_after(&ctx, &key, &halt)));
                    }
                }
                continue;
            }
        };
        show_halt(&ctx, &api, &o.bucket, &halt).await?;
        return Ok(Action::requeue(retry_after(&ctx, &key, &halt)));
    }
    Err(Error::NoConvergence(MAX_STEPS))
}

enum Outcome {
    Wrote,
    /// The bucket found in this pass is recorded.
    Recorded,
    Found(Box<crate::core::provisioner::BucketInfo>),
    Deleted,
    Halted(Halt),
}

/// The claim a Bucket names, for the provisioner (its UID may be empty on
/// a static Bucket not bound yet).
fn claim_identity(bucket: &Bucket) -> ClaimIdentity {
    let r = &bucket.spec.bucket_claim_ref;
    ClaimIdentity::new(
        r.namespace.clone(),
        r.name.clone(),
        r.uid.clone().unwrap_or_default(),
    )
}

fn policy(bucket: &Bucket) -> ReclaimPolicy {
    match bucket.spec.deletion_policy {
        BucketDeletionPolicy::Delete => ReclaimPolicy::Delete,
        BucketDeletionPolicy::Retain => ReclaimPolicy::Retain,
    }
}

fn request(bucket: &Bucket, store_name: String) -> BucketRequest {
    BucketRequest::new(claim_identity(bucket), store_name, "")
        .with_object_bucket_name(bucket.name_any())
        .with_parameters(bucket.spec.parameters.clone().unwrap_or_default())
        .with_reclaim_policy(policy(bucket))
}

async fn execute<P: Provisioner>(
    ctx: &CosiContext<P>,
    api: &Api<Bucket>,
    o: &Observed,
    step: Step,
) -> Result<Outcome, Error> {
    let b = &o.bucket;
    match step {
        Step::AddFinalizer => writes::add_finalizer(api, b, "add the Bucket's finalizer").await?,
        Step::Create => {
            let req = request(b, b.name_any());
            let result = ctx
                .call(
                    &b.metadata,
                    "create_bucket",
                    ctx.provisioner.create_bucket(&req),
                )
                .await;
            return Ok(match result {
                Ok(info) => {
                    failpoint::hit("cosi-after-bucket-created");
                    Outcome::Found(Box::new(info))
                }
                Err(e) => Outcome::Halted(show::provisioner_halt(
                    "the driver could not create the bucket",
                    &e,
                )),
            });
        }
        Step::LookUp => {
            let id = b.spec.existing_bucket_id.clone().unwrap_or_default();
            let result = ctx
                .call(
                    &b.metadata,
                    "existing_bucket",
                    ctx.provisioner.existing_bucket(&request(b, id)),
                )
                .await;
            return Ok(match result {
                Ok(info) => Outcome::Found(Box::new(info)),
                Err(e) => Outcome::Halted(show::provisioner_halt(
                    "the driver could not find the existing bucket",
                    &e,
                )),
            });
        }
        Step::RecordBucket => {
            let info = o
                .found
                .as_ref()
                .ok_or(Error::MissingField("the bucket found in this pass"))?;
            let id = plan::store_name(b).unwrap_or_default();
            let patch = json!({"status": {
                "readyToUse": true,
                "bucketID": id,
                "protocols": SUPPORTED,
                "bucketInfo": keys::s3_bucket_info(&id, &info.endpoint),
                "error": null,
            }});
            writes::patch_status(api, &b.name_any(), &patch, "record the bucket").await?;
            failpoint::hit("cosi-after-bucket-ready");
            return Ok(Outcome::Recorded);
        }
        Step::MarkNotReady => {
            let patch = json!({"status": {"readyToUse": false}});
            writes::patch_status(api, &b.name_any(), &patch, "mark the Bucket not ready").await?;
        }
        Step::Delete => {
            let name = plan::store_name(b).unwrap_or_default();
            let mut req = TeardownRequest::new(claim_identity(b), name, "")
                .with_parameters(b.spec.parameters.clone().unwrap_or_default());
            if b.status
                .as_ref()
                .and_then(|s| s.bucket_id.as_ref())
                .is_some()
                && b.spec.existing_bucket_id.is_none()
            {
                req = req.provisioned_as(b.name_any());
            }
            return Ok(
                match ctx
                    .call(&b.metadata, "delete", ctx.provisioner.delete(&req))
                    .await
                {
                    Ok(()) => {
                        failpoint::hit("cosi-after-bucket-deleted");
                        Outcome::Deleted
                    }
                    Err(e) => Outcome::Halted(show::provisioner_halt(
                        "the driver could not delete the bucket",
                        &e,
                    )),
                },
            );
        }
        Step::RemoveFinalizer => {
            writes::remove_finalizer(api, b, "remove the Bucket's finalizer").await?
        }
    }
    Ok(Outcome::Wrote)
}

/// A Bucket's problem: on its status, and as an Event on the claim it
/// names (the user's object), if that claim is the one bound.
async fn show_halt<P>(
    ctx: &CosiContext<P>,
    api: &Api<Bucket>,
    b: &Bucket,
    halt: &Halt,
) -> Result<(), Error> {
    let status = b.status.as_ref();
    let shown = (
        status.and_then(|s| s.error.as_ref()),
        status.map(|s| s.ready_to_use),
    );
    if !show::write_error(
        api,
        &b.name_any(),
        shown,
        halt.message(),
        "show the Bucket's error",
    )
    .await?
    {
        return Ok(());
    }
    let note = format!("Bucket {}: {}", b.name_any(), halt.message());
    ctx.event(&claim_reference(b), halt.is_refusal(), halt.reason(), &note)
        .await;
    Ok(())
}

fn claim_reference(b: &Bucket) -> ObjectReference {
    let r = &b.spec.bucket_claim_ref;
    ObjectReference {
        api_version: Some(BucketClaim::api_version(&()).into_owned()),
        kind: Some(BucketClaim::kind(&()).into_owned()),
        namespace: Some(r.namespace.clone()),
        name: Some(r.name.clone()),
        uid: r.uid.clone(),
        ..Default::default()
    }
}
