//! `settings.applied` against an in-memory store: a provisioner applying
//! settings as the contract says passes; one whose update forgets what it
//! applied before, or whose re-issue resets the bucket, fails naming it;
//! without cases or a probe that reads settings, it is not exercised.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;

use crate::conformance::{
    Answer, Expect, ExpectedSettings, Kit, Op, Outcome, ProbeError, Report, Scenario,
    SettingsCases, StoreProbe, StoreSettings,
};
use crate::core::provisioner::{
    BucketAccess, BucketRequest, Credentials, ProvisionError, Provisioner, TeardownRequest,
    UpdateRequest,
};

/// Buckets and the settings they hold.
type Store = Arc<Mutex<BTreeMap<String, StoreSettings>>>;

fn locked(store: &Store) -> MutexGuard<'_, BTreeMap<String, StoreSettings>> {
    store.lock().unwrap_or_else(|p| p.into_inner())
}

#[derive(Clone, Copy, PartialEq)]
enum Flaw {
    None,
    /// Update applies the new config as if none had been applied before.
    UpdateForgetsRemovals,
    /// A re-issue configures the bucket without the claim's config: its
    /// lifecycle rules and policy go.
    ReissueResets,
}

/// Keys `versioning`, `rules` (comma-separated IDs), `policy`.
struct Memory {
    store: Store,
    flaw: Flaw,
}

impl Memory {
    /// Applies `config` over what `previous` applied: a key gone from it
    /// removes its setting (versioning never returns to unset).
    fn apply(
        &self,
        bucket: &str,
        config: &BTreeMap<String, String>,
        previous: &BTreeMap<String, String>,
    ) {
        let mut store = locked(&self.store);
        let held = store.entry(bucket.to_owned()).or_default();
        if let Some(v) = config.get("versioning") {
            held.versioning = Some(v.clone());
        }
        match config.get("rules") {
            Some(ids) => held.lifecycle_rules = ids.split(',').map(str::to_owned).collect(),
            None if previous.contains_key("rules") => held.lifecycle_rules.clear(),
            None => {}
        }
        match config.get("policy") {
            Some(p) => held.policy = Some(p.replace("${bucket}", bucket)),
            None if previous.contains_key("policy") => held.policy = None,
            None => {}
        }
    }

    fn access() -> BucketAccess {
        BucketAccess::new("store", 9000, Credentials::new("key", "secret"))
    }
}

#[async_trait]
impl Provisioner for Memory {
    async fn provision(&self, req: &BucketRequest) -> Result<BucketAccess, ProvisionError> {
        if req.reissue {
            if self.flaw == Flaw::ReissueResets {
                self.apply(&req.bucket_name, &BTreeMap::new(), &req.additional_config);
            }
            return Ok(Self::access());
        }
        self.apply(&req.bucket_name, &req.additional_config, &BTreeMap::new());
        Ok(Self::access())
    }
    async fn grant(&self, _: &BucketRequest) -> Result<BucketAccess, ProvisionError> {
        Ok(Self::access())
    }
    async fn delete(&self, req: &TeardownRequest) -> Result<(), ProvisionError> {
        locked(&self.store).remove(&req.bucket_name);
        Ok(())
    }
    async fn revoke(&self, _: &TeardownRequest) -> Result<(), ProvisionError> {
        Ok(())
    }
    async fn update(&self, req: &UpdateRequest) -> Result<(), ProvisionError> {
        let previous = match self.flaw {
            Flaw::UpdateForgetsRemovals => BTreeMap::new(),
            _ => req.previous_config.clone(),
        };
        self.apply(
            &req.bucket.bucket_name,
            &req.bucket.additional_config,
            &previous,
        );
        Ok(())
    }
}

/// The store as its administrator sees it; `reads` false: a probe that
/// cannot read settings (the trait's default).
struct Probe {
    store: Store,
    reads: bool,
}

#[async_trait]
impl StoreProbe for Probe {
    async fn bucket_exists(&self, bucket: &str) -> Result<bool, ProbeError> {
        Ok(locked(&self.store).contains_key(bucket))
    }
    async fn list_buckets(&self) -> Result<BTreeSet<String>, ProbeError> {
        Ok(locked(&self.store).keys().cloned().collect())
    }
    async fn create_foreign_bucket(&self, bucket: &str) -> Result<(), ProbeError> {
        locked(&self.store).insert(bucket.to_owned(), StoreSettings::default());
        Ok(())
    }
    async fn remove_bucket(&self, bucket: &str) -> Result<(), ProbeError> {
        locked(&self.store).remove(bucket);
        Ok(())
    }
    async fn try_access(&self, _: &BucketAccess, _: &str, _: Op) -> Result<Answer, ProbeError> {
        Ok(Answer::Allowed)
    }
    async fn bucket_settings(&self, bucket: &str) -> Result<Option<StoreSettings>, ProbeError> {
        if !self.reads {
            return Ok(None);
        }
        Ok(locked(&self.store).get(bucket).cloned())
    }
}

fn cases() -> SettingsCases {
    let config = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    };
    SettingsCases {
        provision: config(&[
            ("versioning", "Enabled"),
            ("rules", "kit-rule"),
            ("policy", "Deny arn:aws:s3:::${bucket}/keep/*"),
        ]),
        after_provision: ExpectedSettings {
            versioning: Expect::Is("Enabled".into()),
            lifecycle_rules: Expect::Is(BTreeSet::from(["kit-rule".to_owned()])),
            policy: Expect::Is(vec!["${bucket}/keep/".into()]),
            object_lock: Expect::Any,
        },
        update: config(&[("versioning", "Suspended")]),
        after_update: ExpectedSettings {
            versioning: Expect::Is("Suspended".into()),
            lifecycle_rules: Expect::Absent,
            policy: Expect::Absent,
            object_lock: Expect::Any,
        },
    }
}

async fn run(flaw: Flaw, reads: bool, cases: Option<SettingsCases>) -> Report {
    let store = Store::default();
    let probe = Probe {
        store: store.clone(),
        reads,
    };
    let kit = Kit::new(Memory { store, flaw }, probe).only([Scenario::SettingsApplied]);
    match cases {
        Some(cases) => kit.bucket_settings(cases),
        None => kit,
    }
    .run()
    .await
}

fn outcome(report: &Report) -> (Outcome, String) {
    let s = report
        .scenario(Scenario::SettingsApplied)
        .expect("the scenario ran");
    (s.outcome, s.detail.clone())
}

#[tokio::test]
async fn settings_that_follow_the_claim_pass() {
    let report = run(Flaw::None, true, Some(cases())).await;
    assert_eq!(outcome(&report).0, Outcome::Passed, "{report}");
}

#[tokio::test]
async fn an_update_that_forgets_what_it_applied_fails_naming_what_stayed() {
    let report = run(Flaw::UpdateForgetsRemovals, true, Some(cases())).await;
    println!("{report}");
    let (outcome, detail) = outcome(&report);
    assert_eq!(outcome, Outcome::Failed, "{report}");
    assert!(
        detail.starts_with("after update, bucket kit")
            && detail.contains(r#"lifecycle rules: expected none, the store holds {"kit-rule"}"#)
            && detail.contains("bucket policy: expected none"),
        "{report}"
    );
    let shown = report.to_string();
    assert!(
        shown.contains("#bucket-settings-follow-the-claim"),
        "{shown}"
    );
}

#[tokio::test]
async fn a_reissue_that_touches_the_settings_fails() {
    let report = run(Flaw::ReissueResets, true, Some(cases())).await;
    let (outcome, detail) = outcome(&report);
    assert_eq!(outcome, Outcome::Failed, "{report}");
    assert!(
        detail.starts_with("after a re-issue of credentials, bucket kit"),
        "{report}"
    );
}

#[tokio::test]
async fn without_cases_or_a_probe_that_reads_settings_it_is_not_exercised_and_says_why() {
    let report = run(Flaw::None, true, None).await;
    assert_eq!(outcome(&report).0, Outcome::NotApplicable, "{report}");
    assert!(
        report.not_exercised[0]
            .what
            .starts_with("settings.applied: no bucket settings cases: give Kit::bucket_settings"),
        "{report}"
    );
    let report = run(Flaw::None, false, Some(cases())).await;
    assert_eq!(outcome(&report).0, Outcome::NotApplicable, "{report}");
    assert!(
        report.to_string().contains(
            "settings.applied: the probe cannot read a bucket's settings back (StoreProbe::bucket_settings)"
        ),
        "{report}"
    );
}
