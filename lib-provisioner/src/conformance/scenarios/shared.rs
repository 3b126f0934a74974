//! Several claims on one existing bucket (brownfield): each claim's grant
//! and revoke leave the others' access as it was
//! ([`Rule::Scope`](super::super::Rule::Scope)).

use super::super::checks::Reach;
use super::super::ctx::{Cleanup, Ctx, Log, Step, Stop};

pub(crate) async fn grants(ctx: &Ctx, undo: &mut Cleanup, log: &mut Log) -> Step<String> {
    if ctx.settings.shared_credentials {
        return Err(Stop::NotApplicable(
            "the provisioner hands every claim the same credentials (Kit::shared_credentials): one claim's revoke cannot leave another's working".to_owned(),
        ));
    }
    let bucket = ctx.bucket_name("gs");
    undo.remove_bucket(&bucket);
    ctx.foreign_bucket(log, &bucket).await?;
    let p = &ctx.provisioner;
    let mut claims = Vec::new();
    for tag in ["ga", "gb"] {
        let claim = ctx.claim_for(tag, &bucket);
        let req = ctx.grant_request(&claim);
        undo.revoke(ctx.grant_teardown(&claim, None));
        let access = ctx
            .must(
                log,
                &format!("grant {bucket} to {}", claim.identity),
                || p.grant(&req),
            )
            .await?;
        undo.record(&claim.identity.uid, &access);
        claims.push((claim, access));
    }
    let [(a, access_a), (_, access_b)] = &claims[..] else {
        return Err(Stop::Fail("two claims were granted".to_owned()));
    };
    let cell = [(bucket.clone(), Reach::All)];
    ctx.expect_reach(
        log,
        access_a,
        &cell,
        "claim A's credentials, after claim B's grant,",
    )
    .await?;
    ctx.expect_reach(log, access_b, &cell, "claim B's credentials")
        .await?;
    let td = ctx.grant_teardown(a, Some(access_a));
    ctx.must(log, "revoke for claim A", || p.revoke(&td))
        .await?;
    ctx.expect_revoked(log, access_a, &bucket, "claim A's credentials")
        .await?;
    ctx.expect_reach(
        log,
        access_b,
        &cell,
        "claim B's credentials, after claim A's revoke,",
    )
    .await?;
    ctx.expect_bucket(log, &bucket, true, "revoke keeps a brownfield bucket")
        .await?;
    Ok(
        "two claims on one bucket: each grant and revoke left the other claim's access as it was"
            .to_owned(),
    )
}
