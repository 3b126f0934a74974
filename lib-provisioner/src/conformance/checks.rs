//! What the kit checks on the store, through the author's probe.

use std::collections::BTreeSet;

use super::ctx::{Ctx, Log, Step, fail};
use super::{Answer, Op, ProbeError};
use crate::core::provisioner::BucketAccess;

/// Reads and writes: what a read-write claim does with its bucket.
pub(crate) const READ_WRITE: [Op; 3] = [Op::Write, Op::Read, Op::List];
/// Every operation, for credentials that must reach nothing.
pub(crate) const ANY: [Op; 3] = [Op::List, Op::Read, Op::Write];

fn probe_failed<T>(what: &str, e: ProbeError) -> Step<T> {
    fail(format!(
        "the probe could not {what}: {e} (the kit cannot tell whether the provisioner met the rule)"
    ))
}

fn key(access: &BucketAccess) -> &str {
    &access.credentials.access_key_id
}

impl Ctx {
    /// The buckets on the store.
    pub(crate) async fn buckets(&self, log: &mut Log) -> Step<BTreeSet<String>> {
        match self.probe.list_buckets().await {
            Ok(b) => Ok(b),
            Err(e) => {
                log.note(format!("probe: list buckets → error: {e}"));
                probe_failed("list the buckets", e)
            }
        }
    }

    /// Fails unless the store's buckets are `before` plus `expected`.
    pub(crate) async fn expect_buckets(
        &self,
        log: &mut Log,
        before: &BTreeSet<String>,
        expected: &[&str],
        when: &str,
    ) -> Step<()> {
        let now = self.buckets(log).await?;
        let appeared: Vec<&String> = now
            .difference(before)
            .filter(|b| !expected.contains(&b.as_str()))
            .collect();
        let missing: Vec<&&str> = expected.iter().filter(|b| !now.contains(**b)).collect();
        log.note(format!(
            "probe: buckets that appeared {when}: {:?}",
            now.difference(before).collect::<Vec<_>>()
        ));
        if !appeared.is_empty() {
            return fail(format!(
                "{when}, the store holds bucket(s) {appeared:?} that no claim asked for (expected only {expected:?})"
            ));
        }
        if !missing.is_empty() {
            return fail(format!("{when}, bucket(s) {missing:?} do not exist"));
        }
        Ok(())
    }

    /// Fails unless `bucket` exists (`present`) or not; `why` says what
    /// the contract expects.
    pub(crate) async fn expect_bucket(
        &self,
        log: &mut Log,
        bucket: &str,
        present: bool,
        why: &str,
    ) -> Step<()> {
        let exists = match self.probe.bucket_exists(bucket).await {
            Ok(e) => e,
            Err(e) => return probe_failed(&format!("tell whether bucket {bucket} exists"), e),
        };
        log.note(format!(
            "probe: bucket {bucket} {}",
            if exists { "exists" } else { "does not exist" }
        ));
        if exists != present {
            return fail(format!(
                "bucket {bucket} {}: {why}",
                if exists {
                    "still exists"
                } else {
                    "does not exist"
                }
            ));
        }
        Ok(())
    }

    async fn try_op(
        &self,
        log: &mut Log,
        access: &BucketAccess,
        bucket: &str,
        op: Op,
    ) -> Step<Answer> {
        match self.probe.try_access(access, bucket, op).await {
            Ok(answer) => {
                let shown = match &answer {
                    Answer::Allowed => "allowed".to_owned(),
                    Answer::Denied(why) => format!("denied ({why})"),
                };
                log.note(format!(
                    "probe: {op} on {bucket} with key {} → {shown}",
                    key(access)
                ));
                Ok(answer)
            }
            Err(e) => probe_failed(&format!("try to {op} bucket {bucket}"), e),
        }
    }

    /// Fails unless `access` may do each of `ops` on `bucket`.
    pub(crate) async fn expect_allowed(
        &self,
        log: &mut Log,
        access: &BucketAccess,
        bucket: &str,
        ops: &[Op],
        whose: &str,
    ) -> Step<()> {
        for op in ops {
            if let Answer::Denied(why) = self.try_op(log, access, bucket, *op).await? {
                return fail(format!(
                    "{whose} (key {}) cannot {op} bucket {bucket}: the store said {why}",
                    key(access)
                ));
            }
        }
        Ok(())
    }

    /// Fails if `access` may do any of `ops` on `bucket`.
    pub(crate) async fn expect_denied(
        &self,
        log: &mut Log,
        access: &BucketAccess,
        bucket: &str,
        ops: &[Op],
        whose: &str,
    ) -> Step<()> {
        for op in ops {
            if self.try_op(log, access, bucket, *op).await? == Answer::Allowed {
                return fail(format!(
                    "{whose} (key {}) can {op} bucket {bucket}, which it must not reach",
                    key(access)
                ));
            }
        }
        Ok(())
    }

    /// Fails unless `access` stops working on `bucket` within the
    /// revocation grace (a store may cache credentials a little while).
    /// Not checked for shared credentials, which teardown keeps.
    pub(crate) async fn expect_revoked(
        &self,
        log: &mut Log,
        access: &BucketAccess,
        bucket: &str,
        whose: &str,
    ) -> Step<()> {
        if self.settings.shared_credentials {
            log.note(format!(
                "not checked: {whose} still working (the provisioner hands out shared credentials)"
            ));
            return Ok(());
        }
        let deadline = tokio::time::Instant::now() + self.settings.revocation_grace;
        loop {
            if let Answer::Denied(_) = self.try_op(log, access, bucket, Op::List).await? {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                return fail(format!(
                    "{whose} (key {}) still reach bucket {bucket} {:?} after they were revoked",
                    key(access),
                    self.settings.revocation_grace
                ));
            }
            tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        }
    }

    /// Creates `bucket` as a stranger would, through the probe.
    pub(crate) async fn foreign_bucket(&self, log: &mut Log, bucket: &str) -> Step<()> {
        match self.probe.create_foreign_bucket(bucket).await {
            Ok(()) => {
                log.note(format!(
                    "probe: created bucket {bucket} as someone else, with data"
                ));
                Ok(())
            }
            Err(e) => probe_failed(&format!("create bucket {bucket}"), e),
        }
    }
}
