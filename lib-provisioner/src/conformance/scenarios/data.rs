//! Teardown of a bucket that holds data, under both reclaim policies
//! ([`Rule::Teardown`](super::super::Rule::Teardown)): Delete leaves no
//! bucket or fails (a store refusing non-empty deletes included), never
//! reports success with the bucket left; Retain keeps bucket and data.

use super::super::calls::error_shown;
use super::super::ctx::{Cleanup, Ctx, Log, Step, Stop, fail};
use crate::obc::api::ReclaimPolicy;

async fn fill(ctx: &Ctx, log: &mut Log, bucket: &str) -> Step<()> {
    match ctx.probe.put_data(bucket).await {
        Ok(true) => {
            log.note(format!("probe: put an object into {bucket}"));
            Ok(())
        }
        Ok(false) => Err(Stop::NotApplicable(
            "the probe cannot put data into a bucket (StoreProbe::put_data)".to_owned(),
        )),
        Err(e) => fail(format!(
            "the probe could not put data into bucket {bucket}: {e}"
        )),
    }
}

pub(crate) async fn delete(ctx: &Ctx, undo: &mut Cleanup, log: &mut Log) -> Step<String> {
    let (claim, _, access) = ctx.provisioned("dd", undo, log).await?;
    undo.remove_bucket(&claim.bucket);
    fill(ctx, log, &claim.bucket).await?;
    let p = &ctx.provisioner;
    let td = ctx.teardown(&claim, Some(&access), ReclaimPolicy::Delete, true);
    match ctx
        .call(log, "delete (the bucket holds data)", || p.delete(&td))
        .await
    {
        Ok(()) => {
            ctx.expect_bucket(
                log,
                &claim.bucket,
                false,
                "delete under reclaim policy Delete returned Ok, so the bucket and its data must be gone (or delete must fail, saying why)",
            )
            .await?;
            Ok("delete of a bucket holding data removed it".to_owned())
        }
        Err(e) => {
            ctx.expect_bucket(
                log,
                &claim.bucket,
                true,
                "a delete that failed must not have removed the bucket",
            )
            .await?;
            Ok(format!(
                "delete of a bucket holding data was refused ({}); the bucket stays",
                error_shown(&e)
            ))
        }
    }
}

pub(crate) async fn retain(ctx: &Ctx, undo: &mut Cleanup, log: &mut Log) -> Step<String> {
    let (claim, access) = ctx.provisioned_retained("dk", undo, log).await?;
    let p = &ctx.provisioner;
    fill(ctx, log, &claim.bucket).await?;
    let td = ctx.teardown(&claim, Some(&access), ReclaimPolicy::Retain, true);
    ctx.must(log, "revoke (the bucket holds data)", || p.revoke(&td))
        .await?;
    ctx.expect_bucket(
        log,
        &claim.bucket,
        true,
        "revoke under reclaim policy Retain keeps the bucket",
    )
    .await?;
    log.checking(format!(
        "revoke under reclaim policy Retain keeps bucket {}'s data",
        claim.bucket
    ));
    match ctx.probe.holds_data(&claim.bucket).await {
        Ok(Some(true)) => {}
        Ok(Some(false)) => {
            return fail(format!(
                "bucket {} is empty after revoke under Retain: the claim's data is gone",
                claim.bucket
            ));
        }
        Ok(None) => log.not_verified(
            "that Retain keeps a bucket's data: the probe cannot tell (StoreProbe::holds_data)",
        ),
        Err(e) => {
            return fail(format!(
                "the probe could not list bucket {}: {e}",
                claim.bucket
            ));
        }
    }
    ctx.expect_revoked(log, &access, &claim.bucket, "the claim's credentials")
        .await?;
    Ok("revoke under Retain kept the bucket and its data".to_owned())
}
