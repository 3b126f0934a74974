//! Executes the claim state machine: observe, take the step [`next_step`]
//! names, record its result, repeat.

use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use tracing::{debug, info};

use super::plan::{self, ClassState, Observed, Problem, Step};
use super::{Context, status};
use crate::api::{
    BucketOrigin, BucketPhase, ClaimPhase, ObjectBucket, ObjectBucketClaim, ReclaimPolicy,
};
use crate::error::{Error, Result};
use crate::failpoint;
use crate::names;
use crate::provisioner::{
    BucketRequest, ClaimIdentity, ProvisionError, Provisioner, TeardownRequest,
};
use crate::writes::{self, NewObjectBucket};

/// More steps than the longest valid sequence (a takeover that repairs
/// everything) needs.
const MAX_STEPS: usize = 24;

/// What a step leaves the pass to do.
enum Flow {
    Continue,
    Stop(Action),
}

/// Reconciles one claim.
pub(crate) async fn reconcile<P: Provisioner>(
    claim: Arc<ObjectBucketClaim>,
    ctx: Arc<Context<P>>,
) -> Result<Action> {
    // Decisions read the class and ObjectBucket caches: an unsynced cache
    // would make a bound claim look new (or its class look missing).
    ctx.caches_ready().await;
    if ctx.superseded.is_stale(&claim.metadata) {
        // The watch event with our own last write is on its way, and it
        // triggers the next pass; the requeue is only a safety net.
        debug!(claim = %claim_key(&claim), "cached claim predates our last write; waiting for the watch");
        return Ok(Action::requeue(STALE_RETRY));
    }
    ctx.ensure_leading()?;
    let _in_flight = claim
        .metadata
        .uid
        .as_deref()
        .map(|uid| ctx.in_flight.enter(uid));
    let started = Instant::now();
    let mut o = observe(&claim, &ctx, Source::CachesFirst).await?;
    let mut replaced = Replaced::default();
    let result = run_steps(&mut o, &ctx, &mut replaced).await;
    if let Some(uid) = &claim.metadata.uid {
        ctx.superseded.record(uid, replaced.claim);
    }
    if let Some(uid) = replaced.bucket_uid {
        ctx.superseded_buckets.record(&uid, replaced.bucket);
    }
    ctx.metrics
        .reconciled(started.elapsed(), result.as_ref().err());
    if result.is_ok() {
        ctx.backoff.reset(&ObjectRef::from_obj(claim.as_ref()));
    }
    result
}

/// Re-check of a claim whose cached copy is older than our last write.
const STALE_RETRY: std::time::Duration = std::time::Duration::from_secs(1);

/// Conflicts (another writer changed the claim between our read and our
/// write) a pass absorbs by re-reading the claim before it gives up.
const MAX_CONFLICTS: usize = 8;

/// The claim and ObjectBucket versions a pass's own writes superseded.
#[derive(Default)]
struct Replaced {
    claim: Vec<String>,
    bucket: Vec<String>,
    bucket_uid: Option<String>,
}

/// Runs steps until one stops the pass. Collects in `replaced` the claim
/// and ObjectBucket versions the pass's own writes superseded.
async fn run_steps<P: Provisioner>(
    o: &mut Observed,
    ctx: &Context<P>,
    replaced: &mut Replaced,
) -> Result<Action> {
    let mut conflicts = 0;
    for _ in 0..MAX_STEPS + MAX_CONFLICTS {
        // A replica paused past its lease must not act when it wakes.
        ctx.ensure_leading()?;
        let step = plan::next_step(o);
        debug!(claim = %claim_key(&o.claim), ?step, "next step");
        let before = o.claim.metadata.resource_version.clone();
        let ob_before = o.ob.as_ref().map(|ob| {
            (
                ob.metadata.uid.clone(),
                ob.metadata.resource_version.clone(),
            )
        });
        let removes_finalizer = matches!(step, Step::RemoveClaimFinalizer);
        let claim_only = step.writes_only_the_claim();
        let flow = execute(step, o, ctx).await;
        if o.claim.metadata.resource_version != before || (removes_finalizer && flow.is_ok()) {
            replaced.claim.extend(before.clone());
        }
        if let Some((uid, rv)) = ob_before {
            // A written ObjectBucket (or a deleted one) makes the copy the
            // pass started from stale; the next pass reads it from the API
            // if the cache still holds it.
            let after = o.ob.as_ref().map(|ob| &ob.metadata);
            if after.and_then(|m| m.resource_version.as_ref()) != rv.as_ref()
                && after.is_none_or(|m| m.uid == uid)
            {
                replaced.bucket_uid = uid;
                replaced.bucket.extend(rv);
            }
        }
        match flow {
            Ok(Flow::Continue) => {}
            Ok(Flow::Stop(action)) => return Ok(action),
            Err(Error::Conflict { action }) if conflicts < MAX_CONFLICTS => {
                // Re-read and re-plan at once: retrying later from the
                // cache would lose again to a writer faster than the watch.
                // A 409 on a Secret, ConfigMap or ObjectBucket means the
                // cache holds an old copy of it (a watch that has not
                // relisted after an apiserver restart), and the step may
                // have used up the pass's copy: re-read everything. A 409 on
                // the claim needs only the claim, one round trip, which is
                // what keeps a claim moving while another writer rewrites
                // it every few tens of milliseconds.
                conflicts += 1;
                ctx.metrics.conflict();
                debug!(claim = %claim_key(&o.claim), action, claim_only, "conflict; re-reading");
                replaced.claim.extend(before);
                let current = if claim_only {
                    refresh_claim(o, ctx).await?
                } else {
                    reobserve(o, ctx).await?
                };
                if !current {
                    return Ok(Action::await_change());
                }
            }
            Err(Error::ClaimGone { action }) => {
                // Whatever this pass created carries the claim's UID; the
                // ObjectBucket reconciler tears it down (see bucket.rs).
                info!(claim = %claim_key(&o.claim), action, "the claim was deleted during the pass");
                if let Some(uid) = &o.claim.metadata.uid {
                    ctx.superseded.forget(uid);
                }
                *replaced = Replaced::default();
                return Ok(Action::await_change());
            }
            Err(e) => return Err(e),
        }
    }
    Err(Error::NoConvergence(MAX_STEPS))
}

/// Replaces the pass's copy of the claim with the API's. `false` if the
/// claim is gone, or is another claim of the same name now.
async fn refresh_claim<P>(o: &mut Observed, ctx: &Context<P>) -> Result<bool> {
    match fresh_claim(o, ctx).await? {
        Some(fresh) => {
            o.claim = fresh;
            Ok(true)
        }
        None => Ok(false),
    }
}

/// Replaces everything the pass observed with the API's current state,
/// keeping what the pass itself did (access obtained, teardown run).
/// `false` if the claim is gone, or is another claim of the same name now.
async fn reobserve<P: Provisioner>(o: &mut Observed, ctx: &Context<P>) -> Result<bool> {
    let Some(claim) = fresh_claim(o, ctx).await? else {
        return Ok(false);
    };
    let fresh = observe(&claim, ctx, Source::Api).await?;
    *o = Observed {
        access: o.access.take(),
        torn_down: o.torn_down,
        prepared_now: o.prepared_now,
        // Contents are re-checked against the fresh copies.
        secret_synced: false,
        config_map_synced: false,
        ..fresh
    };
    Ok(true)
}

/// The claim as the API has it now, if it is still the pass's claim.
async fn fresh_claim<P>(o: &Observed, ctx: &Context<P>) -> Result<Option<ObjectBucketClaim>> {
    let api: Api<ObjectBucketClaim> = Api::namespaced(
        ctx.client.clone(),
        o.claim.metadata.namespace.as_deref().unwrap_or_default(),
    );
    let found = api
        .get_opt(&o.claim.name_any())
        .await
        .map_err(Error::kube("re-read the claim"))?;
    Ok(found.filter(|fresh| fresh.metadata.uid == o.claim.metadata.uid))
}

fn claim_key(claim: &ObjectBucketClaim) -> String {
    format!(
        "{}/{}",
        claim.metadata.namespace.as_deref().unwrap_or_default(),
        claim.metadata.name.as_deref().unwrap_or_default()
    )
}

/// Where [`observe`] reads the ObjectBucket, Secret and ConfigMap.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Source {
    /// Caches first, the API where a cache has nothing (it may lag behind
    /// the writes of the previous pass, and it does not hold Secrets or
    /// ConfigMaps that carry no label of ours).
    CachesFirst,
    /// The API only: after a conflict showed a cached copy is out of date.
    Api,
}

impl Source {
    fn cache<K>(self, stores: &super::ChildStores<K>) -> Option<&super::ChildStores<K>>
    where
        K: kube::Resource<DynamicType = ()> + Clone + 'static,
    {
        (self == Source::CachesFirst).then_some(stores)
    }
}

/// Reads what the decision needs (the class always from its cache).
async fn observe<P: Provisioner>(
    claim: &ObjectBucketClaim,
    ctx: &Context<P>,
    source: Source,
) -> Result<Observed> {
    let ns = claim
        .namespace()
        .ok_or(Error::MissingField("claim namespace"))?;
    let name = claim.name_any();
    let class = ctx.class_state(&claim.spec.storage_class_name);
    if matches!(class, ClassState::Foreign) && !plan::has_label(&claim.metadata, &ctx.label) {
        // Not ours, and never was: read nothing more.
        return Ok(observed(claim.clone(), class, ctx));
    }

    // New claims miss all three caches: look them up side by side.
    let ob_name = plan::object_bucket_name(claim);
    let cached = |ob_name| match source {
        // A copy our own writes replaced (its watch event is in flight):
        // acting on it would repeat the last write, so read the current one.
        Source::CachesFirst => ctx
            .buckets
            .get(&ObjectRef::new(ob_name))
            .filter(|ob| !ctx.superseded_buckets.is_stale(&ob.metadata)),
        Source::Api => None,
    };
    let ob = async {
        match cached(&ob_name) {
            Some(ob) => Ok(Some(ObjectBucket::clone(&ob))),
            None => {
                get_opt(
                    &Api::<ObjectBucket>::all(ctx.client.clone()),
                    &ob_name,
                    "read the ObjectBucket",
                )
                .await
            }
        }
    };
    let (ob, secret, config_map) = futures::try_join!(
        ob,
        child_meta(ctx, source.cache(&ctx.secrets), &ns, &name),
        child_meta(ctx, source.cache(&ctx.config_maps), &ns, &name),
    )?;

    let mut o = observed(claim.clone(), class, ctx);
    o.name_holder = match (&ob, plan::fixed_bucket_name(claim)) {
        (None, Some(bucket)) => ctx.name_holder(claim, bucket),
        _ => None,
    };
    o.ob = ob;
    o.secret = secret;
    o.config_map = config_map;
    Ok(o)
}

fn observed<P>(claim: ObjectBucketClaim, class: ClassState, ctx: &Context<P>) -> Observed {
    let bind_pruned = claim.metadata.uid.as_ref().is_some_and(|uid| {
        ctx.pruned_binds
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(uid)
    });
    Observed {
        bind_pruned,
        ..Observed::new(claim, class, ctx.label.clone())
    }
}

/// Metadata of the Secret or ConfigMap `ns/name`: from `stores` if given
/// and it holds the object, else from the API.
pub(super) async fn child_meta<P, K>(
    ctx: &Context<P>,
    stores: Option<&super::ChildStores<K>>,
    ns: &str,
    name: &str,
) -> Result<Option<ObjectMeta>>
where
    K: writes::Child,
{
    if let Some(meta) = stores.and_then(|s| s.get(ns, name)) {
        return Ok(Some(meta));
    }
    let api: Api<K> = Api::namespaced(ctx.client.clone(), ns);
    match api.get_metadata_opt(name).await {
        Ok(found) => Ok(found.map(|m| m.metadata)),
        Err(e) => Err(Error::kube("read the claim's Secret or ConfigMap")(e)),
    }
}

/// GET that maps 404 to `None` and errors to [`Error::Kube`] naming `action`.
pub(super) async fn get_opt<K>(api: &Api<K>, name: &str, action: &'static str) -> Result<Option<K>>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.get_opt(name).await.map_err(Error::kube(action))
}

/// Performs one step and records what it changed.
async fn execute<P: Provisioner>(step: Step, o: &mut Observed, ctx: &Context<P>) -> Result<Flow> {
    match step {
        Step::Ignore => Ok(Flow::Stop(Action::await_change())),
        Step::Done => Ok(Flow::Stop(Action::requeue(ctx.resync))),
        Step::Reject(problem) => {
            show_problem(o, ctx, ClaimPhase::Failed, &problem).await?;
            Err(Error::InvalidClaim(problem.message))
        }
        Step::Wait(problem) => {
            show_problem(o, ctx, ClaimPhase::Pending, &problem).await?;
            Err(Error::Waiting(problem.message))
        }
        Step::PrepareClaim { generate_from } => {
            let generated = match generate_from {
                Some(prefix) => {
                    Some(names::generate_bucket_name(&prefix).map_err(Error::InvalidClaim)?)
                }
                None => None,
            };
            o.claim =
                writes::prepare_claim(&ctx.client, &o.claim, &ctx.label, generated.as_deref())
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
            o.prepared_now = true;
            Ok(Flow::Continue)
        }
        Step::ObtainAccess {
            bucket_name,
            origin,
        } => {
            let ClassState::Ours(class) = &o.class else {
                return Err(Error::Waiting(
                    "the StorageClass is needed to provision".into(),
                ));
            };
            let request = BucketRequest::for_claim(&o.claim, bucket_name, class);
            let (operation, result) = match origin {
                BucketOrigin::Greenfield => (
                    "provision",
                    ctx.timed("provision", ctx.provisioner.provision(&request))
                        .await,
                ),
                BucketOrigin::Brownfield => (
                    "grant",
                    ctx.timed("grant", ctx.provisioner.grant(&request)).await,
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
                    if let (false, Some(ob)) = (source.is_retryable(), &o.ob)
                        && plan::is_reserved(ob)
                    {
                        // Refused outright: no bucket was made, so the
                        // reservation would only be something half-created.
                        writes::remove_object_bucket(&ctx.client, ob).await?;
                        o.ob = None;
                    }
                    Err(provisioner_failed(o, ctx, operation, source).await)
                }
            }
        }
        Step::CreateObjectBucket {
            bucket_name,
            origin,
            reclaim_policy,
        } => {
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
                },
            )
            .await?;
            o.ob = Some(ob);
            failpoint::hit("after-object-bucket-created");
            Ok(Flow::Continue)
        }
        Step::CompleteObjectBucket => {
            let access = o
                .access
                .as_ref()
                .ok_or(Error::MissingField("bucket access"))?;
            let ob = o.ob.as_ref().ok_or(Error::MissingField("ObjectBucket"))?;
            o.ob = Some(writes::complete_object_bucket(&ctx.client, ob, access).await?);
            failpoint::hit("after-object-bucket-completed");
            Ok(Flow::Continue)
        }
        Step::AdoptObjectBucket { origin } => {
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
        Step::WriteSecret => {
            let access = o
                .access
                .as_ref()
                .ok_or(Error::MissingField("bucket access"))?;
            let secret = writes::secret(&o.claim, &ctx.label, &access.credentials)?;
            o.secret = Some(writes::write_child(&ctx.client, &o.claim, secret).await?);
            o.secret_synced = true;
            failpoint::hit("after-secret-written");
            Ok(Flow::Continue)
        }
        Step::AdoptSecret => {
            let meta = o.secret.as_ref().ok_or(Error::MissingField("Secret"))?;
            o.secret = Some(writes::adopt_child::<Secret>(&ctx.client, meta, &ctx.label).await?);
            Ok(Flow::Continue)
        }
        Step::WriteConfigMap => {
            let endpoint =
                o.ob.as_ref()
                    .and_then(|ob| ob.spec.endpoint.clone())
                    .ok_or(Error::MissingField("ObjectBucket endpoint"))?;
            let cm = writes::config_map(&o.claim, &ctx.label, &endpoint)?;
            o.config_map = Some(writes::write_child(&ctx.client, &o.claim, cm).await?);
            o.config_map_synced = true;
            failpoint::hit("after-config-map-written");
            Ok(Flow::Continue)
        }
        Step::AdoptConfigMap => {
            let meta = o
                .config_map
                .as_ref()
                .ok_or(Error::MissingField("ConfigMap"))?;
            o.config_map =
                Some(writes::adopt_child::<ConfigMap>(&ctx.client, meta, &ctx.label).await?);
            Ok(Flow::Continue)
        }
        Step::BindClaim => {
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
        Step::MarkObjectBucketBound => {
            let ob = o.ob.as_ref().ok_or(Error::MissingField("ObjectBucket"))?;
            o.ob =
                Some(writes::set_object_bucket_phase(&ctx.client, ob, BucketPhase::Bound).await?);
            failpoint::hit("after-object-bucket-bound");
            Ok(Flow::Continue)
        }
        Step::MarkClaimBound => {
            let bucket =
                o.ob.as_ref()
                    .and_then(ObjectBucket::bucket_name)
                    .unwrap_or_default();
            let message = format!(
                "bucket {bucket:?} is bound: credentials in Secret {name:?}, endpoint in ConfigMap {name:?}",
                name = o.claim.name_any()
            );
            let desired = status::desired(&o.claim, ClaimPhase::Bound, "Provisioned", &message);
            o.claim = writes::write_claim_status(&ctx.client, &o.claim, &desired).await?;
            ctx.event(&o.claim, EventType::Normal, "Bound", "Provision", message)
                .await;
            Ok(Flow::Continue)
        }
        Step::Teardown { delete_bucket } => {
            if delete_bucket
                && let Some(ob) = &o.ob
                && ob.spec.reclaim_policy == ReclaimPolicy::Retain
            {
                // Deleting under Retain: only a reserved (never completed)
                // ObjectBucket says so, and a cached copy may be an old,
                // reserved version of one that is complete by now (a watch
                // lagging after an apiserver restart). Confirm with the API;
                // if it differs, plan again on the current copy.
                let current = get_opt(
                    &Api::<ObjectBucket>::all(ctx.client.clone()),
                    &ob.name_any(),
                    "read the ObjectBucket",
                )
                .await?;
                let moved = current.as_ref().map(|c| &c.metadata.resource_version)
                    != Some(&ob.metadata.resource_version);
                if moved {
                    o.ob = current;
                    return Ok(Flow::Continue);
                }
            }
            let request = teardown_request(o);
            let (operation, result) = ctx.teardown(&request, delete_bucket).await;
            match result {
                Ok(()) => {}
                // A claim that never got an ObjectBucket, and whose class the
                // provisioner rejects outright, most likely never got a bucket
                // either (provisioning fails on the same parameters). Holding
                // its deletion forever would wedge it; let it go, and say so.
                Err(source) if !source.is_retryable() && request.object_bucket_name.is_none() => {
                    ctx.event(
                        &o.claim,
                        EventType::Warning,
                        "TeardownSkipped",
                        "Delete",
                        format!(
                            "{operation} of bucket {:?} failed permanently ({source}); the claim was never bound, so it is released anyway: check the store for a bucket of that name",
                            request.bucket_name
                        ),
                    )
                    .await;
                    o.torn_down = true;
                    return Ok(Flow::Continue);
                }
                Err(source) => return Err(provisioner_failed(o, ctx, operation, source).await),
            }
            o.torn_down = true;
            failpoint::hit("after-bucket-deleted");
            let note = if delete_bucket {
                format!(
                    "bucket {:?} and its credentials were deleted",
                    request.bucket_name
                )
            } else {
                format!(
                    "access to bucket {:?} was revoked; the bucket is kept",
                    request.bucket_name
                )
            };
            ctx.event(
                &o.claim,
                EventType::Normal,
                if delete_bucket {
                    "BucketDeleted"
                } else {
                    "AccessRevoked"
                },
                "Delete",
                note,
            )
            .await;
            Ok(Flow::Continue)
        }
        Step::DeleteObjectBucket => {
            let ob = o.ob.take().ok_or(Error::MissingField("ObjectBucket"))?;
            writes::remove_object_bucket(&ctx.client, &ob).await?;
            failpoint::hit("after-object-bucket-released");
            Ok(Flow::Continue)
        }
        Step::ReleaseObjectBucket => {
            let mut ob = o.ob.take().ok_or(Error::MissingField("ObjectBucket"))?;
            if ob.status.as_ref().and_then(|s| s.phase) != Some(BucketPhase::Released) {
                ob = writes::set_object_bucket_phase(&ctx.client, &ob, BucketPhase::Released)
                    .await?;
            }
            o.ob = writes::release_object_bucket(&ctx.client, &ob).await?;
            failpoint::hit("after-object-bucket-released");
            ctx.event(&o.claim, EventType::Normal, "Released", "Delete", format!(
                "bucket {:?} is retained; ObjectBucket {} is Released and may be deleted by an administrator",
                ob.bucket_name().unwrap_or_default(), ob.name_any()
            )).await;
            Ok(Flow::Continue)
        }
        Step::ReleaseSecret => {
            let meta = o.secret.take().ok_or(Error::MissingField("Secret"))?;
            writes::release_child::<Secret>(&ctx.client, &meta).await?;
            failpoint::hit("after-secret-released");
            Ok(Flow::Continue)
        }
        Step::ReleaseConfigMap => {
            let meta = o
                .config_map
                .take()
                .ok_or(Error::MissingField("ConfigMap"))?;
            writes::release_child::<ConfigMap>(&ctx.client, &meta).await?;
            failpoint::hit("after-config-map-released");
            Ok(Flow::Continue)
        }
        Step::RemoveClaimFinalizer => {
            writes::remove_claim_finalizer(&ctx.client, &o.claim).await?;
            failpoint::hit("after-claim-finalizer-removed");
            Ok(Flow::Stop(Action::await_change()))
        }
    }
}

/// Builds the teardown request from the ObjectBucket, or, when provisioning
/// died before the ObjectBucket existed, from the claim.
fn teardown_request(o: &Observed) -> TeardownRequest {
    let parameters = plan::class_parameters(&o.class);
    if let Some(ob) =
        o.ob.as_ref()
            .filter(|ob| plan::claim_ref_matches(ob, &o.claim))
    {
        let mut request = TeardownRequest::for_object_bucket(ob, parameters);
        request.claim = ClaimIdentity::of(&o.claim);
        return request;
    }
    let bucket_name = plan::fixed_bucket_name(&o.claim)
        .map(str::to_owned)
        .or_else(|| {
            parameters
                .get(crate::api::BROWNFIELD_BUCKET_PARAMETER)
                .cloned()
        })
        .unwrap_or_default();
    TeardownRequest::new(
        ClaimIdentity::of(&o.claim),
        bucket_name,
        &o.claim.spec.storage_class_name,
    )
    .with_parameters(parameters)
}

/// Shows a provisioner failure on the claim and turns it into the error
/// that drives the retry.
async fn provisioner_failed<P: Provisioner>(
    o: &mut Observed,
    ctx: &Context<P>,
    operation: &'static str,
    source: ProvisionError,
) -> Error {
    let timed_out = std::error::Error::source(&source).is_some_and(|s| s.is::<super::TimedOut>());
    let (phase, reason) = match (source.is_retryable(), timed_out) {
        (false, _) => (ClaimPhase::Failed, "ProvisionerRejected"),
        (true, true) => (ClaimPhase::Pending, "ProvisionerTimeout"),
        (true, false) => (ClaimPhase::Pending, "ProvisionerUnavailable"),
    };
    let problem = Problem {
        reason,
        message: format!("{operation} failed: {source}"),
    };
    if let Err(e) = show_problem(o, ctx, phase, &problem).await {
        return e;
    }
    Error::Provisioner { operation, source }
}

/// Writes a problem into the claim's status and, when the status changes,
/// an Event. Unchanged problems are not rewritten on every retry.
async fn show_problem<P: Provisioner>(
    o: &mut Observed,
    ctx: &Context<P>,
    phase: ClaimPhase,
    problem: &Problem,
) -> Result<()> {
    // A claim being deleted keeps its phase; the message tells what blocks it.
    let phase = if o.claim.metadata.deletion_timestamp.is_some() {
        o.claim
            .status
            .as_ref()
            .and_then(|s| s.phase)
            .unwrap_or(phase)
    } else {
        phase
    };
    let desired = status::desired(&o.claim, phase, problem.reason, &problem.message);
    if !status::differs(&o.claim, &desired) {
        return Ok(());
    }
    match writes::write_claim_status(&ctx.client, &o.claim, &desired).await {
        Ok(updated) => o.claim = updated,
        // Deleted meanwhile: nothing to show it on.
        Err(Error::ClaimGone { .. }) => return Ok(()),
        Err(e) => return Err(e),
    }
    let type_ = if phase == ClaimPhase::Failed || problem.reason != "StorageClassNotFound" {
        EventType::Warning
    } else {
        EventType::Normal
    };
    ctx.event(
        &o.claim,
        type_,
        problem.reason,
        "Provision",
        problem.message.clone(),
    )
    .await;
    Ok(())
}
