//! Credentials issued again for a bound claim (its Secret was deleted):
//! never a new bucket, never wider access
//! ([`Rule::Ownership`](super::super::Rule::Ownership)).

use super::super::ctx::{Cleanup, Ctx, Log, Step, fail};
use crate::obc::api::ReclaimPolicy;

pub(crate) async fn provision(ctx: &Ctx, undo: &mut Cleanup, log: &mut Log) -> Step<String> {
    let before = ctx.buckets(log).await?;
    let (claim, req, first) = ctx.provisioned("ri", undo, log).await?;
    let p = &ctx.provisioner;
    let again = req.clone().reissuing(first.additional_state.clone());
    let access = ctx
        .must(
            log,
            "provision with reissue (the claim's Secret was deleted)",
            || p.provision(&again),
        )
        .await?;
    undo.record(&claim.identity.uid, &access);
    ctx.expect_buckets(log, &before, &[&claim.bucket], "after the re-issue")
        .await?;
    let cells = ctx.own_and_look_alikes(log, undo, &claim.bucket).await?;
    ctx.expect_reach(log, &access, &cells, "the re-issued credentials")
        .await?;
    // The bucket removed out of band: a re-issue must refuse, not make it.
    let td = ctx.teardown(&claim, Some(&access), ReclaimPolicy::Delete, true);
    ctx.must(log, "delete", || p.delete(&td)).await?;
    let gone = again.clone().reissuing(access.additional_state.clone());
    let what = format!(
        "provision with reissue for {}, whose bucket is gone",
        claim.bucket
    );
    let refused = ctx.refused(log, &what, || p.provision(&gone)).await?;
    ctx.expect_bucket(
        log,
        &claim.bucket,
        false,
        "a re-issue never creates the bucket it is bound to",
    )
    .await?;
    if let Ok(given) = refused {
        undo.record(&claim.identity.uid, &given);
        return fail(format!(
            "{what} succeeded (access key {}): a re-issue for a bucket that is gone is a permanent error",
            given.credentials.access_key_id
        ));
    }
    Ok("the re-issue reached the claim's bucket only, made no bucket, and was refused once the bucket was gone".to_owned())
}
