//! The claim protected, its bucket obtained, its ObjectBucket created,
//! completed or taken over.

use kube::ResourceExt;
use kube::runtime::events::EventType;
use tracing::info;

use super::{provisioner_failed, reject};
use crate::core::error::{Error, Result};
use crate::core::failpoint;
use crate::core::names;
use crate::core::provisioner::{BucketRequest, Provisioner};
use crate::obc::api::{BucketOrigin, ReclaimPolicy};
use crate::obc::reconcile::Context;
use crate::obc::reconcile::bucket_names::{self, Holding};
use crate::obc::reconcile::plan::{self, ClassState, Observed, Problem};
use crate::obc::reconcile::read::{claim_key, refresh_claim};
use crate::obc::reconcile::steps::Flow;
use crate::obc::writes::{self, NewObjectBucket};

/// Finalizer, label, a generated name and the ObjectBucket's name in one
/// patch, then a read-back.
pub(super) async fn prepare_claim<P: Provisioner>(
    generate_from: Option<String>,
    bind_to: Option<String>,
    o: &mut Observed,
    ctx: &Context<P>,
) -> Result<Flow> {
    let generated = match generate_from {
        Some(prefix) => Some(names::generate_bucket_name(&prefix).map_err(Error::InvalidClaim)?),
        None => None,
    };
    o.claim = writes::prepare_claim(
        &ctx.client,
        &o.claim,
        &ctx.label,
        generated.as_deref(),
        bind_to.as_deref(),
    )
    .await?;
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
    Ok(Flow::Continue)
}

/// Takes the claim's greenfield bucket name (its Lease) before anything is
/// reserved or provisioned; rejects the claim if another live claim holds it.
pub(super) async fn hold_bucket_name<P: Provisioner>(
    bucket_name: String,
    o: &mut Observed,
    ctx: &Context<P>,
) -> Result<Flow> {
    let Some(ns) = &ctx.name_records else {
        o.name_held = true;
        return Ok(Flow::Continue);
    };
    match bucket_names::hold(ctx, ns, &bucket_name, &o.claim).await? {
        Holding::Ours => {
            o.name_held = true;
            failpoint::hit("after-bucket-name-held");
            Ok(Flow::Continue)
        }
        Holding::Taken(holder) => {
            let problem = Problem {
                reason: "BucketNameTaken",
                message: format!(
                    "bucket {bucket_name:?} is already claimed by {holder}: choose another spec.bucketName, or use spec.generateBucketName"
                ),
            };
            Err(reject(o, ctx, &problem).await)
        }
    }
}

/// Lets go of the claim's bucket name (a deletion, after the teardown).
pub(super) async fn release_bucket_name<P: Provisioner>(
    bucket_name: String,
    o: &mut Observed,
    ctx: &Context<P>,
) -> Result<Flow> {
    if let Some(ns) = &ctx.name_records {
        bucket_names::release(ctx, ns, &bucket_name, &o.claim).await?;
        failpoint::hit("after-bucket-name-released");
    }
    o.name_released = true;
    Ok(Flow::Continue)
}

/// Asks the provisioner for the bucket (greenfield) or access (brownfield).
pub(super) async fn obtain_access<P: Provisioner>(
    bucket_name: String,
    origin: BucketOrigin,
    o: &mut Observed,
    ctx: &Context<P>,
) -> Result<Flow> {
    // A claim its ObjectBucket binds already gets its credentials re-issued.
    let request = match crate::obc::reconcile::drift::reissue_request(o) {
        Some(request) => request,
        None => {
            let ClassState::Ours(class) = &o.class else {
                return Err(Error::Waiting(
                    "the StorageClass is needed to provision".into(),
                ));
            };
            BucketRequest::for_claim(&o.claim, bucket_name, class)
        }
    };
    let (operation, result) = match origin {
        BucketOrigin::Greenfield => (
            "provision",
            ctx.runtime
                .timed("provision", ctx.provisioner.provision(&request))
                .await,
        ),
        BucketOrigin::Brownfield => (
            "grant",
            ctx.runtime
                .timed("grant", ctx.provisioner.grant(&request))
                .await,
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
            // Refused for good, and the provisioner says it made nothing:
            // the reservation would only be something half-created. Any
            // other failure may have left a bucket (CreateBucket done, the
            // quota refused), and the reservation is its only record: it
            // stays, and the claim's deletion tears down what it names.
            if let (false, true, Some(ob)) =
                (source.is_retryable(), source.nothing_created(), &o.ob)
                && plan::is_reserved(ob)
            {
                writes::remove_object_bucket(&ctx.client, ob).await?;
                o.ob = None;
            }
            Err(provisioner_failed(o, ctx, operation, source).await)
        }
    }
}

/// Creates the ObjectBucket: reserved, or from the obtained access.
pub(super) async fn create_object_bucket<P: Provisioner>(
    bucket_name: String,
    origin: BucketOrigin,
    reclaim_policy: ReclaimPolicy,
    o: &mut Observed,
    ctx: &Context<P>,
) -> Result<Flow> {
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
            records: plan::records::initial(&o.claim, &o.class),
        },
    )
    .await?;
    o.ob = Some(ob);
    failpoint::hit("after-object-bucket-created");
    Ok(Flow::Continue)
}

/// Records the provisioner's endpoint on the reserved ObjectBucket.
pub(super) async fn complete_object_bucket<P: Provisioner>(
    o: &mut Observed,
    ctx: &Context<P>,
) -> Result<Flow> {
    let access = o
        .access
        .as_ref()
        .ok_or(Error::MissingField("bucket access"))?;
    let ob = o.ob.as_ref().ok_or(Error::MissingField("ObjectBucket"))?;
    o.ob = Some(writes::complete_object_bucket(&ctx.client, ob, access).await?);
    failpoint::hit("after-object-bucket-completed");
    Ok(Flow::Continue)
}

/// Gives an ObjectBucket another version wrote our label and finalizer.
pub(super) async fn adopt_object_bucket<P: Provisioner>(
    origin: Option<BucketOrigin>,
    o: &mut Observed,
    ctx: &Context<P>,
) -> Result<Flow> {
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

/// Writes the records an ObjectBucket of an older version lacks.
pub(super) async fn record_object_bucket<P: Provisioner>(
    records: plan::records::Records,
    o: &mut Observed,
    ctx: &Context<P>,
) -> Result<Flow> {
    let ob = o.ob.as_ref().ok_or(Error::MissingField("ObjectBucket"))?;
    o.ob = Some(writes::annotate_object_bucket(&ctx.client, ob, &records).await?);
    Ok(Flow::Continue)
}

/// Records the ObjectBucket name chosen for a new claim; the ObjectBucket
/// the pass saw (another claim's) is not this claim's any more.
pub(super) async fn name_object_bucket<P: Provisioner>(
    name: String,
    o: &mut Observed,
    ctx: &Context<P>,
) -> Result<Flow> {
    let default = plan::object_bucket_name(&o.claim);
    o.claim = writes::name_object_bucket(&ctx.client, &o.claim, &name).await?;
    o.ob = None;
    let why = if default.len() > plan::MAX_OBJECT_NAME_LEN {
        format!(
            "the default name obc-<namespace>-<name> is {} characters long (at most {})",
            default.len(),
            plan::MAX_OBJECT_NAME_LEN
        )
    } else {
        format!("ObjectBucket {default} belongs to another claim")
    };
    ctx.event(
        &o.claim,
        EventType::Normal,
        "ObjectBucketNamed",
        "Provision",
        format!("{why}: this claim's ObjectBucket is {name}"),
    )
    .await;
    Ok(Flow::Continue)
}
