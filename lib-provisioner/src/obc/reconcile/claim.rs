//! Executes the claim state machine: observe, take the step [`next_step`]
//! names, record its result, repeat.

use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use tracing::{debug, info};

use super::Context;
use super::child_cache::ChildCache;
use super::plan::{self, ClassState, Observed, Step};
use super::read::{claim_key, fresh_claim, get_opt, refresh_claim};
use super::steps::Flow;
use crate::core::error::{Error, Result};
use crate::core::provisioner::Provisioner;
use crate::obc::CachedClaim;
use crate::obc::api::{ClaimPhase, ObjectBucket, ObjectBucketClaim};
use crate::obc::writes;

/// More steps than the longest valid sequence (a takeover that repairs
/// everything) needs.
const MAX_STEPS: usize = 24;

/// Reconciles one claim.
pub(crate) async fn reconcile<P: Provisioner>(
    cached: Arc<CachedClaim>,
    ctx: Arc<Context<P>>,
) -> Result<Action> {
    // Decisions read the class and ObjectBucket caches: an unsynced cache
    // would make a bound claim look new (or its class look missing).
    ctx.runtime.caches_ready().await;
    if ctx.superseded.is_stale(&cached.without_maps().metadata) {
        // The watch event with our own last write is on its way, and it
        // triggers the next pass; the requeue is only a safety net.
        debug!(claim = %claim_key(cached.without_maps()), "cached claim predates our last write; waiting for the watch");
        return Ok(Action::requeue(STALE_RETRY));
    }
    let claim = cached.object();
    ctx.runtime.ensure_leading()?;
    let _in_flight = claim
        .metadata
        .uid
        .as_deref()
        .map(|uid| ctx.in_flight.enter(uid));
    let started = Instant::now();
    let mut o = match observe(&claim, &ctx, Source::CachesFirst).await {
        Ok(o) => o,
        Err(e) => {
            let mut o = Observed::new(claim.clone(), ClassState::Unnamed, ctx.label.clone());
            super::steps::api_error(&mut o, &ctx, &e).await;
            return Err(e);
        }
    };
    let mut replaced = Replaced::default();
    // A request can hang on a connection a restarting apiserver dropped
    // (until the client's read timeout, minutes): bound the whole pass, so
    // the claim is retried like after a crash. Its one provisioner call has
    // its own, shorter bound.
    let limit = ctx.runtime.provisioner_timeout + PASS_SLACK;
    let result = match tokio::time::timeout(limit, run_steps(&mut o, &ctx, &mut replaced)).await {
        Ok(result) => result,
        Err(_) => Err(Error::PassTimedOut(limit)),
    };
    match &result {
        Err(e) => super::steps::api_error(&mut o, &ctx, e).await,
        Ok(_) => ctx.api_errors.clear(&o.claim),
    }
    if let Some(uid) = &claim.metadata.uid {
        ctx.superseded.record(uid, replaced.claim);
    }
    if let Some(uid) = replaced.bucket_uid {
        ctx.superseded_buckets.record(&uid, replaced.bucket);
    }
    ctx.runtime
        .metrics
        .reconciled(started.elapsed(), result.as_ref().err());
    if result.is_ok() {
        ctx.backoff
            .reset(&crate::core::backoff::backoff_key(&claim));
    }
    result
}

/// What a pass may take beyond its provisioner call: dozens of API calls,
/// each a few milliseconds when the apiserver answers.
const PASS_SLACK: std::time::Duration = std::time::Duration::from_secs(60);

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
        ctx.runtime.ensure_leading()?;
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
        let flow = super::steps::execute(step, o, ctx).await;
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
                ctx.runtime.metrics.conflict();
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
        rotated_now: o.rotated_now,
        revocation: o.revocation.take(),
        torn_down: o.torn_down,
        name_held: o.name_held,
        name_released: o.name_released,
        // Contents are re-checked against the fresh copies.
        secret_synced: false,
        config_map_synced: false,
        ..fresh
    };
    Ok(true)
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
    fn cache<K>(self, stores: &ChildCache<K>) -> Option<&ChildCache<K>> {
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
            .filter(|ob| !ctx.superseded_buckets.is_stale(&ob.without_maps().metadata)),
        Source::Api => None,
    };
    let ob = async {
        if ob_name.len() > plan::MAX_OBJECT_NAME_LEN {
            // No such object can exist (the plan chooses another name).
            return Ok(None);
        }
        match cached(&ob_name) {
            Some(ob) => Ok(Some(ob.object())),
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
    super::drift::check(&mut o, ctx).await?;
    Ok(o)
}

fn observed<P>(claim: ObjectBucketClaim, class: ClassState, ctx: &Context<P>) -> Observed {
    let bind_pruned = claim.metadata.uid.as_ref().is_some_and(|uid| {
        ctx.pruned_binds
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(uid)
    });
    // Asked only of Bound claims, so that the map holds no others.
    let bound = claim.status.as_ref().and_then(|s| s.phase) == Some(ClaimPhase::Bound);
    let config_check_due = bound
        && claim.metadata.deletion_timestamp.is_none()
        && claim
            .metadata
            .uid
            .as_ref()
            .is_some_and(|uid| ctx.config_checks.due(uid));
    Observed {
        bind_pruned,
        config_check_due,
        name_records: ctx.name_records.is_some(),
        ..Observed::new(claim, class, ctx.label.clone())
    }
}

/// Metadata of the Secret or ConfigMap `ns/name`: from `stores` if given
/// and it holds the object, else from the API.
pub(super) async fn child_meta<P, K>(
    ctx: &Context<P>,
    stores: Option<&ChildCache<K>>,
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
