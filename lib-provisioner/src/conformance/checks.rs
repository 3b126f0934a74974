//! What the kit checks on the store, through the author's probe.

use std::collections::BTreeSet;

use super::ctx::{Ctx, Log, Step, fail};
use super::{Answer, Op, ProbeError};
use crate::core::provisioner::{BucketAccess, Made};

/// Every operation class: what a read-write claim does with its bucket.
pub(crate) const READ_WRITE: [Op; 5] = Op::ALL;
/// Every operation, for credentials that must reach nothing.
pub(crate) const ANY: [Op; 5] = Op::ALL;

/// What credentials may do on one bucket: the access mode's matrix row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reach {
    /// Every operation (read-write).
    All,
    /// List and read; no write, delete or multipart upload.
    ReadOnly,
    /// Nothing (another claim's bucket, revoked credentials).
    Nothing,
}

impl Reach {
    pub(crate) fn allows(self, op: Op) -> bool {
        match self {
            Self::All => true,
            Self::ReadOnly => matches!(op, Op::List | Op::Read),
            Self::Nothing => false,
        }
    }
}

impl std::fmt::Display for Reach {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::All => "read-write",
            Self::ReadOnly => "read-only",
            Self::Nothing => "no access",
        })
    }
}

/// Names sharing a prefix and a suffix with `bucket` (`<bucket>x`,
/// `<run prefix>z<rest>`): a policy written with a wildcard (`bucket*`,
/// `*rest`) reaches them.
pub(crate) fn look_alikes(run_prefix: &str, bucket: &str) -> [String; 2] {
    let rest = bucket.strip_prefix(run_prefix).unwrap_or(bucket);
    [format!("{bucket}x"), format!("{run_prefix}z{rest}")]
}

pub(crate) fn probe_failed<T>(what: &str, e: ProbeError) -> Step<T> {
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
        log.checking(format!(
            "{when}, the store holds exactly the buckets it held before plus {expected:?}"
        ));
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
        log.checking(format!(
            "bucket {bucket} {}: {why}",
            if present { "exists" } else { "is gone" }
        ));
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
        log.checking(format!("{whose} may {} bucket {bucket}", shown_ops(ops)));
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

    /// The access matrix: for each bucket, every operation class is
    /// allowed or denied as its [`Reach`] says.
    pub(crate) async fn expect_reach(
        &self,
        log: &mut Log,
        access: &BucketAccess,
        cells: &[(String, Reach)],
        whose: &str,
    ) -> Step<()> {
        for (bucket, reach) in cells {
            log.checking(format!(
                "{whose} have {reach} on bucket {bucket}: {}",
                Op::ALL
                    .iter()
                    .map(|op| format!(
                        "{op} {}",
                        if reach.allows(*op) {
                            "allowed"
                        } else {
                            "denied"
                        }
                    ))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
            for op in Op::ALL {
                let answer = self.try_op(log, access, bucket, op).await?;
                match (reach.allows(op), answer) {
                    (true, Answer::Denied(why)) => {
                        return fail(format!(
                            "{whose} (key {}) cannot {op} bucket {bucket}, which they must reach {reach}: the store said {why}",
                            key(access)
                        ));
                    }
                    (false, Answer::Allowed) if *reach == Reach::Nothing => {
                        return fail(format!(
                            "{whose} (key {}) can {op} bucket {bucket}, which they must not reach",
                            key(access)
                        ));
                    }
                    (false, Answer::Allowed) => {
                        return fail(format!(
                            "{whose} (key {}) can {op} bucket {bucket}, which they may only reach {reach}",
                            key(access)
                        ));
                    }
                    _ => {}
                }
            }
        }
        Ok(())
    }

    /// Fails unless `access` stops working on `bucket` within the
    /// revocation grace (a store may cache credentials a little while),
    /// for every operation class, not only listing. Not checked for shared
    /// credentials, which teardown keeps.
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
        log.checking(format!(
            "{whose} (key {}) reach nothing on bucket {bucket} within {:?} of their revocation: {} denied",
            key(access),
            self.settings.revocation_grace,
            shown_ops(&ANY)
        ));
        let deadline = tokio::time::Instant::now() + self.settings.revocation_grace;
        loop {
            let mut still = None;
            for op in ANY {
                if self.try_op(log, access, bucket, op).await? == Answer::Allowed {
                    still = Some(op);
                    break;
                }
            }
            let Some(op) = still else {
                return Ok(());
            };
            if tokio::time::Instant::now() >= deadline {
                return fail(format!(
                    "{whose} (key {}) can still {op} bucket {bucket} {:?} after they were revoked",
                    key(access),
                    self.settings.revocation_grace
                ));
            }
            tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        }
    }

    /// What the store holds of principals and policies, if the probe can
    /// list them.
    pub(crate) async fn inventory(&self, log: &mut Log) -> Step<Option<BTreeSet<Made>>> {
        match self.probe.inventory().await {
            Ok(listed) => Ok(listed.map(|l| l.into_iter().collect())),
            Err(e) => {
                log.note(format!("probe: inventory → error: {e}"));
                probe_failed("list the store's principals and policies", e)
            }
        }
    }

    /// Fails if the store holds a principal or policy that was not in
    /// `before`: what the provisioner made outlived the claim it was for.
    pub(crate) async fn expect_inventory(
        &self,
        log: &mut Log,
        before: &BTreeSet<Made>,
        when: &str,
    ) -> Step<()> {
        log.checking(format!(
            "{when}, the store holds no principal or policy it did not hold before (each is removed with the claim it was made for)"
        ));
        let Some(now) = self.inventory(log).await? else {
            return Ok(());
        };
        let left: Vec<String> = now.difference(before).map(short).collect();
        let gone: Vec<String> = before.difference(&now).map(short).collect();
        log.note(format!(
            "probe: inventory {when}: appeared {left:?}, disappeared {gone:?}"
        ));
        if !left.is_empty() {
            return fail(format!(
                "{when}, the store still holds what the scenario's provisioner calls made ({}): {}",
                left.len(),
                left.join(", ")
            ));
        }
        if !gone.is_empty() {
            return fail(format!(
                "{when}, {} that existed before the scenario are gone: {}",
                gone.len(),
                gone.join(", ")
            ));
        }
        Ok(())
    }

    /// Fails if the probe reads back that the store does not apply
    /// `config` to `bucket`; notes "not verified" if it cannot tell.
    pub(crate) async fn expect_config(
        &self,
        log: &mut Log,
        bucket: &str,
        config: &std::collections::BTreeMap<String, String>,
    ) -> Step<()> {
        log.checking(format!(
            "after update, the store applies additionalConfig {config:?} to bucket {bucket} (read back)"
        ));
        match self.probe.config_applied(bucket, config).await {
            Ok(Some(true)) => {
                log.note(format!("probe: bucket {bucket} has {config:?} applied"));
                Ok(())
            }
            Ok(Some(false)) => {
                log.note(format!(
                    "probe: bucket {bucket} does not have {config:?} applied"
                ));
                fail(format!(
                    "update returned Ok, but the store does not apply {config:?} to bucket {bucket}: the change never reached it"
                ))
            }
            Ok(None) => {
                log.not_verified(
                    "that an update took effect: the probe cannot read a bucket's config back (StoreProbe::config_applied)",
                );
                Ok(())
            }
            Err(e) => probe_failed(&format!("read bucket {bucket}'s config back"), e),
        }
    }

    /// A refusal that says [`with_nothing_created`](crate::core::provisioner::ProvisionError::with_nothing_created)
    /// makes the library drop its record and run no teardown: the store
    /// must then hold what it held before the call. Noted "not exercised"
    /// when the refusal does not say it.
    pub(crate) async fn expect_nothing_created(
        &self,
        log: &mut Log,
        refusal: &crate::core::provisioner::ProvisionError,
        buckets: &BTreeSet<String>,
        made: Option<&BTreeSet<Made>>,
        what: &str,
    ) -> Step<()> {
        if !refusal.nothing_created() {
            log.not_verified(
                "ProvisionError::with_nothing_created: no refusal said it (then the library keeps its record and runs the teardown)",
            );
            return Ok(());
        }
        let when = format!(
            "after {what} was refused with_nothing_created (the library runs no teardown then)"
        );
        self.expect_buckets(log, buckets, &[], &when).await?;
        if let Some(made) = made {
            self.expect_inventory(log, made, &when).await?;
        }
        Ok(())
    }

    /// The matrix of credentials for `bucket`: all on it, nothing on two
    /// buckets whose names share a prefix and a suffix with it, made as a
    /// stranger would (removed by `undo`): a policy written with a wildcard
    /// reaches them, a correct one does not. Shared credentials reach
    /// every bucket: then only `bucket`.
    pub(crate) async fn own_and_look_alikes(
        &self,
        log: &mut Log,
        undo: &mut super::ctx::Cleanup,
        bucket: &str,
    ) -> Step<Vec<(String, Reach)>> {
        let mut cells = vec![(bucket.to_owned(), Reach::All)];
        if self.settings.shared_credentials {
            log.not_verified("look-alike bucket names (shared credentials reach every bucket)");
            return Ok(cells);
        }
        for name in look_alikes(&format!("kit{}-", self.run), bucket) {
            undo.remove_bucket(&name);
            self.foreign_bucket(log, &name).await?;
            cells.push((name, Reach::Nothing));
        }
        Ok(cells)
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

/// `list, read and write`.
fn shown_ops(ops: &[Op]) -> String {
    let names: Vec<String> = ops.iter().map(Op::to_string).collect();
    match names.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        None => "nothing".to_owned(),
    }
}

/// A listed principal or policy, by kind and name.
fn short(made: &Made) -> String {
    format!("{} {}", made.kind, made.name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_mode_allows_its_row_of_the_matrix() {
        assert!(Op::ALL.iter().all(|op| Reach::All.allows(*op)));
        assert!(Op::ALL.iter().all(|op| !Reach::Nothing.allows(*op)));
        let read_only: Vec<Op> = Op::ALL
            .into_iter()
            .filter(|op| Reach::ReadOnly.allows(*op))
            .collect();
        assert_eq!(read_only, [Op::List, Op::Read]);
    }

    #[test]
    fn look_alikes_share_a_prefix_and_a_suffix_and_keep_the_run_prefix() {
        let [prefix, suffix] = look_alikes("kitabc123-", "kitabc123-sa-2");
        assert_eq!(prefix, "kitabc123-sa-2x");
        assert_eq!(suffix, "kitabc123-zsa-2");
        assert!(suffix.ends_with("sa-2") && suffix.starts_with("kitabc123-"));
    }

    #[test]
    fn ops_are_listed_as_a_sentence() {
        assert_eq!(shown_ops(&[Op::List]), "list");
        assert_eq!(
            shown_ops(&[Op::List, Op::Read, Op::Multipart]),
            "list, read and multipart-upload"
        );
    }
}
