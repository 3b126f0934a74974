//! What every scenario shares: the provisioner, the probe, the settings,
//! unique claims and bucket names for this run, the log of what happened,
//! and the cleanup that runs whatever the outcome.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use rand::Rng;

use super::{SettingsCases, StoreProbe};
use crate::core::provisioner::{
    BucketAccess, BucketRequest, ClaimIdentity, Provisioner, TeardownRequest,
};
use crate::obc::api::{BROWNFIELD_BUCKET_PARAMETER, ReclaimPolicy};

/// Why a scenario stopped before its end.
#[derive(Clone, Debug)]
pub(crate) enum Stop {
    /// The provisioner broke the rule (or a probe failed): what happened.
    Fail(String),
    /// The scenario does not apply: why.
    NotApplicable(String),
}

/// A scenario's result: `Ok` carries a summary of what passed.
pub(crate) type Step<T> = Result<T, Stop>;

/// A failure saying `message`.
pub(crate) fn fail<T>(message: impl Into<String>) -> Step<T> {
    Err(Stop::Fail(message.into()))
}

/// What happened in a scenario, line by line (a line repeated right
/// after itself is kept once, with a count), and the check being made.
#[derive(Debug, Default)]
pub(crate) struct Log {
    pub(crate) lines: Vec<(String, usize)>,
    /// The check under way: a failure is reported against it.
    pub(crate) check: Option<String>,
    /// What the scenario could not verify, and why.
    pub(crate) unverified: Vec<String>,
}

impl Log {
    pub(crate) fn note(&mut self, line: impl Into<String>) {
        let line = line.into();
        match self.lines.last_mut() {
            Some((last, n)) if *last == line => *n += 1,
            _ => self.lines.push((line, 1)),
        }
    }

    /// Notes that `what` was not verified (the reason included).
    pub(crate) fn not_verified(&mut self, what: impl Into<String>) {
        let what = what.into();
        if !self.unverified.contains(&what) {
            self.unverified.push(what);
        }
    }

    /// From now on, a failure is a failure of `check`.
    pub(crate) fn checking(&mut self, check: impl Into<String>) {
        self.check = Some(check.into());
    }

    /// Appends `other`'s lines (its check, if it made one, becomes ours).
    pub(crate) fn append(&mut self, other: Log) {
        for (line, n) in other.lines {
            for _ in 0..n {
                self.note(line.clone());
            }
        }
        if other.check.is_some() {
            self.check = other.check;
        }
        for what in other.unverified {
            self.not_verified(what);
        }
    }

    /// The lines as shown: a repeated one once, with its count.
    pub(crate) fn shown(&self) -> Vec<String> {
        self.lines
            .iter()
            .map(|(line, n)| match n {
                1 => line.clone(),
                n => format!("{line} (×{n})"),
            })
            .collect()
    }
}

/// The kit's settings (see [`Kit`](super::Kit)'s builder methods).
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    pub(crate) storage_class: String,
    pub(crate) parameters: BTreeMap<String, String>,
    pub(crate) read_only: Option<BTreeMap<String, String>>,
    pub(crate) update: Option<BTreeMap<String, String>>,
    pub(crate) bucket_settings: Option<SettingsCases>,
    pub(crate) shared_credentials: bool,
    pub(crate) call_timeout: Duration,
    pub(crate) attempts: u32,
    pub(crate) settle: Duration,
    pub(crate) revocation_grace: Duration,
    pub(crate) max_abandon_points: usize,
}

/// One run of the kit.
pub(crate) struct Ctx {
    pub(crate) provisioner: Arc<dyn Provisioner>,
    pub(crate) probe: Arc<dyn StoreProbe>,
    pub(crate) settings: Settings,
    /// Six lowercase letters and digits, in every name of the run.
    pub(crate) run: String,
    next: AtomicUsize,
}

/// A claim of the run, and the bucket it asks for.
#[derive(Clone, Debug)]
pub(crate) struct Claim {
    pub(crate) identity: ClaimIdentity,
    pub(crate) bucket: String,
}

impl Ctx {
    pub(crate) fn new(
        provisioner: Arc<dyn Provisioner>,
        probe: Arc<dyn StoreProbe>,
        settings: Settings,
    ) -> Self {
        let run: String = rand::rng()
            .sample_iter(rand::distr::Alphanumeric)
            .take(6)
            .map(|c| char::from(c).to_ascii_lowercase())
            .collect();
        Self {
            provisioner,
            probe,
            settings,
            run,
            next: AtomicUsize::new(1),
        }
    }

    /// A bucket name of this run, never used before: `kit<run>-<tag>-<n>`.
    pub(crate) fn bucket_name(&self, tag: &str) -> String {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        format!("kit{}-{tag}-{n}", self.run)
    }

    /// A new claim (namespace `kit-<run>`, a fresh UID) asking for a new
    /// bucket.
    pub(crate) fn claim(&self, tag: &str) -> Claim {
        let bucket = self.bucket_name(tag);
        self.claim_for(tag, &bucket)
    }

    /// A new claim asking for `bucket`.
    pub(crate) fn claim_for(&self, tag: &str, bucket: &str) -> Claim {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let identity = ClaimIdentity::new(format!("kit-{}", self.run), format!("{tag}-{n}"), uid());
        Claim {
            identity,
            bucket: bucket.to_owned(),
        }
    }

    /// The greenfield request of `claim`.
    pub(crate) fn request(&self, claim: &Claim, policy: ReclaimPolicy) -> BucketRequest {
        BucketRequest::new(
            claim.identity.clone(),
            &claim.bucket,
            &self.settings.storage_class,
        )
        .with_parameters(self.settings.parameters.clone())
        .with_reclaim_policy(policy)
    }

    /// The brownfield parameters: the class's, naming `claim`'s bucket.
    fn brownfield_parameters(&self, claim: &Claim) -> BTreeMap<String, String> {
        let mut parameters = self.settings.parameters.clone();
        parameters.insert(BROWNFIELD_BUCKET_PARAMETER.to_owned(), claim.bucket.clone());
        parameters
    }

    /// The brownfield request of `claim` (a class naming its bucket).
    pub(crate) fn grant_request(&self, claim: &Claim) -> BucketRequest {
        self.request(claim, ReclaimPolicy::Retain)
            .with_parameters(self.brownfield_parameters(claim))
    }

    /// The teardown of `claim`: `provisioned` as the library's record
    /// says, with the state of `access` if the claim got one.
    pub(crate) fn teardown(
        &self,
        claim: &Claim,
        access: Option<&BucketAccess>,
        policy: ReclaimPolicy,
        provisioned: bool,
    ) -> TeardownRequest {
        let mut req = TeardownRequest::new(
            claim.identity.clone(),
            &claim.bucket,
            &self.settings.storage_class,
        )
        .with_parameters(self.settings.parameters.clone());
        req.reclaim_policy = policy;
        if let Some(access) = access {
            req.additional_state = access.additional_state.clone();
        }
        let ob =
            crate::core::names::object_bucket_name(&claim.identity.namespace, &claim.identity.name);
        if provisioned {
            req = req.provisioned_as(ob);
        } else {
            req.object_bucket_name = Some(ob);
        }
        req
    }

    /// The brownfield teardown of `claim`.
    pub(crate) fn grant_teardown(
        &self,
        claim: &Claim,
        access: Option<&BucketAccess>,
    ) -> TeardownRequest {
        self.teardown(claim, access, ReclaimPolicy::Retain, true)
            .with_parameters(self.brownfield_parameters(claim))
    }
}

/// A random UID in the form Kubernetes gives them.
fn uid() -> String {
    crate::core::ids::Uid::Uuid(rand::rng().random()).to_string()
}

/// What a scenario leaves to undo, whatever its outcome.
#[derive(Default)]
pub(crate) struct Cleanup(Vec<Undo>);

enum Undo {
    Delete(TeardownRequest),
    Revoke(TeardownRequest),
    RemoveBucket(String),
}

impl Cleanup {
    /// `delete` for the claim (a greenfield claim under Delete).
    pub(crate) fn delete(&mut self, req: TeardownRequest) {
        self.0.push(Undo::Delete(req));
    }

    /// `revoke` for the claim (access to a bucket that is not its own).
    pub(crate) fn revoke(&mut self, req: TeardownRequest) {
        self.0.push(Undo::Revoke(req));
    }

    /// Removes the bucket through the probe (a foreign bucket, a retained one).
    pub(crate) fn remove_bucket(&mut self, bucket: &str) {
        self.0.push(Undo::RemoveBucket(bucket.to_owned()));
    }

    /// Keeps `access`'s state for the claim's teardown (what the
    /// ObjectBucket would record).
    pub(crate) fn record(&mut self, uid: &str, access: &BucketAccess) {
        for undo in &mut self.0 {
            if let Undo::Delete(req) | Undo::Revoke(req) = undo
                && req.claim.uid == uid
            {
                req.additional_state = access.additional_state.clone();
            }
        }
    }

    /// Undoes everything, last first; failures are noted, not fatal.
    pub(crate) async fn run(self, ctx: &Ctx, log: &mut Log) {
        for undo in self.0.into_iter().rev() {
            let (what, result) = match &undo {
                Undo::Delete(req) => (
                    format!("delete {}", req.bucket_name),
                    ctx.provisioner.delete(req).await.map_err(|e| e.to_string()),
                ),
                Undo::Revoke(req) => (
                    format!("revoke for {}", req.claim),
                    ctx.provisioner.revoke(req).await.map_err(|e| e.to_string()),
                ),
                Undo::RemoveBucket(bucket) => (
                    format!("remove bucket {bucket} through the probe"),
                    ctx.probe
                        .remove_bucket(bucket)
                        .await
                        .map_err(|e| e.to_string()),
                ),
            };
            if let Err(e) = result {
                log.note(format!("cleanup: {what} failed: {e}"));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_repeated_right_after_itself_is_shown_once_with_its_count() {
        let mut log = Log::default();
        for line in [
            "a",
            "probe: denied",
            "probe: denied",
            "probe: denied",
            "b",
            "a",
        ] {
            log.note(line);
        }
        assert_eq!(log.shown(), ["a", "probe: denied (×3)", "b", "a"]);
        let mut outer = Log::default();
        outer.note("a");
        log.checking("the check");
        outer.append(log);
        assert_eq!(outer.shown()[0], "a (×2)");
        assert_eq!(outer.check.as_deref(), Some("the check"));
    }
}
