//! The conformance kit (`lib_provisioner::conformance`) against the sample
//! provisioner on both stores of the test environment: s3s-fs (shared-admin
//! credentials, ownership by marker object) and RustFS (a user per claim,
//! ownership by bucket tag). The sample must pass; a wrapper breaking each
//! rule of the contract (`broken.rs`) must fail the kit, on the scenario
//! and with the message that names what it broke. A missing store fails
//! the test.
//!
//! `cargo test -p obc-tests --test e2e -- conformance:: --nocapture --test-threads=1`
//! prints each report and how long it took (`KIT_JSON=1`: the s3s-fs
//! report as JSON too).

#![allow(clippy::unwrap_used)] // tests may unwrap; the library may not

mod broken;
mod probe;

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::Result;
use lib_provisioner::Credentials;
use lib_provisioner::conformance::{
    Expect, ExpectedSettings, Kit, Outcome, Report, Scenario, SettingsCases,
};
use obc_tests::rustfs::RustFs;
use obc_tests::setup::{create_admin_secret, install_deploy};
use obc_tests::testenv::{self, TestEnv};
use sample_provisioner::S3Provisioner;

use broken::{Broken, Flaw, read_only};
use lib_provisioner::conformance::S3Probe;

const SYSTEM_NAMESPACE: &str = "obc-system";
const ADMIN_SECRET: &str = "kit-store-admin";

/// The sample on one store, and what the kit needs to run it.
struct Target {
    _env: TestEnv,
    _rustfs: Option<RustFs>,
    sample: Arc<S3Provisioner>,
    probe: S3Probe,
    parameters: BTreeMap<String, String>,
    root: Credentials,
    endpoint: String,
    per_claim: bool,
}

impl Target {
    async fn s3s_fs() -> Result<Self> {
        let env = TestEnv::start().await?;
        let (key, secret) = env.s3_root_credentials();
        let endpoint = env.s3_endpoint();
        Self::on(env, None, endpoint, key, secret, false).await
    }

    async fn rustfs() -> Result<Self> {
        let env = TestEnv::start().await?;
        let store = RustFs::start(env.dir()).await?;
        let (key, secret) = store.root_credentials();
        let endpoint = store.endpoint();
        Self::on(env, Some(store), endpoint, key, secret, true).await
    }

    async fn on(
        env: TestEnv,
        rustfs: Option<RustFs>,
        endpoint: String,
        key: String,
        secret: String,
        per_claim: bool,
    ) -> Result<Self> {
        install_deploy(&env).await?;
        let admin = env.admin_client();
        create_admin_secret(&admin, SYSTEM_NAMESPACE, ADMIN_SECRET, &key, &secret).await?;
        let sample = Arc::new(S3Provisioner::new(admin));
        // s3s-fs has neither a user API nor bucket tags; RustFS serves
        // bucket settings, which a class must allow by name.
        let store_modes: &[(&str, &str)] = if per_claim {
            &[("allowedConfig", ALLOWED_CONFIG)]
        } else {
            &[("credentialsMode", "shared-admin"), ("ownership", "marker")]
        };
        let parameters: BTreeMap<String, String> = [
            ("endpoint", endpoint.as_str()),
            ("adminSecretName", ADMIN_SECRET),
            ("adminSecretNamespace", SYSTEM_NAMESPACE),
        ]
        .iter()
        .chain(store_modes)
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
        let root = Credentials::new(key, secret);
        let probe = probe::s3_probe(&endpoint, &root, sample.state_bucket(), per_claim);
        Ok(Self {
            _env: env,
            _rustfs: rustfs,
            per_claim,
            sample,
            probe,
            parameters,
            root,
            endpoint,
        })
    }

    /// The kit for `provisioner` on this store, set up as the sample's
    /// class and store need.
    fn kit(&self, provisioner: impl lib_provisioner::Provisioner) -> Kit {
        let kit = Kit::new(provisioner, self.probe.clone())
            .storage_class("kit")
            .parameters(self.parameters.clone())
            .read_only_config(read_only());
        // s3s-fs implements none of the S3 settings calls: the sample
        // refuses settings there, so the kit gets no settings cases and
        // reports `settings.applied` not exercised.
        if self.per_claim {
            kit.update_config(BTreeMap::from([("maxSize".to_owned(), "64Mi".to_owned())]))
                .bucket_settings(settings_cases())
        } else {
            kit.shared_credentials()
        }
    }

    fn broken(&self, flaw: Flaw) -> Broken {
        Broken::new(
            self.sample.clone(),
            flaw,
            self.root.clone(),
            &self.endpoint,
            self.per_claim,
        )
    }
}

/// The `additionalConfig` keys the RustFS class allows: the kit's
/// read-only, update and settings cases.
const ALLOWED_CONFIG: &str = "maxSize,accessMode,versioning,bucketLifecycle,bucketPolicy";

/// The sample's bucket settings on, then changed and removed by an update:
/// versioning Enabled then Suspended (it never returns to unset), one
/// lifecycle rule then none, a tenant's Deny statement then no policy.
fn settings_cases() -> SettingsCases {
    const LIFECYCLE: &str = r#"{"Rules":[{"ID":"kit-rule","Status":"Enabled","Filter":{"Prefix":"kit/"},"Expiration":{"Days":30}}]}"#;
    const POLICY: &str = r#"{"Statement":[{"Sid":"kit","Effect":"Deny","Principal":"*","Action":"s3:DeleteObject","Resource":"arn:aws:s3:::${bucket}/keep/*"}]}"#;
    let config = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    };
    SettingsCases {
        provision: config(&[
            ("versioning", "Enabled"),
            ("bucketLifecycle", LIFECYCLE),
            ("bucketPolicy", POLICY),
        ]),
        after_provision: ExpectedSettings {
            versioning: Expect::Is("Enabled".to_owned()),
            lifecycle_rules: Expect::Is(["kit-rule".to_owned()].into()),
            // The store's own rendering of the statement: its resource
            // names this bucket, and it denies.
            policy: Expect::Is(vec!["${bucket}/keep/".to_owned(), "Deny".to_owned()]),
            object_lock: Expect::Absent,
        },
        update: config(&[("versioning", "Suspended")]),
        after_update: ExpectedSettings {
            versioning: Expect::Is("Suspended".to_owned()),
            lifecycle_rules: Expect::Absent,
            policy: Expect::Absent,
            object_lock: Expect::Absent,
        },
    }
}

fn timed(store: &str, report: &Report) {
    println!("{report}");
    println!("kit on {store}: {:.1} s", report.elapsed_ms as f64 / 1000.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sample_on_s3s_fs_meets_the_contract() -> Result<()> {
    testenv::init_tracing();
    let target = Target::s3s_fs().await?;
    let report = target.kit(target.sample.clone()).run().await;
    timed("s3s-fs", &report);
    if std::env::var_os("KIT_JSON").is_some() {
        println!("{:#}", report.to_json());
    }
    assert!(report.passed(), "{report}");
    // Shared credentials: what cannot hold is said, not passed.
    for s in [
        Scenario::ScopeOtherClaimsBucket,
        Scenario::ScopeReadOnly,
        Scenario::RotateRepeat,
        Scenario::SettingsApplied,
    ] {
        assert_eq!(
            report.scenario(s).unwrap().outcome,
            Outcome::NotApplicable,
            "{s}"
        );
    }
    // The store serves no bucket settings, so the kit got no cases: the
    // report says so rather than failing the sample for the store.
    assert!(
        report
            .to_string()
            .contains("settings.applied: no bucket settings cases"),
        "{report}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sample_on_rustfs_meets_the_contract() -> Result<()> {
    testenv::init_tracing();
    let target = Target::rustfs().await?;
    let report = target.kit(target.sample.clone()).run().await;
    timed("RustFS", &report);
    assert!(report.passed(), "{report}");
    let all_apply = report
        .scenarios
        .iter()
        .all(|s| s.outcome == Outcome::Passed);
    assert!(
        all_apply,
        "every scenario applies to per-claim credentials:\n{report}"
    );
    // Read back from the store, not taken on the sample's word.
    let settings = report.scenario(Scenario::SettingsApplied).unwrap();
    assert!(
        settings
            .not_verified
            .iter()
            .all(|n| !n.contains("bucket setting")),
        "{report}"
    );
    Ok(())
}

/// GitHub's anchor of a heading: lowercase, punctuation dropped, spaces
/// to hyphens.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The report's links land on a section of the guide that states the rule.
#[test]
fn every_rule_links_to_its_section_of_the_guide() {
    let guide = obc_tests::setup::repo_file("docs/provisioner-guide.md").unwrap();
    let anchors: Vec<String> = guide
        .lines()
        .filter_map(|l| l.strip_prefix('#'))
        .map(|l| anchor(l.trim_start_matches('#')))
        .collect();
    for scenario in Scenario::ALL {
        let rule = scenario.rule();
        assert!(
            anchors.contains(&rule.anchor().to_owned()),
            "no section #{} in the guide",
            rule.anchor()
        );
        assert!(
            guide.contains(&format!("`{}`", scenario.name())),
            "the guide does not list {scenario}"
        );
    }
}

/// Runs the kit's `scenario` on `flaw` and expects it to fail, saying
/// `says`; returns the report.
async fn must_fail(target: &Target, flaw: Flaw, scenario: Scenario, says: &str) -> Report {
    // A few drop points find a flaw of a dropped call: keeps the test short.
    let report = target
        .kit(target.broken(flaw))
        .max_abandon_points(4)
        .only([scenario])
        .run()
        .await;
    println!("{flaw:?}:\n{report}");
    let result = report.scenario(scenario).unwrap();
    assert_eq!(
        result.outcome,
        Outcome::Failed,
        "{flaw:?} passed {scenario}:\n{report}"
    );
    assert!(
        result.detail.contains(says),
        "{flaw:?} on {scenario}: {:?} lacks {says:?}",
        result.detail
    );
    assert_eq!(result.rule, scenario.rule());
    assert!(
        result.check.is_some(),
        "{flaw:?} on {scenario}: no failing check named"
    );
    report
}

/// Runs the kit's `scenarios` on `variant`, a correct provisioner, and
/// expects them to pass.
async fn must_pass(target: &Target, variant: Flaw, scenarios: &[Scenario]) {
    let report = target
        .kit(target.broken(variant))
        .only(scenarios.iter().copied())
        .run()
        .await;
    println!("{variant:?}:\n{report}");
    assert!(report.passed(), "{variant:?}:\n{report}");
    for s in scenarios {
        assert_eq!(
            report.scenario(*s).unwrap().outcome,
            Outcome::Passed,
            "{variant:?} on {s}:\n{report}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_broken_rule_fails_the_kit_on_s3s_fs() -> Result<()> {
    testenv::init_tracing();
    let t = Target::s3s_fs().await?;
    must_fail(
        &t,
        Flaw::FailsWhenItExists,
        Scenario::ProvisionRepeat,
        "already exists",
    )
    .await;
    must_fail(
        &t,
        Flaw::SecondBucketOnRetry,
        Scenario::ProvisionRepeat,
        "that no claim asked for",
    )
    .await;
    must_fail(
        &t,
        Flaw::ForgetsWhenDropped,
        Scenario::ProvisionAbandoned,
        "was not recorded as this claim's",
    )
    .await;
    // Only a real cancellation finds it: repeated whole, it passes.
    let whole = t
        .kit(t.broken(Flaw::ForgetsWhenDropped))
        .only([Scenario::ProvisionRepeat])
        .run()
        .await;
    assert!(whole.passed(), "{whole}");
    must_fail(
        &t,
        Flaw::FailsWhenGone,
        Scenario::DeleteNeverProvisioned,
        "NoSuchBucket",
    )
    .await;
    must_fail(
        &t,
        Flaw::FailsWhenGone,
        Scenario::DeleteRepeat,
        "delete again",
    )
    .await;
    must_fail(
        &t,
        Flaw::FailsWhenGone,
        Scenario::RevokeNeverGranted,
        "NoSuchUser",
    )
    .await;
    must_fail(
        &t,
        Flaw::TakesOverExisting,
        Scenario::OwnershipOtherClaimsBucket,
        "to claim A's bucket",
    )
    .await;
    must_fail(
        &t,
        Flaw::TakesOverExisting,
        Scenario::OwnershipForeignBucket,
        "did not make",
    )
    .await;
    must_fail(
        &t,
        Flaw::KeepsBucketOnDelete,
        Scenario::TeardownDelete,
        "still exists",
    )
    .await;
    must_fail(
        &t,
        Flaw::NeverReachesStore,
        Scenario::TeardownDelete,
        "still exists",
    )
    .await;
    // With a probe answering from the provisioner's own records, the same
    // provisioner passes: the kit's verdicts are only as good as its eyes.
    let never = t.broken(Flaw::NeverReachesStore);
    let records = broken::RecordsProbe {
        records: never.records(),
        foreign: Default::default(),
    };
    let blind = Kit::new(never, records)
        .parameters(t.parameters.clone())
        .only([Scenario::TeardownDelete])
        .run()
        .await;
    println!("NeverReachesStore, RecordsProbe:\n{blind}");
    assert!(blind.passed(), "{blind}");
    assert!(blind.to_string().contains("probe: RecordsProbe"), "{blind}");
    // s3s-fs deletes a bucket with its objects: nothing is left to catch.
    must_fail(
        &t,
        Flaw::ReissueCreates,
        Scenario::ProvisionReissue,
        "still exists: a re-issue never creates",
    )
    .await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_broken_credentials_rule_fails_the_kit_on_rustfs() -> Result<()> {
    testenv::init_tracing();
    let t = Target::rustfs().await?;
    must_fail(
        &t,
        Flaw::HandsOutRootKey,
        Scenario::ScopeOtherClaimsBucket,
        "which they must not reach",
    )
    .await;
    must_fail(
        &t,
        Flaw::IgnoresReadOnly,
        Scenario::ScopeReadOnly,
        "can write",
    )
    .await;
    must_fail(
        &t,
        Flaw::KeepsKeysOnRevoke,
        Scenario::TeardownRetain,
        "after they were revoked",
    )
    .await;
    must_fail(
        &t,
        Flaw::ForgetsWhenDropped,
        Scenario::ProvisionAbandoned,
        "was not recorded as this claim's",
    )
    .await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn realistic_flaws_fail_the_kit_on_rustfs_with_its_own_eyes() -> Result<()> {
    testenv::init_tracing();
    let t = Target::rustfs().await?;
    must_pass(
        &t,
        Flaw::RevokePreviousKeyOnly,
        &[Scenario::RotateRepeat, Scenario::RotateAbandoned],
    )
    .await;
    must_fail(
        &t,
        Flaw::NeverReachesStore,
        Scenario::TeardownRetain,
        "after they were revoked",
    )
    .await;
    must_fail(
        &t,
        Flaw::MintsKeyOnRepeat,
        Scenario::ProvisionRepeat,
        "the store still holds what the scenario's provisioner calls made (2): principal obcm",
    )
    .await;
    must_fail(
        &t,
        Flaw::LeavesKeyWhenDropped,
        Scenario::ProvisionAbandoned,
        "principal obcs",
    )
    .await;
    must_fail(
        &t,
        Flaw::RevokeRemovesListOnly,
        Scenario::TeardownRetain,
        "can still read bucket",
    )
    .await;
    must_fail(
        &t,
        Flaw::PolicyWildcard,
        Scenario::ScopeOtherClaimsBucket,
        "x, which they must not reach",
    )
    .await;
    must_fail(
        &t,
        Flaw::UpdateDoesNothing,
        Scenario::UpdateRepeat,
        "the store does not apply",
    )
    .await;
    must_fail(
        &t,
        Flaw::UpdateForgetsRemovals,
        Scenario::SettingsApplied,
        "lifecycle rules: expected none, the store holds {\"kit-rule\"}",
    )
    .await;
    must_fail(
        &t,
        Flaw::GrantRevokesOthers,
        Scenario::GrantSharedBucket,
        "claim A's credentials, after claim B's grant,",
    )
    .await;
    must_fail(
        &t,
        Flaw::ReadOnlyDeletes,
        Scenario::ScopeReadOnly,
        "can delete bucket",
    )
    .await;
    must_fail(
        &t,
        Flaw::DeleteLeavesData,
        Scenario::TeardownDeleteWithData,
        "returned Ok, so the bucket and its data must be gone",
    )
    .await;
    Ok(())
}
