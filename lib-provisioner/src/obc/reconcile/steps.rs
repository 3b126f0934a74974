//! Executing the plan's steps: one function per step, each doing one write
//! or one provisioner call and recording what it changed in [`Observed`];
//! and showing problems on the claim.
//!
//! The steps are grouped as the plan orders them: [`provision`] (the claim
//! protected, the bucket and its ObjectBucket), [`children`] (Secret and
//! ConfigMap), [`bind`] (the binding and both statuses), [`update`] (a
//! Bound claim's changed config), [`rotation`] (new credentials for a Bound
//! claim), [`teardown`] (a deletion).

use kube::runtime::controller::Action;
use kube::runtime::events::EventType;

use super::plan::{Observed, Problem, Step};
use super::{Context, status};
use crate::core::error::{Error, Result};
use crate::core::provisioner::{ProvisionError, Provisioner};
use crate::obc::api::ClaimPhase;
use crate::obc::writes;

/// What a step leaves the pass to do.
pub(super) enum Flow {
    Continue,
    Stop(Action),
}

mod bind;
mod children;
mod provision;
mod rotation;
mod teardown;
mod update;

/// Performs one step and records what it changed.
pub(super) async fn execute<P: Provisioner>(
    step: Step,
    o: &mut Observed,
    ctx: &Context<P>,
) -> Result<Flow> {
    match step {
        Step::Ignore => Ok(Flow::Stop(Action::await_change())),
        // The next look without a change comes from the paced resync
        // (`core::watch::resync`), not from a scheduler entry per claim.
        Step::Done => Ok(Flow::Stop(Action::await_change())),
        Step::Reject(problem) => Err(reject(o, ctx, &problem).await),
        Step::Wait(problem) => {
            show_problem(o, ctx, ClaimPhase::Pending, &problem).await?;
            Err(Error::Waiting(problem.message))
        }
        Step::NameObjectBucket { name } => provision::name_object_bucket(name, o, ctx).await,
        Step::HoldBucketName { bucket_name } => {
            provision::hold_bucket_name(bucket_name, o, ctx).await
        }
        Step::ReleaseBucketName { bucket_name } => {
            provision::release_bucket_name(bucket_name, o, ctx).await
        }
        Step::PrepareClaim {
            generate_from,
            bind_to,
        } => provision::prepare_claim(generate_from, bind_to, o, ctx).await,
        Step::ObtainAccess {
            bucket_name,
            origin,
        } => provision::obtain_access(bucket_name, origin, o, ctx).await,
        Step::CreateObjectBucket {
            bucket_name,
            origin,
            reclaim_policy,
        } => provision::create_object_bucket(bucket_name, origin, reclaim_policy, o, ctx).await,
        Step::CompleteObjectBucket => provision::complete_object_bucket(o, ctx).await,
        Step::AdoptObjectBucket { origin } => provision::adopt_object_bucket(origin, o, ctx).await,
        Step::RecordObjectBucket { records } => {
            provision::record_object_bucket(records, o, ctx).await
        }
        Step::WriteChildren => children::write_children(o, ctx).await,
        Step::WriteSecret => children::write_secret(o, ctx).await,
        Step::AdoptSecret => children::adopt_secret(o, ctx).await,
        Step::WriteConfigMap => children::write_config_map(o, ctx).await,
        Step::AdoptConfigMap => children::adopt_config_map(o, ctx).await,
        Step::BindClaim => bind::bind_claim(o, ctx).await,
        Step::MarkObjectBucketBound => bind::mark_object_bucket_bound(o, ctx).await,
        Step::UpdateBucket => update::update_bucket(o, ctx).await,
        Step::CheckConfig => update::check_config(o, ctx).await,
        Step::StartRotation { rotation, previous } => {
            rotation::start(rotation, previous, o, ctx).await
        }
        Step::RotateCredentials { rotation, previous } => {
            rotation::rotate(rotation, previous, o, ctx).await
        }
        Step::RevokePreviousCredentials { rotation, previous } => {
            rotation::revoke_previous(rotation, previous, o, ctx).await
        }
        Step::FinishRotation { rotation, previous } => {
            rotation::finish(rotation, previous, o, ctx).await
        }
        Step::EndRotation { rotation, problem } => rotation::end(rotation, problem, o, ctx).await,
        Step::RecordAccess => rotation::record_access(o, ctx).await,
        Step::MarkClaimBound => bind::mark_claim_bound(o, ctx).await,
        Step::Teardown { delete_bucket } => teardown::teardown(delete_bucket, o, ctx).await,
        Step::DeleteObjectBucket => teardown::delete_object_bucket(o, ctx).await,
        Step::ReleaseObjectBucket => teardown::release_object_bucket(o, ctx).await,
        Step::ReleaseSecret => children::release_secret(o, ctx).await,
        Step::ReleaseConfigMap => children::release_config_map(o, ctx).await,
        Step::RemoveClaimFinalizer => teardown::remove_claim_finalizer(o, ctx).await,
    }
}

/// Marks the claim Failed with `problem` and turns it into the error that
/// drives the (slow) retry.
pub(super) async fn reject<P: Provisioner>(
    o: &mut Observed,
    ctx: &Context<P>,
    problem: &Problem,
) -> Error {
    match show_problem(o, ctx, ClaimPhase::Failed, problem).await {
        Ok(()) => Error::InvalidClaim(problem.message.clone()),
        Err(e) => e,
    }
}

/// Shows a provisioner failure on the claim and turns it into the error
/// that drives the retry.
pub(super) async fn provisioner_failed<P: Provisioner>(
    o: &mut Observed,
    ctx: &Context<P>,
    operation: &'static str,
    source: ProvisionError,
) -> Error {
    let timed_out =
        std::error::Error::source(&source).is_some_and(|s| s.is::<crate::core::calls::TimedOut>());
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
    let mut desired = status::desired(&o.claim, phase, problem.reason, &problem.message);
    if super::plan::holds_generation(o) {
        // The current spec's config is not applied: not observed either.
        desired = status::keeping_observed_generation(&o.claim, desired);
    }
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

/// Sets condition `type_` on a claim that keeps its phase, and emits an
/// Event, when the condition changes (a retry of the same outcome writes
/// nothing).
pub(super) async fn show_condition<P: Provisioner>(
    o: &mut Observed,
    ctx: &Context<P>,
    type_: &str,
    value: bool,
    reason: &str,
    (action, message): (&str, &str),
) -> Result<()> {
    let current = o.claim.status.clone().unwrap_or_default();
    let desired = status::with_condition(&o.claim, current, type_, value, reason, message);
    if !status::differs(&o.claim, &desired) {
        return Ok(());
    }
    o.claim = writes::write_claim_status(&ctx.client, &o.claim, &desired).await?;
    let event_type = if value {
        EventType::Normal
    } else {
        EventType::Warning
    };
    ctx.event(&o.claim, event_type, reason, action, message.to_owned())
        .await;
    Ok(())
}

/// Shows on the claim a Kubernetes API error that has blocked it for longer
/// than [`super::ApiErrors::GRACE`], naming what was refused: an operator
/// fixing RBAC, or a user reading the claim, learns why it does not move.
/// The claim keeps its phase. Best effort: the status write may be refused
/// too (then the warning log and the metrics still say it).
pub(super) async fn api_error<P: Provisioner>(o: &mut Observed, ctx: &Context<P>, error: &Error) {
    let Error::Kube { action, source } = error else {
        return;
    };
    if !ctx.api_errors.failed(&o.claim) {
        return;
    }
    let fix = match source {
        kube::Error::Api(status) if status.code == 403 => {
            "; the provisioner's ServiceAccount lacks a permission: grant the verb and resource named above in its RBAC (deploy/rbac.yaml)"
        }
        kube::Error::Api(status) if status.code == 401 => {
            "; the provisioner's credentials were refused: check its ServiceAccount token"
        }
        _ => "; retrying with backoff",
    };
    let problem = Problem {
        reason: "KubernetesAPIError",
        message: format!("could not {action}: {source}{fix}"),
    };
    let phase = o
        .claim
        .status
        .as_ref()
        .and_then(|s| s.phase)
        .unwrap_or(ClaimPhase::Pending);
    if let Err(e) = show_problem(o, ctx, phase, &problem).await {
        tracing::debug!(error = %e, "could not show the API error on the claim");
    }
}
