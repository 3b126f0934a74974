//! The Bucket pass (driver role): its round for [`pass::run`] (observe,
//! plan, one step), and one function per step that calls the provisioner.

use std::sync::Arc;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::plan::{self, Observed, SUPPORTED, Step};
use crate::core::error::Error;
use crate::core::provisioner::{
    BucketInfo, BucketRequest, ClaimIdentity, Provisioner, ReclaimPolicy, TeardownRequest,
};
use crate::cosi::api::{Bucket, BucketClaim, BucketDeletionPolicy};
use crate::cosi::context::CosiContext;
use crate::cosi::failpoint;
use crate::cosi::keys;
use crate::cosi::pass::{self, Pass, Progress};
use crate::cosi::show::{Halt, provisioner_halt};
use crate::cosi::writes;

/// Reconciles one Bucket, if it is this driver's.
pub(crate) async fn reconcile<P: Provisioner>(
    bucket: Arc<Bucket>,
    ctx: Arc<CosiContext<P>>,
) -> Result<Action, Error> {
    if !plan::is_ours(&bucket, &ctx.driver) {
        return Ok(Action::await_change());
    }
    pass::run::<P, BucketPass>(&bucket, &ctx).await
}

/// A Bucket's pass, and what the provisioner answered in it.
#[derive(Default)]
struct BucketPass {
    /// What `create_bucket` / `existing_bucket` answered, until recorded.
    found: Option<BucketInfo>,
    /// Whether `delete` succeeded.
    deleted: bool,
    /// Whether `revoke` under `Retain` succeeded.
    kept: bool,
}

impl<P: Provisioner> Pass<P> for BucketPass {
    type Object = Bucket;
    const READ: &'static str = "read the Bucket";
    const SHOW: &'static str = "show the Bucket's error";

    fn api(ctx: &CosiContext<P>, _: &Bucket) -> Result<Api<Bucket>, Error> {
        Ok(Api::all(ctx.client.clone()))
    }

    async fn round(
        &mut self,
        ctx: &CosiContext<P>,
        api: &Api<Bucket>,
        current: &Bucket,
    ) -> Result<Progress, Error> {
        let claim_gone = plan::reads_claim(current) && claim_gone(ctx, current).await?;
        let o = Observed {
            bucket: current.clone(),
            found: self.found.clone(),
            deleted: self.deleted,
            kept: self.kept,
            claim_gone,
        };
        pass::take(ctx, plan::next_step(&o), |step| {
            self.execute(ctx, api, &o, step)
        })
        .await
    }

    /// On the claim the Bucket names (the user's object), if that claim
    /// is the one bound.
    fn event(b: &Bucket, halt: &Halt) -> (ObjectReference, String) {
        let note = format!("Bucket {}: {}", b.name_any(), halt.message());
        (claim_reference(b), note)
    }
}

impl BucketPass {
    /// Takes one step; a failed provisioner call halts.
    async fn execute<P: Provisioner>(
        &mut self,
        ctx: &CosiContext<P>,
        api: &Api<Bucket>,
        o: &Observed,
        step: Step,
    ) -> Result<Option<Halt>, Error> {
        let b = &o.bucket;
        match step {
            Step::AddFinalizer => {
                writes::add_finalizer(api, b, "add the Bucket's finalizer").await?
            }
            Step::Create => return Ok(self.create(ctx, b).await.err()),
            Step::LookUp => return Ok(self.look_up(ctx, b).await.err()),
            Step::RecordBucket => {
                let info = o
                    .found
                    .as_ref()
                    .ok_or(Error::MissingField("the bucket found in this pass"))?;
                record(api, b, info).await?;
                self.found = None;
            }
            Step::MarkNotReady => {
                let patch = json!({"status": {"readyToUse": false}});
                writes::patch_status(api, b, &patch, "mark the Bucket not ready").await?;
            }
            Step::Delete => return Ok(self.delete(ctx, b).await.err()),
            Step::Keep => return Ok(self.keep(ctx, b).await.err()),
            Step::RemoveFinalizer => {
                writes::remove_finalizer(api, b, "remove the Bucket's finalizer").await?
            }
        }
        Ok(None)
    }

    /// `create_bucket`, named after the Bucket.
    async fn create<P: Provisioner>(
        &mut self,
        ctx: &CosiContext<P>,
        b: &Bucket,
    ) -> Result<(), Halt> {
        let req = request(b, b.name_any());
        let call = ctx.provisioner.create_bucket(&req);
        let info = ctx
            .call(&b.metadata, "create_bucket", call)
            .await
            .map_err(provisioner_halt("the driver could not create the bucket"))?;
        failpoint::hit("cosi-after-bucket-created");
        self.found = Some(info);
        Ok(())
    }

    /// `existing_bucket`, by the Bucket's `existingBucketID`.
    async fn look_up<P: Provisioner>(
        &mut self,
        ctx: &CosiContext<P>,
        b: &Bucket,
    ) -> Result<(), Halt> {
        let id = b.spec.existing_bucket_id.clone().unwrap_or_default();
        let req = request(b, id);
        let call = ctx.provisioner.existing_bucket(&req);
        let info = ctx
            .call(&b.metadata, "existing_bucket", call)
            .await
            .map_err(provisioner_halt(
                "the driver could not find the existing bucket",
            ))?;
        self.found = Some(info);
        Ok(())
    }

    /// `delete` of the bucket in the store. A refusal is hastened: what
    /// refuses a deletion (a bucket not empty) is fixed in the store, and
    /// no event says when.
    async fn delete<P: Provisioner>(
        &mut self,
        ctx: &CosiContext<P>,
        b: &Bucket,
    ) -> Result<(), Halt> {
        let req = teardown(b);
        let call = ctx.provisioner.delete(&req);
        let result = ctx.call(&b.metadata, "delete", call).await;
        if result.as_ref().is_err_and(|e| !e.is_retryable()) {
            ctx.refusals.hasten(&b.metadata);
        }
        result.map_err(provisioner_halt("the driver could not delete the bucket"))?;
        failpoint::hit("cosi-after-bucket-deleted");
        self.deleted = true;
        Ok(())
    }
}

impl BucketPass {
    /// `revoke` with reclaim policy `Retain`: the bucket is kept, and the
    /// provisioner records so where its store sweep reads it.
    async fn keep<P: Provisioner>(&mut self, ctx: &CosiContext<P>, b: &Bucket) -> Result<(), Halt> {
        let req = teardown(b).with_reclaim_policy(ReclaimPolicy::Retain);
        let call = ctx.provisioner.revoke(&req);
        ctx.call(&b.metadata, "revoke", call)
            .await
            .map_err(provisioner_halt(
                "the driver could not record that the bucket is kept",
            ))?;
        self.kept = true;
        Ok(())
    }
}

/// Whether the claim the Bucket is bound to is gone: no claim of that
/// namespace and name, or one of another UID (a new claim of the same
/// name is not the bound one). By name, never from anything the tenant
/// writes on the Bucket's behalf. The cache may say the claim lives; that
/// it is gone (which deletes a bucket) only a GET may say.
async fn claim_gone<P>(ctx: &CosiContext<P>, b: &Bucket) -> Result<bool, Error> {
    let r = &b.spec.bucket_claim_ref;
    let bound = |c: &BucketClaim| c.metadata.uid == r.uid;
    let key = ObjectRef::new(&r.name).within(&r.namespace);
    if ctx.caches.claims.get(&key).is_some_and(|c| bound(&c)) {
        return Ok(false);
    }
    let claims: Api<BucketClaim> = Api::namespaced(ctx.client.clone(), &r.namespace);
    let claim = writes::get(&claims, &r.name, "read the Bucket's claim").await?;
    Ok(claim.is_none_or(|c| !bound(&c)))
}

/// Records the bucket found in this pass: ready, with its info.
async fn record(api: &Api<Bucket>, b: &Bucket, info: &BucketInfo) -> Result<(), Error> {
    let id = plan::store_name(b).unwrap_or_default();
    let patch = json!({"status": {
        "readyToUse": true,
        "bucketID": id,
        "protocols": SUPPORTED,
        "bucketInfo": keys::s3_bucket_info(&id, &info.endpoint),
        "error": null,
    }});
    writes::patch_status(api, b, &patch, "record the bucket").await?;
    failpoint::hit("cosi-after-bucket-ready");
    Ok(())
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

/// The teardown request; a bucket this driver created (a bucket id
/// recorded, no `existingBucketID`) goes as provisioned through the Bucket.
fn teardown(b: &Bucket) -> TeardownRequest {
    let name = plan::store_name(b).unwrap_or_default();
    let req = TeardownRequest::new(claim_identity(b), name, "")
        .with_parameters(b.spec.parameters.clone().unwrap_or_default());
    let recorded = b.status.as_ref().and_then(|s| s.bucket_id.as_ref());
    if recorded.is_some() && b.spec.existing_bucket_id.is_none() {
        req.provisioned_as(b.name_any())
    } else {
        req
    }
}

/// The claim a Bucket names, for its Events.
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
