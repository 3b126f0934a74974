//! Bucket settings a claim asks for, read back from the store: on after
//! provisioning and its retry, untouched by a re-issue, changed and
//! removed by an update and its repeat
//! ([`Rule::BucketSettings`](super::super::Rule::BucketSettings)).

use super::super::checks::probe_failed;
use super::super::ctx::{Cleanup, Ctx, Log, Step, Stop, fail};
use super::super::settings::{ExpectedSettings, StoreSettings, changes, compare};
use crate::core::provisioner::UpdateRequest;
use crate::obc::api::ReclaimPolicy;

pub(crate) async fn applied(ctx: &Ctx, undo: &mut Cleanup, log: &mut Log) -> Step<String> {
    let Some(cases) = ctx.settings.bucket_settings.clone() else {
        return Err(Stop::NotApplicable(
            "no bucket settings cases: give Kit::bucket_settings the additionalConfig that turns your provisioner's bucket settings on, an update that changes or removes them, and what the store holds after each"
                .to_owned(),
        ));
    };
    let before = ctx.buckets(log).await?;
    let claim = ctx.claim("bs");
    let bucket = &claim.bucket;
    let req = ctx
        .request(&claim, ReclaimPolicy::Delete)
        .with_additional_config(cases.provision.clone());
    undo.delete(ctx.teardown(&claim, None, ReclaimPolicy::Delete, true));
    let p = &ctx.provisioner;
    // No object is ever written: a versioned bucket would keep versions,
    // and a delete without forceDelete would (rightly) refuse it.
    let first = ctx
        .must(
            log,
            &format!(
                "provision {bucket} with additionalConfig {:?}",
                cases.provision
            ),
            || p.provision(&req),
        )
        .await?;
    undo.record(&claim.identity.uid, &first);
    let provisioned = read(ctx, log, bucket, "after provision").await?;
    let expected = &cases.after_provision;
    let compared = compare(expected, &provisioned, bucket);
    if compared.checked == 0 {
        // Nothing to check would pass any provisioner: say so instead.
        return Err(Stop::NotApplicable(if compared.unreadable.is_empty() {
            "the bucket settings cases expect nothing after provision (every setting Expect::Any)"
                .to_owned()
        } else {
            format!(
                "the store cannot read back any setting the cases expect ({}): StoreProbe::bucket_settings lists them unreadable",
                expected.shown(bucket)
            )
        }));
    }
    expect(log, expected, &provisioned, bucket, "after provision")?;

    let again = ctx
        .must(
            log,
            "provision again (the library lost the first answer)",
            || p.provision(&req),
        )
        .await?;
    undo.record(&claim.identity.uid, &again);
    ctx.expect_buckets(log, &before, &[bucket], "after provision and its retry")
        .await?;
    let when = "after a retry of provision";
    let now = read(ctx, log, bucket, when).await?;
    expect(log, expected, &now, bucket, when)?;
    unchanged(log, &provisioned, &now, bucket, when)?;

    let reissue = req.clone().reissuing(again.additional_state.clone());
    let reissued = ctx
        .must(
            log,
            "provision with reissue (the claim's Secret was deleted)",
            || p.provision(&reissue),
        )
        .await?;
    undo.record(&claim.identity.uid, &reissued);
    ctx.expect_buckets(log, &before, &[bucket], "after the re-issue")
        .await?;
    let when = "after a re-issue of credentials";
    let now = read(ctx, log, bucket, when).await?;
    expect(log, expected, &now, bucket, when)?;
    unchanged(log, &provisioned, &now, bucket, when)?;

    // As the library sends it: the class's parameters recorded at bind,
    // the config last applied, the state of the last answer.
    let upd = UpdateRequest::new(
        req.clone().with_additional_config(cases.update.clone()),
        cases.provision.clone(),
    )
    .with_state(reissued.additional_state.clone());
    let what = format!("update additionalConfig to {:?}", cases.update);
    ctx.must(log, &what, || p.update(&upd)).await?;
    let expected = &cases.after_update;
    let when = "after update";
    let updated = read(ctx, log, bucket, when).await?;
    expect(log, expected, &updated, bucket, when)?;

    ctx.must(
        log,
        "update again (the library did not record the first)",
        || p.update(&upd),
    )
    .await?;
    let when = "after a repeat of update";
    let now = read(ctx, log, bucket, when).await?;
    expect(log, expected, &now, bucket, when)?;
    unchanged(log, &updated, &now, bucket, when)?;
    ctx.expect_buckets(log, &before, &[bucket], "after the updates")
        .await?;
    Ok("the store held the settings asked for after provision, its retry and a re-issue, and after an update and its repeat".to_owned())
}

/// The settings `bucket` holds, read back through the probe; a probe that
/// cannot read them makes the scenario not applicable.
async fn read(ctx: &Ctx, log: &mut Log, bucket: &str, when: &str) -> Step<StoreSettings> {
    match ctx.probe.bucket_settings(bucket).await {
        Ok(Some(held)) => {
            log.note(format!("probe: {when}, bucket {bucket} holds {held}"));
            Ok(held)
        }
        Ok(None) => Err(Stop::NotApplicable(
            "the probe cannot read a bucket's settings back (StoreProbe::bucket_settings)"
                .to_owned(),
        )),
        Err(e) => probe_failed(&format!("read bucket {bucket}'s settings"), e),
    }
}

/// Fails unless `held` is what `expected` says; settings the store cannot
/// read are noted as not verified.
fn expect(
    log: &mut Log,
    expected: &ExpectedSettings,
    held: &StoreSettings,
    bucket: &str,
    when: &str,
) -> Step<()> {
    log.checking(format!(
        "{when}, bucket {bucket} holds {} (read back from the store)",
        expected.shown(bucket)
    ));
    let compared = compare(expected, held, bucket);
    for setting in compared.unreadable {
        log.not_verified(format!(
            "bucket setting {setting}: the store cannot read it back (StoreProbe::bucket_settings lists it unreadable)"
        ));
    }
    if compared.missed.is_empty() {
        return Ok(());
    }
    fail(format!(
        "{when}, bucket {bucket} does not hold the settings the claim asks for: {}",
        compared.missed.join("; ")
    ))
}

/// Fails if the store's settings moved from `was` (a retry, a re-issue or
/// a repeated update must leave them as they are).
fn unchanged(
    log: &mut Log,
    was: &StoreSettings,
    now: &StoreSettings,
    bucket: &str,
    when: &str,
) -> Step<()> {
    log.checking(format!(
        "{when}, bucket {bucket}'s settings are as they were before it"
    ));
    let moved = changes(was, now);
    if moved.is_empty() {
        return Ok(());
    }
    fail(format!(
        "{when}, bucket {bucket}'s settings changed: {} (a repeated call and a re-issue leave them as they are)",
        moved.join("; ")
    ))
}

#[cfg(test)]
#[path = "settings_tests.rs"]
mod tests;
