//! The BucketClaim pass (binding role): its round for [`pass::run`]
//! (observe from the API, plan, one step), and its steps, all writes.

use std::sync::Arc;

use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use serde_json::json;

use super::plan::{self, Observed, Step};
use crate::core::error::Error;
use crate::core::provisioner::Provisioner;
use crate::cosi::api::{BUCKETCLAIM_BEING_DELETED_ANNOTATION, Bucket, BucketClaim, BucketClass};
use crate::cosi::context::CosiContext;
use crate::cosi::failpoint;
use crate::cosi::fresh;
use crate::cosi::pass::{self, Pass, Progress};
use crate::cosi::show::{self, Halt};
use crate::cosi::writes;

/// Reconciles one BucketClaim.
pub(crate) async fn reconcile<P: Provisioner>(
    claim: Arc<BucketClaim>,
    ctx: Arc<CosiContext<P>>,
) -> Result<Action, Error> {
    pass::run::<P, ClaimPass>(&claim, &ctx).await
}

/// A BucketClaim's pass (its steps keep nothing between them).
#[derive(Default)]
struct ClaimPass;

impl<P: Provisioner> Pass<P> for ClaimPass {
    type Object = BucketClaim;
    const READ: &'static str = "read the BucketClaim";
    const SHOW: &'static str = "show the claim's error";

    fn api(ctx: &CosiContext<P>, claim: &BucketClaim) -> Result<Api<BucketClaim>, Error> {
        pass::namespaced(ctx, claim)
    }

    async fn round(
        &mut self,
        ctx: &CosiContext<P>,
        claims: &Api<BucketClaim>,
        current: &BucketClaim,
    ) -> Result<Progress, Error> {
        let o = observe(ctx, current.clone()).await?;
        pass::take(ctx, plan::next_step(&o), |step| {
            execute(ctx, claims, &o, step)
        })
        .await
    }
}

/// The claim's Bucket and its class while it has no Bucket, where the
/// plan looks at them ([`plan::looks_at_bucket`]), and, for a deleting
/// claim, a BucketAccess naming it (from the access watch's index:
/// [`crate::cosi::access::by_claim`]).
async fn observe<P>(ctx: &CosiContext<P>, claim: BucketClaim) -> Result<Observed, Error> {
    let buckets: Api<Bucket> = Api::all(ctx.client.clone());
    let looks = plan::looks_at_bucket(&claim);
    let bucket = match plan::bucket_name(&claim).filter(|_| looks) {
        Some(b) => {
            let cache = Some(&ctx.caches.buckets);
            fresh::read(
                cache,
                &buckets,
                ObjectRef::new(&b),
                "read the claim's Bucket",
            )
            .await?
        }
        None => None,
    };
    let class = match (&claim.spec.bucket_class_name, &bucket) {
        (Some(class), None) if looks => {
            let classes: Api<BucketClass> = Api::all(ctx.client.clone());
            let cache = Some(&ctx.caches.classes);
            fresh::read(
                cache,
                &classes,
                ObjectRef::new(class),
                "read the BucketClass",
            )
            .await?
        }
        _ => None,
    };
    let access = claim.metadata.deletion_timestamp.as_ref().and_then(|_| {
        let (ns, name) = (claim.namespace().unwrap_or_default(), claim.name_any());
        let naming = ctx.accesses.naming(&ns, &name);
        naming.into_iter().next().map(|a| a.name)
    });
    Ok(Observed {
        claim,
        bucket,
        class,
        access,
        now: k8s_openapi::jiff::Timestamp::now(),
    })
}

/// Takes one step (all writes: it never halts).
async fn execute<P>(
    ctx: &CosiContext<P>,
    claims: &Api<BucketClaim>,
    o: &Observed,
    step: Step,
) -> Result<Option<Halt>, Error> {
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
            writes::patch_status(claims, claim, &patch, "record the claim's Bucket").await?;
            failpoint::hit("cosi-after-claim-bound");
        }
        Step::CopyBucketStatus { ready, protocols } => {
            let patch =
                json!({"status": {"readyToUse": ready, "protocols": protocols, "error": null}});
            writes::patch_status(claims, claim, &patch, "copy the Bucket's status").await?;
            if ready {
                let note = format!("Bucket {} is ready", bucket()?.name_any());
                ctx.event(&show::reference(claim), false, "Ready", &note)
                    .await;
            }
        }
        Step::MarkNotReady => {
            let patch = json!({"status": {"readyToUse": false}});
            writes::patch_status(claims, claim, &patch, "mark the claim not ready").await?;
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
    Ok(None)
}
