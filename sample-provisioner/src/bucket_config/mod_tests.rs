use super::*;

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

const RULES: &str = r#"{"Rules":[{"ID":"logs","Status":"Enabled","Filter":{"Prefix":"logs/"},"Expiration":{"Days":30}}]}"#;

#[test]
fn a_claim_value_replaces_the_class_default() {
    let class = ClassConfig::parse(&map(&[(VERSIONING, "Enabled")])).expect("class");
    assert!(class.has_defaults());
    let none = class.resolve(&map(&[]), "b").expect("default");
    assert_eq!(none.versioning, Some(Versioning::Enabled));
    let own = class
        .resolve(&map(&[(VERSIONING, "Suspended")]), "b")
        .expect("claim");
    assert_eq!(own.versioning, Some(Versioning::Suspended));
    let bare = ClassConfig::parse(&map(&[])).expect("class");
    assert!(bare.resolve(&map(&[]), "b").expect("none").is_empty());
}

#[test]
fn bad_values_name_their_key_and_where_they_came_from() {
    let class = ClassConfig::parse(&map(&[])).expect("class");
    let e = class
        .resolve(&map(&[(VERSIONING, "on")]), "b")
        .expect_err("refused");
    assert!(
        e.starts_with("additionalConfig versioning") && e.contains("\"Suspended\""),
        "{e}"
    );
    let defaults = ClassConfig::parse(&map(&[(VERSIONING, "yes")])).expect("class");
    let e = defaults.resolve(&map(&[]), "b").expect_err("refused");
    assert!(e.starts_with("parameter versioning"), "{e}");
    for bound in [LIFECYCLE_MAX_DAYS, OBJECT_LOCK_MAX_DAYS] {
        let e = ClassConfig::parse(&map(&[(bound, "0")])).expect_err("refused");
        assert!(e.contains(bound), "{e}");
    }
}

#[test]
fn the_class_bounds_lifecycle_and_retention() {
    let class = ClassConfig::parse(&map(&[
        (LIFECYCLE_MAX_DAYS, "10"),
        (OBJECT_LOCK_MAX_DAYS, "5"),
    ]))
    .expect("class");
    assert!(
        class
            .resolve(&map(&[(BUCKET_LIFECYCLE, RULES)]), "b")
            .is_err()
    );
    let short = RULES.replace("30", "7");
    assert!(
        class
            .resolve(&map(&[(BUCKET_LIFECYCLE, &short)]), "b")
            .is_ok()
    );
    let lock = |days| map(&[(OBJECT_LOCK_MODE, "GOVERNANCE"), (OBJECT_LOCK_DAYS, days)]);
    let e = class.resolve(&lock("6"), "b").expect_err("over the bound");
    assert!(
        e.contains("1 to 5") && e.contains(OBJECT_LOCK_MAX_DAYS),
        "{e}"
    );
    let ok = class.resolve(&lock("5"), "b").expect("within");
    assert_eq!(
        ok.object_lock,
        Some(ObjectLock {
            mode: LockMode::Governance,
            days: 5
        })
    );
}

#[test]
fn object_lock_needs_both_keys_and_implies_versioning() {
    let class = ClassConfig::parse(&map(&[])).expect("class");
    let e = class
        .resolve(&map(&[(OBJECT_LOCK_MODE, "COMPLIANCE")]), "b")
        .expect_err("days missing");
    assert!(e.contains("both"), "{e}");
    let locked = map(&[(OBJECT_LOCK_MODE, "COMPLIANCE"), (OBJECT_LOCK_DAYS, "1")]);
    let c = class.resolve(&locked, "b").expect("locked");
    assert_eq!(c.versioning, Some(Versioning::Enabled));
    let mut suspended = locked.clone();
    suspended.insert(VERSIONING.into(), "Suspended".into());
    let e = class.resolve(&suspended, "b").expect_err("contradiction");
    assert!(e.contains("object lock needs versioning"), "{e}");
    let e = class
        .resolve(
            &map(&[(OBJECT_LOCK_MODE, "strict"), (OBJECT_LOCK_DAYS, "1")]),
            "b",
        )
        .expect_err("mode");
    assert!(e.contains("GOVERNANCE"), "{e}");
}

#[test]
fn what_a_bound_bucket_cannot_become_is_refused() {
    let enabled = BucketConfig {
        versioning: Some(Versioning::Enabled),
        ..BucketConfig::default()
    };
    let suspended = BucketConfig {
        versioning: Some(Versioning::Suspended),
        ..BucketConfig::default()
    };
    assert!(check_change(&enabled, &suspended).is_ok());
    assert!(check_change(&suspended, &enabled).is_ok());
    assert!(check_change(&BucketConfig::default(), &enabled).is_ok());
    let e = check_change(&suspended, &BucketConfig::default()).expect_err("unset");
    assert!(e.contains("cannot be removed"), "{e}");
    let locked = BucketConfig {
        object_lock: Some(ObjectLock {
            mode: LockMode::Governance,
            days: 1,
        }),
        ..enabled.clone()
    };
    let e = check_change(&enabled, &locked).expect_err("lock after creation");
    assert!(
        e.contains("off") && e.contains("GOVERNANCE for 1 days"),
        "{e}"
    );
    assert!(check_change(&locked, &enabled).is_err());
    assert!(check_change(&locked, &locked).is_ok());
}
