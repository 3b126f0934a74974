//! The BucketAccess pass: whichever role holds the BucketAccess plans and
//! takes one step at a time ([`super::owner`] is asked again after each,
//! since the hand-off and the cleanup move it between roles); the binding
//! role's steps are here, the driver role's in `grant_steps.rs`.

use std::sync::Arc;

use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::controller::Action;
use serde_json::json;

use super::bind_plan::{self, ClaimSeen, Step};
use super::grant_steps::{self, Memory};
use super::owner::{Owner, owner};
use crate::core::error::Error;
use crate::core::provisioner::Provisioner;
use crate::cosi::api::{
    Bucket, BucketAccess, BucketAccessClass, BucketClaim, HAS_BUCKETACCESS_REFERENCES_ANNOTATION,
};
use crate::cosi::claim::plan::bucket_name;
use crate::cosi::context::{CosiContext, MAX_STEPS, RESYNC};
use crate::cosi::failpoint;
use crate::cosi::plan::Next;
use crate::cosi::show::{self, Halt, retry_after};
use crate::cosi::writes;

/// Reconciles one BucketAccess, in whichever role this process has for it.
pub(crate) async fn reconcile<P: Provisioner>(
    access: Arc<BucketAccess>,
    ctx: Arc<CosiContext<P>>,
) -> Result<Action, Error> {
    ctx.runtime.caches_ready().await;
    let ns = access.namespace().ok_or(Error::MissingField("namespace"))?;
    let api: Api<BucketAccess> = Api::namespaced(ctx.client.clone(), &ns);
    let key = crate::core::backoff::backoff_key(access.as_ref());
    let mut memory = Memory::default();
    for _ in 0..MAX_STEPS {
        let Some(current) = writes::get(&api, &access.name_any(), "read the BucketAccess").await?
        else {
            return Ok(Action::await_change());
        };
        let halt = match confirmed_owner(&current, &ctx.driver, &memory) {
            Owner::Binding if ctx.binding => bind_pass(&ctx, &api, current.clone()).await?,
            Owner::Driver(d) if d == ctx.driver => {
                grant_steps::pass(&ctx, &api, current.clone(), &mut memory).await?
            }
            _ => return Ok(Action::await_change()),
        };
        match halt {
            Progress::Stepped => continue,
            Progress::Done => {
                ctx.backoff.reset(&key);
                return Ok(Action::requeue(RESYNC));
            }
            Progress::Halted(halt) => {
                show_halt(&ctx, &api, &current, &halt).await?;
                return Ok(Action::requeue(retry_after(&ctx, &key, &halt)));
            }
        }
    }
    Err(Error::NoConvergence(MAX_STEPS))
}

/// [`owner`], except that a deleting BucketAccess our driver holds goes back
/// to the binding role only once this pass revoked it. The
/// `sidecar-cleanup-finished` annotation that hands it back is the
/// BucketAccess owner's to write as well: trusted alone, a tenant could set
/// it before deleting and keep a store user with working keys. Revoking is
/// idempotent, so a repeat after a crash costs one call.
fn confirmed_owner(access: &BucketAccess, driver: &str, memory: &Memory) -> Owner {
    let handed_off = access
        .status
        .as_ref()
        .is_some_and(|s| s.accessed_buckets.is_some() && s.driver_name.as_deref() == Some(driver));
    match owner(access) {
        Owner::Binding
            if handed_off && access.metadata.deletion_timestamp.is_some() && !memory.revoked() =>
        {
            Owner::Driver(driver.to_owned())
        }
        o => o,
    }
}

/// What one planning round of either role did.
pub(crate) enum Progress {
    Stepped,
    Done,
    Halted(Halt),
}

/// Observes for the binding role, plans, and takes the step.
async fn bind_pass<P>(
    ctx: &CosiContext<P>,
    api: &Api<BucketAccess>,
    access: BucketAccess,
) -> Result<Progress, Error> {
    let o = bind_observe(ctx, access).await?;
    match bind_plan::next_step(&o) {
        Next::Step(step) => {
            ctx.runtime.ensure_leading()?;
            bind_execute(ctx, api, &o, step).await?;
            Ok(Progress::Stepped)
        }
        Next::Done => Ok(Progress::Done),
        Next::Wait(m) => Ok(Progress::Halted(Halt::Wait(m))),
        Next::Refuse(m) => Ok(Progress::Halted(Halt::Refuse(m))),
    }
}

/// The class, and each named claim of the BucketAccess's own namespace
/// with the Bucket its spec leads to (all from the API).
async fn bind_observe<P>(
    ctx: &CosiContext<P>,
    access: BucketAccess,
) -> Result<bind_plan::Observed, Error> {
    let ns = access.namespace().unwrap_or_default();
    let classes: Api<BucketAccessClass> = Api::all(ctx.client.clone());
    let class = writes::get(
        &classes,
        &access.spec.bucket_access_class_name,
        "read the BucketAccessClass",
    )
    .await?;
    let claims_api: Api<BucketClaim> = Api::namespaced(ctx.client.clone(), &ns);
    let buckets: Api<Bucket> = Api::all(ctx.client.clone());
    let mut claims = Vec::new();
    for entry in &access.spec.bucket_claims {
        let name = entry.bucket_claim_name.clone();
        let claim = writes::get(&claims_api, &name, "read a claim of the BucketAccess").await?;
        let bucket = match claim.as_ref().and_then(bucket_name) {
            Some(b) => writes::get(&buckets, &b, "read a claim's Bucket").await?,
            None => None,
        };
        claims.push(ClaimSeen {
            name,
            claim,
            bucket,
        });
    }
    Ok(bind_plan::Observed {
        access,
        class,
        claims,
    })
}

async fn bind_execute<P>(
    ctx: &CosiContext<P>,
    api: &Api<BucketAccess>,
    o: &bind_plan::Observed,
    step: Step,
) -> Result<(), Error> {
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
            writes::patch_status(
                api,
                &a.name_any(),
                &patch,
                "hand the BucketAccess to its driver",
            )
            .await?;
            failpoint::hit("cosi-after-access-handed-off");
        }
        Step::RemoveFinalizer => {
            writes::remove_finalizer(api, a, "remove the BucketAccess's finalizer").await?
        }
    }
    Ok(())
}

async fn show_halt<P>(
    ctx: &CosiContext<P>,
    api: &Api<BucketAccess>,
    a: &BucketAccess,
    halt: &Halt,
) -> Result<(), Error> {
    let status = a.status.as_ref();
    let shown = (
        status.and_then(|s| s.error.as_ref()),
        status.map(|s| s.ready_to_use),
    );
    if !show::write_error(
        api,
        &a.name_any(),
        shown,
        halt.message(),
        "show the BucketAccess's error",
    )
    .await?
    {
        return Ok(());
    }
    ctx.event(
        &show::reference(a),
        halt.is_refusal(),
        halt.reason(),
        halt.message(),
    )
    .await;
    Ok(())
}
