//! Every method called again, as after a crash before the library
//! recorded the first answer ([`Rule::Repeat`](super::super::Rule::Repeat)).

use std::collections::BTreeMap;

use super::super::checks::{READ_WRITE, Reach};
use super::super::ctx::{Cleanup, Ctx, Log, Step, Stop};
use super::super::{Op, calls::error_shown};
use crate::core::provisioner::{ErrorKind, UpdateRequest};
use crate::obc::api::ReclaimPolicy;

pub(crate) async fn provision(ctx: &Ctx, undo: &mut Cleanup, log: &mut Log) -> Step<String> {
    let before = ctx.buckets(log).await?;
    let claim = ctx.claim("pr");
    let req = ctx.request(&claim, ReclaimPolicy::Delete);
    undo.delete(ctx.teardown(&claim, None, ReclaimPolicy::Delete, true));
    let p = &ctx.provisioner;
    let first = ctx
        .must(
            log,
            &format!("provision {} for {}", claim.bucket, claim.identity),
            || p.provision(&req),
        )
        .await?;
    undo.record(&claim.identity.uid, &first);
    let second = ctx
        .must(
            log,
            "provision again (the library lost the first answer)",
            || p.provision(&req),
        )
        .await?;
    undo.record(&claim.identity.uid, &second);
    ctx.expect_buckets(log, &before, &[&claim.bucket], "after two provisions")
        .await?;
    ctx.expect_allowed(
        log,
        &second,
        &claim.bucket,
        &READ_WRITE,
        "the second answer's credentials",
    )
    .await?;
    Ok("both calls succeeded, one bucket, the second answer's credentials work".to_owned())
}

pub(crate) async fn grant(ctx: &Ctx, undo: &mut Cleanup, log: &mut Log) -> Step<String> {
    let bucket = ctx.bucket_name("gr");
    undo.remove_bucket(&bucket);
    ctx.foreign_bucket(log, &bucket).await?;
    let claim = ctx.claim_for("gr", &bucket);
    let req = ctx.grant_request(&claim);
    undo.revoke(ctx.grant_teardown(&claim, None));
    let p = &ctx.provisioner;
    ctx.must(
        log,
        &format!("grant {bucket} to {}", claim.identity),
        || p.grant(&req),
    )
    .await?;
    let access = ctx.must(log, "grant again", || p.grant(&req)).await?;
    undo.record(&claim.identity.uid, &access);
    ctx.expect_allowed(
        log,
        &access,
        &bucket,
        &READ_WRITE,
        "the granted credentials",
    )
    .await?;
    let td = ctx.grant_teardown(&claim, Some(&access));
    ctx.must(log, "revoke", || p.revoke(&td)).await?;
    ctx.must(log, "revoke again", || p.revoke(&td)).await?;
    ctx.expect_bucket(log, &bucket, true, "revoke must keep a brownfield bucket")
        .await?;
    ctx.expect_revoked(log, &access, &bucket, "the granted credentials")
        .await?;
    Ok("grant twice and revoke twice succeeded; the bucket stays".to_owned())
}

pub(crate) async fn rotate(ctx: &Ctx, undo: &mut Cleanup, log: &mut Log) -> Step<String> {
    let (claim, req, old) = ctx.provisioned("rr", undo, log).await?;
    let p = &ctx.provisioner;
    let rot = ctx.rotation(&req, &old);
    match ctx.call(log, "rotate", || p.rotate(&rot)).await {
        Ok(_) => {}
        Err(e) if e.kind() == ErrorKind::Unsupported => {
            return Err(Stop::NotApplicable(format!(
                "rotate is not supported ({}): rotation is optional",
                e.message()
            )));
        }
        Err(e) => {
            return super::super::ctx::fail(format!("rotate failed with a {}", error_shown(&e)));
        }
    }
    let new = ctx
        .must(
            log,
            "rotate again, same rotation (the Secret was not switched yet)",
            || p.rotate(&rot),
        )
        .await?;
    undo.record(&claim.identity.uid, &new);
    ctx.expect_allowed(
        log,
        &new,
        &claim.bucket,
        &READ_WRITE,
        "the rotated credentials",
    )
    .await?;
    ctx.expect_allowed(
        log,
        &old,
        &claim.bucket,
        &[Op::List],
        "the previous credentials, until revoke_previous_key,",
    )
    .await?;
    ctx.revoke_previous_key(log, "revoke_previous_key", &rot)
        .await?;
    let revocation = ctx
        .revoke_previous_key(log, "revoke_previous_key again", &rot)
        .await?;
    ctx.expect_previous_revoked(log, &revocation, &old, &claim.bucket)
        .await?;
    let cells = ctx.own_and_look_alikes(log, undo, &claim.bucket).await?;
    ctx.expect_reach(
        log,
        &new,
        &cells,
        "the rotated credentials, after revoke_previous_key,",
    )
    .await?;
    Ok(
        "rotate twice and revoke_previous_key twice succeeded; only the new credentials work"
            .to_owned(),
    )
}

pub(crate) async fn update(ctx: &Ctx, undo: &mut Cleanup, log: &mut Log) -> Step<String> {
    let Some(change) = ctx.settings.update.clone() else {
        return Err(Stop::NotApplicable(
            "no change to apply: give Kit::update_config an additionalConfig your provisioner applies after bind"
                .to_owned(),
        ));
    };
    let (claim, req, access) = ctx.provisioned("ur", undo, log).await?;
    let p = &ctx.provisioner;
    let upd = UpdateRequest::new(
        req.clone().with_additional_config(change.clone()),
        BTreeMap::new(),
    )
    .with_state(access.additional_state.clone());
    let what = format!("update additionalConfig to {change:?}");
    match ctx.call(log, &what, || p.update(&upd)).await {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::Unsupported => {
            return Err(Stop::NotApplicable(format!(
                "update is not supported ({}): it is optional",
                e.message()
            )));
        }
        Err(e) => {
            return super::super::ctx::fail(format!("{what} failed with a {}", error_shown(&e)));
        }
    }
    ctx.must(
        log,
        "update again (the library did not record the first)",
        || p.update(&upd),
    )
    .await?;
    ctx.expect_config(log, &claim.bucket, &change).await?;
    ctx.expect_reach(
        log,
        &access,
        &[(claim.bucket.clone(), Reach::All)],
        "the claim's credentials, after the update,",
    )
    .await?;
    Ok("update twice succeeded; the claim's credentials reach their bucket as before".to_owned())
}
