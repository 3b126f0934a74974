use super::*;

fn set(ids: &[&str]) -> BTreeSet<String> {
    ids.iter().map(|s| (*s).to_owned()).collect()
}

fn on() -> ExpectedSettings {
    ExpectedSettings {
        versioning: Expect::Is("Enabled".into()),
        lifecycle_rules: Expect::Is(set(&["kit-rule"])),
        policy: Expect::Is(vec!["${bucket}/keep/".into(), "Deny".into()]),
        object_lock: Expect::Any,
    }
}

fn held_on() -> StoreSettings {
    StoreSettings {
        versioning: Some("Enabled".into()),
        lifecycle_rules: set(&["kit-rule"]),
        policy: Some(
            r#"{"Statement":[{"Effect":"Deny","Resource":["arn:aws:s3:::b-1/keep/*"]}]}"#.into(),
        ),
        ..Default::default()
    }
}

#[test]
fn a_store_holding_what_is_expected_passes_with_the_bucket_in_the_policy() {
    let c = compare(&on(), &held_on(), "b-1");
    assert_eq!(c.missed, Vec::<String>::new());
    assert_eq!(c.checked, 3);
    // Another bucket's name is not in the policy.
    let c = compare(&on(), &held_on(), "b-2");
    assert_eq!(c.missed.len(), 1, "{:?}", c.missed);
    assert!(c.missed[0].contains(r#"["b-2/keep/"]"#), "{:?}", c.missed);
}

#[test]
fn absent_fails_on_what_is_left_and_any_is_not_checked() {
    let removed = ExpectedSettings {
        versioning: Expect::Is("Suspended".into()),
        lifecycle_rules: Expect::Absent,
        policy: Expect::Absent,
        object_lock: Expect::Any,
    };
    let mut held = held_on();
    held.versioning = Some("Suspended".into());
    held.object_lock = Some(("GOVERNANCE".into(), 1));
    let c = compare(&removed, &held, "b-1");
    assert_eq!(c.missed.len(), 2, "{:?}", c.missed);
    assert!(
        c.missed[0].starts_with(r#"lifecycle rules: expected none, the store holds {"kit-rule"}"#),
        "{:?}",
        c.missed
    );
    assert!(
        c.missed[1].starts_with("bucket policy: expected none, the store holds {"),
        "{:?}",
        c.missed
    );
    let c = compare(&removed, &StoreSettings::default(), "b-1");
    assert_eq!(
        c.missed,
        ["versioning: expected Suspended, the store holds never set"]
    );
}

#[test]
fn an_unreadable_setting_is_neither_met_nor_missed() {
    let held = StoreSettings {
        unreadable: BucketSetting::ALL.into_iter().collect(),
        ..Default::default()
    };
    let c = compare(&on(), &held, "b-1");
    assert!(c.missed.is_empty());
    assert_eq!(c.checked, 0);
    assert_eq!(
        c.unreadable,
        [
            BucketSetting::Versioning,
            BucketSetting::LifecycleRules,
            BucketSetting::Policy
        ]
    );
    assert!(changes(&held_on(), &held).is_empty());
}

#[test]
fn changes_name_each_setting_that_moved() {
    let mut now = held_on();
    now.versioning = Some("Suspended".into());
    now.lifecycle_rules.clear();
    assert_eq!(
        changes(&held_on(), &now),
        [
            "versioning Enabled → Suspended",
            r#"lifecycle rules {"kit-rule"} → none"#
        ]
    );
    assert!(changes(&now, &now).is_empty());
}

#[test]
fn expectations_and_holdings_read_as_a_sentence() {
    assert_eq!(
        on().shown("b-1"),
        r#"versioning Enabled, lifecycle rules exactly {"kit-rule"}, a bucket policy containing ["b-1/keep/", "Deny"]"#
    );
    assert_eq!(
        ExpectedSettings::default().shown("b"),
        "any settings (the case checks none)"
    );
    let mut held = held_on();
    held.unreadable.insert(BucketSetting::ObjectLock);
    assert_eq!(
        held.to_string(),
        format!(
            r#"versioning Enabled, lifecycle rules {{"kit-rule"}}, a bucket policy ({} bytes), unreadable: object lock"#,
            held_on().policy.map_or(0, |p| p.len())
        )
    );
}
