//! A call dropped at each point where it waits, then the next call
//! ([`Rule::Abandon`](super::super::Rule::Abandon)).
//!
//! A first round runs the call to its end and counts its `Pending`s (n);
//! then, for k = 1..=n (or `max_abandon_points` of them, spread), a round
//! on a fresh claim drops the call after its k-th `Pending`, calls again,
//! checks the outcome and tears down. The store ends each round as it
//! began.

use std::future::Future;

use super::super::Op;
use super::super::calls::{Shown, error_shown};
use super::super::checks::READ_WRITE;
use super::super::ctx::{Cleanup, Ctx, Log, Step, Stop, fail};
use super::super::drive::{Driven, drive, points};
use crate::core::provisioner::{ErrorKind, ProvisionError};
use crate::obc::api::ReclaimPolicy;

#[derive(Clone, Copy)]
pub(crate) enum Target {
    Provision,
    Delete,
    Rotate,
}

impl Target {
    fn method(self) -> &'static str {
        match self {
            Self::Provision => "provision",
            Self::Delete => "delete",
            Self::Rotate => "rotate",
        }
    }
}

pub(crate) async fn run(ctx: &Ctx, target: Target, log: &mut Log) -> Step<String> {
    let method = target.method();
    let mut full = Log::default();
    let counted = round(ctx, target, None, &mut full).await;
    log.note(format!(
        "-- the full round, counting the {method}'s Pendings:"
    ));
    log.append(full);
    let n = counted?;
    let at = points(n, ctx.settings.max_abandon_points);
    log.note(format!(
        "a full {method} returned Pending {n} times; dropping it at {} of them",
        at.len()
    ));
    if at.is_empty() {
        return Ok(format!(
            "{method} finished without ever waiting: nothing to drop; the full round passed"
        ));
    }
    for k in &at {
        let mut this = Log::default();
        match round(ctx, target, Some(*k), &mut this).await {
            Ok(_) => {}
            Err(Stop::Fail(why)) => {
                log.note(format!(
                    "-- round dropping {method} at its Pending {k} of {n}:"
                ));
                log.append(this);
                return fail(format!("{method} dropped at its Pending {k} of {n}: {why}"));
            }
            Err(other) => return Err(other),
        }
    }
    Ok(format!(
        "{method} dropped at {} of its {n} waits; each time the next call converged",
        at.len()
    ))
}

/// One round on a fresh claim, dropping the call at `k` (or never); the
/// call's `Pending` count.
async fn round(ctx: &Ctx, target: Target, k: Option<usize>, log: &mut Log) -> Step<usize> {
    let before = ctx.buckets(log).await?;
    let mut undo = Cleanup::default();
    let result = match target {
        Target::Provision => provision(ctx, k, &mut undo, log).await,
        Target::Delete => delete(ctx, k, &mut undo, log).await,
        Target::Rotate => rotate(ctx, k, &mut undo, log).await,
    };
    undo.run(ctx, log).await;
    let n = result?;
    ctx.expect_buckets(log, &before, &[], "after the round's teardown")
        .await?;
    Ok(n)
}

/// Drives the call, dropping it at its `Pending` `k`; its answer if it
/// finished first, and its `Pending` count (or `k`).
async fn first_call<T, F>(
    ctx: &Ctx,
    log: &mut Log,
    what: &str,
    k: Option<usize>,
    fut: F,
) -> Step<(Option<Result<T, ProvisionError>>, usize)>
where
    T: Shown,
    F: Future<Output = Result<T, ProvisionError>>,
{
    let s = &ctx.settings;
    match drive(fut, k, s.settle, s.call_timeout).await {
        Driven::Abandoned { at } => {
            log.note(format!("{what}: dropped at its Pending {at}"));
            Ok((None, at))
        }
        Driven::Done { output, pendings } => {
            let shown = match &output {
                Ok(v) => v.shown(),
                Err(e) => error_shown(e),
            };
            let early = if k.is_some() {
                " (before the drop point)"
            } else {
                ""
            };
            log.note(format!(
                "{what} → {shown}, after {pendings} Pendings{early}"
            ));
            Ok((Some(output), pendings))
        }
        Driven::TimedOut { pendings } => fail(format!(
            "{what} did not finish within {:?} ({pendings} Pendings)",
            s.call_timeout
        )),
    }
}

/// What a round tries with the credentials it got: every operation class
/// in the full round, listing and writing in the rounds that drop the call
/// (they check convergence; the matrix is the `scope.*` scenarios').
fn ops(k: Option<usize>) -> &'static [Op] {
    match k {
        None => &READ_WRITE,
        Some(_) => &[Op::List, Op::Write],
    }
}

/// A full first call must succeed, or fail retryably (the next call is the
/// library's retry).
fn full_call_ok<T>(what: &str, answer: &Option<Result<T, ProvisionError>>) -> Step<()> {
    match answer {
        Some(Err(e)) if !e.is_retryable() => {
            fail(format!("{what} failed with a {}", error_shown(e)))
        }
        _ => Ok(()),
    }
}

async fn provision(ctx: &Ctx, k: Option<usize>, undo: &mut Cleanup, log: &mut Log) -> Step<usize> {
    let before = ctx.buckets(log).await?;
    let claim = ctx.claim("pa");
    let req = ctx.request(&claim, ReclaimPolicy::Delete);
    undo.delete(ctx.teardown(&claim, None, ReclaimPolicy::Delete, true));
    let p = &ctx.provisioner;
    let what = format!("provision {} for {}", claim.bucket, claim.identity);
    let (answer, n) = first_call(ctx, log, &what, k, p.provision(&req)).await?;
    full_call_ok(&what, &answer)?;
    let access = ctx
        .must(log, "provision again", || p.provision(&req))
        .await?;
    undo.record(&claim.identity.uid, &access);
    ctx.expect_buckets(log, &before, &[&claim.bucket], "after provisioning again")
        .await?;
    ctx.expect_allowed(
        log,
        &access,
        &claim.bucket,
        ops(k),
        "the claim's credentials",
    )
    .await?;
    let td = ctx.teardown(&claim, Some(&access), ReclaimPolicy::Delete, true);
    ctx.must(log, "delete", || p.delete(&td)).await?;
    ctx.expect_bucket(log, &claim.bucket, false, "delete must remove the bucket")
        .await?;
    Ok(n)
}

async fn delete(ctx: &Ctx, k: Option<usize>, undo: &mut Cleanup, log: &mut Log) -> Step<usize> {
    let (claim, _, access) = ctx.provisioned("da", undo, log).await?;
    let p = &ctx.provisioner;
    let td = ctx.teardown(&claim, Some(&access), ReclaimPolicy::Delete, true);
    let (answer, n) = first_call(ctx, log, "delete", k, p.delete(&td)).await?;
    full_call_ok("delete", &answer)?;
    ctx.must(log, "delete again", || p.delete(&td)).await?;
    ctx.expect_bucket(log, &claim.bucket, false, "delete must remove the bucket")
        .await?;
    Ok(n)
}

async fn rotate(ctx: &Ctx, k: Option<usize>, undo: &mut Cleanup, log: &mut Log) -> Step<usize> {
    let (claim, req, old) = ctx.provisioned("ra", undo, log).await?;
    let p = &ctx.provisioner;
    let rot = ctx.rotation(&req, &old);
    let (answer, n) = first_call(ctx, log, "rotate", k, p.rotate(&rot)).await?;
    if let Some(Err(e)) = &answer
        && e.kind() == ErrorKind::Unsupported
    {
        return Err(Stop::NotApplicable(format!(
            "rotate is not supported ({}): rotation is optional",
            e.message()
        )));
    }
    full_call_ok("rotate", &answer)?;
    let new = ctx
        .must(log, "rotate again, same rotation", || p.rotate(&rot))
        .await?;
    undo.record(&claim.identity.uid, &new);
    ctx.expect_allowed(log, &new, &claim.bucket, ops(k), "the rotated credentials")
        .await?;
    let revocation = ctx
        .revoke_previous_key(log, "revoke_previous_key", &rot)
        .await?;
    ctx.expect_previous_revoked(log, &revocation, &old, &claim.bucket)
        .await?;
    ctx.expect_allowed(
        log,
        &new,
        &claim.bucket,
        &[Op::List],
        "the rotated credentials, after revoke_previous_key,",
    )
    .await?;
    Ok(n)
}
