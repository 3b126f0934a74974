//! What teardown leaves ([`Rule::Teardown`](super::super::Rule::Teardown)).

use super::super::checks::READ_WRITE;
use super::super::ctx::{Cleanup, Ctx, Log, Step};
use crate::obc::api::ReclaimPolicy;

pub(crate) async fn delete(ctx: &Ctx, undo: &mut Cleanup, log: &mut Log) -> Step<String> {
    let before = ctx.buckets(log).await?;
    let claim = ctx.claim("td");
    let req = ctx.request(&claim, ReclaimPolicy::Delete);
    undo.delete(ctx.teardown(&claim, None, ReclaimPolicy::Delete, true));
    let p = &ctx.provisioner;
    let access = ctx
        .must(log, &format!("provision {}", claim.bucket), || {
            p.provision(&req)
        })
        .await?;
    undo.record(&claim.identity.uid, &access);
    ctx.expect_allowed(
        log,
        &access,
        &claim.bucket,
        &READ_WRITE,
        "the claim's credentials",
    )
    .await?;
    let td = ctx.teardown(&claim, Some(&access), ReclaimPolicy::Delete, true);
    ctx.must(log, "delete", || p.delete(&td)).await?;
    ctx.expect_bucket(
        log,
        &claim.bucket,
        false,
        "delete under reclaim policy Delete must remove the bucket",
    )
    .await?;
    ctx.expect_buckets(log, &before, &[], "after delete")
        .await?;
    // Credentials left behind would reach whoever makes a bucket of that
    // name next: make one, and try them on it.
    undo.remove_bucket(&claim.bucket);
    ctx.foreign_bucket(log, &claim.bucket).await?;
    ctx.expect_revoked(
        log,
        &access,
        &claim.bucket,
        "the deleted claim's credentials",
    )
    .await?;
    Ok("delete removed the bucket and the claim's credentials".to_owned())
}

pub(crate) async fn retain(ctx: &Ctx, undo: &mut Cleanup, log: &mut Log) -> Step<String> {
    let (claim, access) = ctx.provisioned_retained("tr", undo, log).await?;
    let p = &ctx.provisioner;
    let td = ctx.teardown(&claim, Some(&access), ReclaimPolicy::Retain, true);
    ctx.must(log, "revoke", || p.revoke(&td)).await?;
    ctx.expect_bucket(
        log,
        &claim.bucket,
        true,
        "revoke under reclaim policy Retain must keep the bucket",
    )
    .await?;
    ctx.expect_revoked(log, &access, &claim.bucket, "the claim's credentials")
        .await?;
    Ok("revoke kept the bucket and removed the claim's credentials".to_owned())
}
