//! [`Kit`]: the settings of a run, and the run.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::ctx::{Cleanup, Ctx, Log, Settings, Stop};
use super::report::{Outcome, Report, ScenarioReport};
use super::{Scenario, SettingsCases, StoreProbe, scenarios};
use crate::controller::DEFAULT_PROVISIONER_TIMEOUT;
use crate::core::provisioner::Provisioner;

/// The conformance kit: runs the contract's scenarios against a
/// provisioner and the store it serves. See the [module docs](super).
#[must_use = "a kit does nothing until `run` is awaited"]
pub struct Kit {
    provisioner: Arc<dyn Provisioner>,
    probe: Arc<dyn StoreProbe>,
    settings: Settings,
    only: Option<BTreeSet<Scenario>>,
}

impl Kit {
    /// A kit for `provisioner`, checking the store through `probe`, with a
    /// StorageClass `conformance` without parameters (see
    /// [`parameters`](Self::parameters)).
    pub fn new(provisioner: impl Provisioner, probe: impl StoreProbe) -> Self {
        Self {
            provisioner: Arc::new(provisioner),
            probe: Arc::new(probe),
            settings: Settings {
                storage_class: "conformance".to_owned(),
                parameters: BTreeMap::new(),
                read_only: None,
                update: None,
                bucket_settings: None,
                shared_credentials: false,
                call_timeout: DEFAULT_PROVISIONER_TIMEOUT,
                attempts: 5,
                settle: Duration::from_millis(20),
                revocation_grace: Duration::from_secs(10),
                max_abandon_points: 200,
            },
            only: None,
        }
    }

    /// The StorageClass name in every request.
    pub fn storage_class(mut self, name: impl Into<String>) -> Self {
        self.settings.storage_class = name.into();
        self
    }

    /// The StorageClass parameters in every request (brownfield requests
    /// add `bucketName`).
    pub fn parameters(mut self, parameters: BTreeMap<String, String>) -> Self {
        self.settings.parameters = parameters;
        self
    }

    /// Adds a StorageClass parameter.
    pub fn parameter(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.settings.parameters.insert(key.into(), value.into());
        self
    }

    /// The claim's `additionalConfig` asking for read-only credentials:
    /// `scope.read-only` checks that they cannot write. Without it, that
    /// scenario does not apply.
    pub fn read_only_config(mut self, config: BTreeMap<String, String>) -> Self {
        self.settings.read_only = Some(config);
        self
    }

    /// A claim's `additionalConfig`, after bind, that the provisioner's
    /// `update` applies (from an empty one): `update.repeat` applies it
    /// twice. Without it, that scenario does not apply.
    pub fn update_config(mut self, config: BTreeMap<String, String>) -> Self {
        self.settings.update = Some(config);
        self
    }

    /// The bucket settings your provisioner serves through
    /// `additionalConfig`, and what the store holds with them:
    /// `settings.applied` provisions a claim with
    /// [`provision`](SettingsCases::provision), reads the bucket's settings
    /// back ([`StoreProbe::bucket_settings`]) after it, its retry and a
    /// re-issue of credentials, then after an update to
    /// [`update`](SettingsCases::update) and its repeat. Without it (or
    /// with a probe that cannot read settings), that scenario is not
    /// exercised. A class that allows `additionalConfig` keys by name
    /// must allow these ([`parameters`](Self::parameters)).
    ///
    /// ```no_run
    /// use std::collections::BTreeMap;
    /// use lib_provisioner::conformance::{Expect, ExpectedSettings, Kit, SettingsCases};
    /// # fn demo(kit: Kit) -> Kit {
    /// let config = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
    ///     pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    /// };
    /// let policy = r#"{"Statement":[{"Effect":"Deny","Principal":"*","Action":"s3:DeleteObject","Resource":"arn:aws:s3:::${bucket}/keep/*"}]}"#;
    /// kit.bucket_settings(SettingsCases {
    ///     provision: config(&[("versioning", "Enabled"), ("bucketPolicy", policy)]),
    ///     after_provision: ExpectedSettings {
    ///         versioning: Expect::Is("Enabled".into()),
    ///         policy: Expect::Is(vec!["${bucket}/keep/".into()]),
    ///         ..Default::default()
    ///     },
    ///     // The policy's key removed: the update removes the policy.
    ///     update: config(&[("versioning", "Suspended")]),
    ///     after_update: ExpectedSettings {
    ///         versioning: Expect::Is("Suspended".into()),
    ///         policy: Expect::Absent,
    ///         ..Default::default()
    ///     },
    /// })
    /// # }
    /// ```
    pub fn bucket_settings(mut self, cases: SettingsCases) -> Self {
        self.settings.bucket_settings = Some(cases);
        self
    }

    /// Declares that every claim gets the same credentials (a store
    /// without a user API): the `scope.*` scenarios do not apply, and
    /// teardown is not expected to revoke them. The report says so.
    pub fn shared_credentials(mut self) -> Self {
        self.settings.shared_credentials = true;
        self
    }

    /// Runs only these scenarios.
    pub fn only(mut self, scenarios: impl IntoIterator<Item = Scenario>) -> Self {
        self.only = Some(scenarios.into_iter().collect());
        self
    }

    /// How long one call may take before it is dropped and retried, as
    /// the library's `provisioner_timeout` (default
    /// [`DEFAULT_PROVISIONER_TIMEOUT`]).
    pub fn call_timeout(mut self, timeout: Duration) -> Self {
        self.settings.call_timeout = timeout;
        self
    }

    /// How long revoked credentials may keep working (a store's credential
    /// cache); default 10 s.
    pub fn revocation_grace(mut self, grace: Duration) -> Self {
        self.settings.revocation_grace = grace;
        self
    }

    /// At most this many drop points per `*.abandoned` scenario (default
    /// 200), spread evenly over a call's waits when it has more.
    pub fn max_abandon_points(mut self, points: usize) -> Self {
        self.settings.max_abandon_points = points.max(2);
        self
    }

    /// Runs the scenarios one after the other, each on claims and buckets
    /// of its own, and cleans up after each.
    pub async fn run(self) -> Report {
        let started = Instant::now();
        let ctx = Ctx::new(self.provisioner, self.probe, self.settings);
        let mut scenarios = Vec::new();
        for scenario in Scenario::ALL {
            if self
                .only
                .as_ref()
                .is_some_and(|only| !only.contains(&scenario))
            {
                continue;
            }
            let report = one(&ctx, scenario).await;
            tracing::info!(scenario = scenario.name(), outcome = ?report.outcome, "{}", report.detail);
            scenarios.push(report);
        }
        Report::new(
            ctx.run.clone(),
            ctx.probe.name(),
            scenarios,
            started.elapsed(),
        )
    }
}

/// Runs `scenario`, cleans up, and checks that the store holds what it
/// held before: the same buckets, and (if the probe can list them) the same
/// principals and policies.
async fn one(ctx: &Ctx, scenario: Scenario) -> ScenarioReport {
    let started = Instant::now();
    let mut log = Log::default();
    let before = ctx.buckets(&mut log).await;
    let made_before = ctx.inventory(&mut log).await;
    let mut undo = Cleanup::default();
    let result = match (&before, &made_before) {
        (Ok(_), Ok(_)) => scenarios::run(ctx, scenario, &mut undo, &mut log).await,
        (Err(stop), _) | (_, Err(stop)) => Err(stop.clone()),
    };
    let failed_check = log.check.clone();
    undo.run(ctx, &mut log).await;
    let mut leftovers = match &before {
        Ok(before) => leftovers(ctx, before, &mut log).await,
        Err(_) => None,
    };
    let mut unverified = Vec::new();
    if let (None, Ok(Some(made))) = (&leftovers, &made_before) {
        let when = "after the scenario's teardown";
        if let Err(Stop::Fail(why) | Stop::NotApplicable(why)) =
            ctx.expect_inventory(&mut log, made, when).await
        {
            leftovers = Some(why);
        }
    } else if let Ok(None) = &made_before {
        unverified.push(
            "principals and policies left behind: the probe cannot list them (StoreProbe::inventory)"
                .to_owned(),
        );
    }
    let (outcome, detail, check) = match (result, leftovers) {
        (Err(Stop::Fail(why)), _) => (Outcome::Failed, why, failed_check),
        (_, Some(why)) => (Outcome::Failed, why, log.check.clone()),
        (Err(Stop::NotApplicable(why)), None) => (Outcome::NotApplicable, why, None),
        (Ok(summary), None) => (Outcome::Passed, summary, None),
    };
    unverified.extend(log.unverified.iter().cloned());
    let mut report = ScenarioReport::new(scenario, outcome, detail, log.shown(), started.elapsed());
    report.check = check;
    report.probe = ctx.probe.name();
    report.not_verified = unverified;
    report
}

/// What the scenario changed on the store after its cleanup: buckets that
/// appeared (removed if they carry the run's prefix, so the next scenario
/// starts clean) or disappeared.
async fn leftovers(ctx: &Ctx, before: &BTreeSet<String>, log: &mut Log) -> Option<String> {
    log.checking(
        "after the scenario's teardown, the store holds exactly the buckets it held before",
    );
    let after = match ctx.buckets(log).await {
        Ok(after) => after,
        Err(Stop::Fail(why) | Stop::NotApplicable(why)) => return Some(why),
    };
    let appeared: Vec<&String> = after.difference(before).collect();
    let gone: Vec<&String> = before.difference(&after).collect();
    if appeared.is_empty() && gone.is_empty() {
        return None;
    }
    let prefix = format!("kit{}-", ctx.run);
    for bucket in appeared.iter().filter(|b| b.starts_with(&prefix)) {
        if let Err(e) = ctx.probe.remove_bucket(bucket).await {
            log.note(format!(
                "cleanup: remove bucket {bucket} through the probe failed: {e}"
            ));
        }
    }
    log.note(format!(
        "probe: after the scenario's teardown, buckets appeared {appeared:?}, disappeared {gone:?}"
    ));
    Some(if gone.is_empty() {
        format!("the scenario's teardown left bucket(s) {appeared:?} behind, which no claim holds")
    } else {
        format!(
            "bucket(s) {gone:?} that existed before the scenario are gone: the provisioner removed what was not its claims'"
        )
    })
}
