//! Teardown of what is gone, or never was
//! ([`Rule::GoneIsDone`](super::super::Rule::GoneIsDone)).

use super::super::ctx::{Cleanup, Ctx, Log, Step};
use crate::obc::api::ReclaimPolicy;

pub(crate) async fn delete_repeat(ctx: &Ctx, undo: &mut Cleanup, log: &mut Log) -> Step<String> {
    let (claim, _, access) = ctx.provisioned("dr", undo, log).await?;
    let p = &ctx.provisioner;
    let td = ctx.teardown(&claim, Some(&access), ReclaimPolicy::Delete, true);
    ctx.must(log, "delete", || p.delete(&td)).await?;
    ctx.must(
        log,
        "delete again (the library lost the first answer)",
        || p.delete(&td),
    )
    .await?;
    ctx.expect_bucket(log, &claim.bucket, false, "delete must remove the bucket")
        .await?;
    Ok("delete twice succeeded".to_owned())
}

pub(crate) async fn delete_never_provisioned(
    ctx: &Ctx,
    _: &mut Cleanup,
    log: &mut Log,
) -> Step<String> {
    let before = ctx.buckets(log).await?;
    let claim = ctx.claim("dn");
    let p = &ctx.provisioner;
    let reserved = ctx.teardown(&claim, None, ReclaimPolicy::Delete, false);
    ctx.must(
        log,
        &format!(
            "delete {}, never made (provisioning died before it; provisioned=false)",
            claim.bucket
        ),
        || p.delete(&reserved),
    )
    .await?;
    let recorded = ctx.teardown(&claim, None, ReclaimPolicy::Delete, true);
    ctx.must(
        log,
        "delete again, recorded as provisioned (removed out of band)",
        || p.delete(&recorded),
    )
    .await?;
    ctx.expect_buckets(log, &before, &[], "after deleting a bucket never made")
        .await?;
    Ok("delete of a bucket never made succeeded, and made nothing".to_owned())
}

pub(crate) async fn revoke_repeat(ctx: &Ctx, undo: &mut Cleanup, log: &mut Log) -> Step<String> {
    let (claim, access) = ctx.provisioned_retained("rv", undo, log).await?;
    let p = &ctx.provisioner;
    let td = ctx.teardown(&claim, Some(&access), ReclaimPolicy::Retain, true);
    ctx.must(log, "revoke", || p.revoke(&td)).await?;
    ctx.must(
        log,
        "revoke again (the library lost the first answer)",
        || p.revoke(&td),
    )
    .await?;
    Ok("revoke twice succeeded".to_owned())
}

pub(crate) async fn revoke_never_granted(
    ctx: &Ctx,
    _: &mut Cleanup,
    log: &mut Log,
) -> Step<String> {
    let claim = ctx.claim("rn");
    let p = &ctx.provisioner;
    let reserved = ctx.teardown(&claim, None, ReclaimPolicy::Retain, false);
    ctx.must(
        log,
        &format!(
            "revoke for {}, never given access (provisioned=false)",
            claim.identity
        ),
        || p.revoke(&reserved),
    )
    .await?;
    let recorded = ctx.teardown(&claim, None, ReclaimPolicy::Retain, true);
    ctx.must(log, "revoke again, recorded as provisioned", || {
        p.revoke(&recorded)
    })
    .await?;
    let brownfield = ctx.grant_teardown(&claim, None);
    ctx.must(log, "revoke of a brownfield grant never made", || {
        p.revoke(&brownfield)
    })
    .await?;
    Ok("revoke of access never granted succeeded".to_owned())
}
