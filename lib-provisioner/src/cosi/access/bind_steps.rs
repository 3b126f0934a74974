//! The binding role's steps for a BucketAccess: its claims marked
//! referenced, the BucketAccess checked against its class and handed to its
//! driver with the buckets of its claims; on deletion, its finalizer
//! removed once the driver handed it back.

use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::reflector::ObjectRef;
use serde_json::json;

use super::bind_plan::{self, ClaimSeen, Observed, Step};
use super::grant_plan::controlled_by;
use crate::core::error::Error;
use crate::cosi::api::{
    Bucket, BucketAccess, BucketAccessClass, BucketClaim, HAS_BUCKETACCESS_REFERENCES_ANNOTATION,
};
use crate::cosi::claim::plan::bucket_name;
use crate::cosi::context::CosiContext;
use crate::cosi::failpoint;
use crate::cosi::fresh;
use crate::cosi::pass::{self, Progress};
use crate::cosi::plan::has_finalizer;
use crate::cosi::show::Halt;
use crate::cosi::writes;

/// Observes for the binding role, plans, and takes the step.
pub(crate) async fn round<P>(
    ctx: &CosiContext<P>,
    api: &Api<BucketAccess>,
    access: &BucketAccess,
) -> Result<Progress, Error> {
    let o = observe(ctx, access.clone()).await?;
    pass::take(ctx, bind_plan::next_step(&o), |step| {
        execute(ctx, api, &o, step)
    })
    .await
}

/// The class, and each named claim of the BucketAccess's own namespace
/// with the Bucket its spec leads to (from the caches, a miss confirmed by
/// the API: [`fresh`]). A claim or Bucket a cache shows late only delays
/// the hand-off: their watches bring the BucketAccess back.
async fn observe<P>(ctx: &CosiContext<P>, access: BucketAccess) -> Result<Observed, Error> {
    let ns = access.namespace().unwrap_or_default();
    let classes: Api<BucketAccessClass> = Api::all(ctx.client.clone());
    let class = fresh::read(
        Some(&ctx.caches.access_classes),
        &classes,
        ObjectRef::new(&access.spec.bucket_access_class_name),
        "read the BucketAccessClass",
    )
    .await?;
    let claims_api: Api<BucketClaim> = Api::namespaced(ctx.client.clone(), &ns);
    let buckets: Api<Bucket> = Api::all(ctx.client.clone());
    let mut claims = Vec::new();
    for entry in &access.spec.bucket_claims {
        let name = entry.bucket_claim_name.clone();
        let key = ObjectRef::new(&name).within(&ns);
        let claim = fresh::read(
            Some(&ctx.caches.claims),
            &claims_api,
            key,
            "read a claim of the BucketAccess",
        )
        .await?;
        let bucket = match claim.as_ref().and_then(bucket_name) {
            Some(b) => {
                let key = ObjectRef::new(&b);
                fresh::read(
                    Some(&ctx.caches.buckets),
                    &buckets,
                    key,
                    "read a claim's Bucket",
                )
                .await?
            }
            None => None,
        };
        claims.push(ClaimSeen {
            name,
            claim,
            bucket,
        });
    }
    let secrets_held = held_secrets(ctx, &access).await?;
    Ok(Observed {
        access,
        class,
        claims,
        secrets_held,
    })
}

/// Of a deleting BucketAccess handed to a driver, its access Secrets that
/// driver still holds (read only then: nothing else needs them): under a
/// controller reference to its UID, or, for a driver this process does not
/// run, still carrying the driver's finalizer (a deletion with
/// `propagationPolicy: Orphan` strips the reference, not the finalizer).
async fn held_secrets<P>(
    ctx: &CosiContext<P>,
    access: &BucketAccess,
) -> Result<Vec<String>, Error> {
    let Some(driver) = bind_plan::handed_to(access) else {
        return Ok(Vec::new());
    };
    if access.metadata.deletion_timestamp.is_none() {
        return Ok(Vec::new());
    }
    let foreign = driver != ctx.driver;
    let secrets: Api<Secret> =
        Api::namespaced(ctx.client.clone(), &access.namespace().unwrap_or_default());
    let mut held = Vec::new();
    for entry in &access.spec.bucket_claims {
        let name = &entry.access_secret_name;
        let secret = writes::get(&secrets, name, "read an access Secret").await?;
        if secret
            .is_some_and(|s| controlled_by(&s, access) || (foreign && has_finalizer(&s.metadata)))
        {
            held.push(name.clone());
        }
    }
    Ok(held)
}

/// Takes one step (all writes: it never halts).
async fn execute<P>(
    ctx: &CosiContext<P>,
    api: &Api<BucketAccess>,
    o: &Observed,
    step: Step,
) -> Result<Option<Halt>, Error> {
    let a = &o.access;
    match step {
        Step::AddFinalizer => {
            writes::add_finalizer(api, a, "add the BucketAccess's finalizer").await?
        }
        Step::AnnotateClaim(name) => {
            let claims: Api<BucketClaim> =
                Api::namespaced(ctx.client.clone(), &a.namespace().unwrap_or_default());
            if let Some(claim) = o
                .claims
                .iter()
                .find(|c| c.name == name)
                .and_then(|c| c.claim.as_ref())
            {
                writes::annotate(
                    &claims,
                    claim,
                    HAS_BUCKETACCESS_REFERENCES_ANNOTATION,
                    "",
                    "mark the claim referenced",
                )
                .await?;
            }
        }
        Step::HandOff { buckets, class } => {
            let patch = json!({"status": {
                "readyToUse": false,
                "accessedBuckets": buckets,
                "driverName": class.spec.driver_name,
                "authenticationType": class.spec.authentication_type,
                "parameters": class.spec.parameters.clone().filter(|p| !p.is_empty()),
                "error": null,
            }});
            writes::patch_status(api, a, &patch, "hand the BucketAccess to its driver").await?;
            failpoint::hit("cosi-after-access-handed-off");
        }
        Step::RemoveFinalizer => {
            writes::remove_finalizer(api, a, "remove the BucketAccess's finalizer").await?
        }
    }
    Ok(None)
}
