//! Buckets that are not the claim's
//! ([`Rule::Ownership`](super::super::Rule::Ownership)).

use super::super::checks::READ_WRITE;
use super::super::ctx::{Cleanup, Ctx, Log, Step, fail};
use crate::obc::api::ReclaimPolicy;

pub(crate) async fn other_claims_bucket(
    ctx: &Ctx,
    undo: &mut Cleanup,
    log: &mut Log,
) -> Step<String> {
    let a = ctx.claim("oa");
    let req_a = ctx.request(&a, ReclaimPolicy::Delete);
    undo.delete(ctx.teardown(&a, None, ReclaimPolicy::Delete, true));
    let p = &ctx.provisioner;
    let access_a = ctx
        .must(
            log,
            &format!("provision {} for claim A ({})", a.bucket, a.identity),
            || p.provision(&req_a),
        )
        .await?;
    undo.record(&a.identity.uid, &access_a);
    let b = ctx.claim_for("ob", &a.bucket);
    let req_b = ctx.request(&b, ReclaimPolicy::Delete);
    // Claim B's teardown as the library would make it: its provisioning
    // never succeeded, so nothing records the bucket as B's.
    let td_b = ctx.teardown(&b, None, ReclaimPolicy::Delete, false);
    undo.revoke(td_b.clone());
    let what = format!("provision {} for claim B ({})", a.bucket, b.identity);
    let before = ctx.buckets(log).await?;
    let made = ctx.inventory(log).await?;
    match ctx.refused(log, &what, || p.provision(&req_b)).await? {
        Ok(given) => {
            undo.record(&b.identity.uid, &given);
            return fail(format!(
                "{what} succeeded, handing claim B access key {} to claim A's bucket",
                given.credentials.access_key_id
            ));
        }
        Err(e) => {
            ctx.expect_nothing_created(log, &e, &before, made.as_ref(), &what)
                .await?
        }
    }
    ctx.must(log, "delete for claim B (provisioned=false)", || {
        p.delete(&td_b)
    })
    .await?;
    ctx.must(log, "revoke for claim B", || p.revoke(&td_b))
        .await?;
    ctx.expect_bucket(
        log,
        &a.bucket,
        true,
        "claim B's teardown must not remove claim A's bucket",
    )
    .await?;
    ctx.expect_allowed(
        log,
        &access_a,
        &a.bucket,
        &READ_WRITE,
        "claim A's credentials, after claim B's teardown,",
    )
    .await?;
    Ok("claim B was refused claim A's bucket, and its teardown left claim A's bucket and credentials".to_owned())
}

pub(crate) async fn foreign_bucket(ctx: &Ctx, undo: &mut Cleanup, log: &mut Log) -> Step<String> {
    let bucket = ctx.bucket_name("of");
    undo.remove_bucket(&bucket);
    ctx.foreign_bucket(log, &bucket).await?;
    let claim = ctx.claim_for("of", &bucket);
    let req = ctx.request(&claim, ReclaimPolicy::Delete);
    let td = ctx.teardown(&claim, None, ReclaimPolicy::Delete, false);
    undo.revoke(td.clone());
    let p = &ctx.provisioner;
    let what = format!(
        "provision {bucket} (made by someone else) for {}",
        claim.identity
    );
    let before = ctx.buckets(log).await?;
    let made = ctx.inventory(log).await?;
    match ctx.refused(log, &what, || p.provision(&req)).await? {
        Ok(given) => {
            undo.record(&claim.identity.uid, &given);
            return fail(format!(
                "{what} succeeded, handing the claim access key {} to a bucket the provisioner did not make",
                given.credentials.access_key_id
            ));
        }
        Err(e) => {
            ctx.expect_nothing_created(log, &e, &before, made.as_ref(), &what)
                .await?
        }
    }
    ctx.must(log, "delete for the claim (provisioned=false)", || {
        p.delete(&td)
    })
    .await?;
    ctx.expect_bucket(
        log,
        &bucket,
        true,
        "the claim's teardown must not remove a bucket it did not make",
    )
    .await?;
    Ok("the foreign bucket was refused and kept".to_owned())
}

pub(crate) async fn grant_missing_bucket(
    ctx: &Ctx,
    undo: &mut Cleanup,
    log: &mut Log,
) -> Step<String> {
    let before = ctx.buckets(log).await?;
    let claim = ctx.claim("gm");
    let req = ctx.grant_request(&claim);
    undo.revoke(ctx.grant_teardown(&claim, None));
    let p = &ctx.provisioner;
    let what = format!(
        "grant {} (does not exist) to {}",
        claim.bucket, claim.identity
    );
    let made = ctx.inventory(log).await?;
    match ctx.refused(log, &what, || p.grant(&req)).await? {
        Ok(given) => {
            undo.record(&claim.identity.uid, &given);
            undo.remove_bucket(&claim.bucket);
            return fail(format!(
                "{what} succeeded (access key {}): a brownfield class names an existing bucket, and a missing one is the class's mistake to report",
                given.credentials.access_key_id
            ));
        }
        Err(e) => {
            ctx.expect_nothing_created(log, &e, &before, made.as_ref(), &what)
                .await?
        }
    }
    ctx.expect_buckets(log, &before, &[], "after the refused grant")
        .await?;
    Ok("grant of a missing bucket was refused, and made nothing".to_owned())
}
