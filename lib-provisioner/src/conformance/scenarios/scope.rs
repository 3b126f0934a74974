//! What a claim's credentials reach
//! ([`Rule::Scope`](super::super::Rule::Scope)).

use super::super::checks::Reach;
use super::super::ctx::{Cleanup, Ctx, Log, Step, Stop};
use crate::obc::api::ReclaimPolicy;

fn shared() -> Stop {
    Stop::NotApplicable(
        "the provisioner hands every claim the same credentials (Kit::shared_credentials): they reach every bucket, so use it only for single-tenant stores".to_owned(),
    )
}

pub(crate) async fn other_claims_bucket(
    ctx: &Ctx,
    undo: &mut Cleanup,
    log: &mut Log,
) -> Step<String> {
    if ctx.settings.shared_credentials {
        return Err(shared());
    }
    let foreign = ctx.bucket_name("sf");
    undo.remove_bucket(&foreign);
    ctx.foreign_bucket(log, &foreign).await?;
    let p = &ctx.provisioner;
    let mut claims = Vec::new();
    for tag in ["sa", "sb"] {
        let claim = ctx.claim(tag);
        let req = ctx.request(&claim, ReclaimPolicy::Delete);
        undo.delete(ctx.teardown(&claim, None, ReclaimPolicy::Delete, true));
        let access = ctx
            .must(
                log,
                &format!("provision {} for {}", claim.bucket, claim.identity),
                || p.provision(&req),
            )
            .await?;
        undo.record(&claim.identity.uid, &access);
        claims.push((claim, access));
    }
    let [(a, access_a), (b, access_b)] = &claims[..] else {
        return Err(Stop::Fail("two claims were provisioned".to_owned()));
    };
    let mut cells = ctx.own_and_look_alikes(log, undo, &a.bucket).await?;
    cells.push((b.bucket.clone(), Reach::Nothing));
    cells.push((foreign.clone(), Reach::Nothing));
    ctx.expect_reach(log, access_a, &cells, "claim A's credentials")
        .await?;
    ctx.expect_reach(
        log,
        access_b,
        &[
            (b.bucket.clone(), Reach::All),
            (a.bucket.clone(), Reach::Nothing),
        ],
        "claim B's credentials",
    )
    .await?;
    Ok("each claim's credentials reach its own bucket only (every operation class; not the other claim's, a stranger's, or look-alike names)".to_owned())
}

pub(crate) async fn read_only(ctx: &Ctx, undo: &mut Cleanup, log: &mut Log) -> Step<String> {
    if ctx.settings.shared_credentials {
        return Err(shared());
    }
    let Some(config) = ctx.settings.read_only.clone() else {
        return Err(Stop::NotApplicable(
            "no read-only access to ask for: give Kit::read_only_config the additionalConfig (or parameters) that asks for it".to_owned(),
        ));
    };
    let claim = ctx.claim("ro");
    let req = ctx
        .request(&claim, ReclaimPolicy::Delete)
        .with_additional_config(config.clone());
    undo.delete(ctx.teardown(&claim, None, ReclaimPolicy::Delete, true));
    let p = &ctx.provisioner;
    let access = ctx
        .must(
            log,
            &format!(
                "provision {} with additionalConfig {config:?}",
                claim.bucket
            ),
            || p.provision(&req),
        )
        .await?;
    undo.record(&claim.identity.uid, &access);
    ctx.expect_reach(
        log,
        &access,
        &[(claim.bucket.clone(), Reach::ReadOnly)],
        "the read-only credentials",
    )
    .await?;
    Ok(
        "read-only credentials read and list, and cannot write, delete or upload in parts"
            .to_owned(),
    )
}
