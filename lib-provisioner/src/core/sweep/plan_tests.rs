use super::*;

const GRACE: Duration = Duration::from_secs(600);

fn class(name: &str) -> SweepClass {
    SweepClass {
        kind: "StorageClass".into(),
        name: name.into(),
        parameters: BTreeMap::new(),
    }
}

fn listing(name: &str, made: Vec<Made>) -> Listing {
    Listing {
        class: class(name),
        result: Ok(made),
    }
}

fn user(name: &str, owner: Option<&str>) -> Made {
    let made = Made::new(MadeKind::Principal, "http://store", name);
    match owner {
        Some(uid) => made.owned_by(uid),
        None => made,
    }
}

fn live(uids: &[&str]) -> BTreeSet<String> {
    uids.iter().map(|u| (*u).to_owned()).collect()
}

fn decisions(plan: &SweepPlan) -> Vec<(String, Decision)> {
    plan.items
        .iter()
        .map(|i| (i.made.name.clone(), i.decision.clone()))
        .collect()
}

#[test]
fn an_owned_principal_is_kept_and_not_remembered() {
    let now = Instant::now();
    let plan = plan(
        vec![listing("a", vec![user("u1", Some("uid-1"))])],
        &live(&["uid-1"]),
        &Sightings::new(),
        now,
        GRACE,
    );
    assert_eq!(decisions(&plan), [("u1".into(), Decision::Owned)]);
    assert!(plan.sightings.is_empty());
}

#[test]
fn a_first_sighting_waits_even_with_no_grace() {
    let now = Instant::now();
    for grace in [GRACE, Duration::ZERO] {
        let plan = plan(
            vec![listing(
                "a",
                vec![user("u1", None), user("u2", Some("gone"))],
            )],
            &live(&["uid-1"]),
            &Sightings::new(),
            now,
            grace,
        );
        for (_, d) in decisions(&plan) {
            assert_eq!(d, Decision::Waiting { remaining: grace });
        }
        assert_eq!(plan.sightings.len(), 2, "both remembered from now");
        assert!(plan.sightings.values().all(|t| *t == now));
    }
}

#[test]
fn an_orphan_is_removed_only_past_the_grace_in_a_later_round() {
    let first = Instant::now();
    let key = (
        "http://store".to_owned(),
        MadeKind::Principal,
        "u1".to_owned(),
    );
    let seen = Sightings::from([(key.clone(), first)]);
    let listed = || vec![listing("a", vec![user("u1", None)])];
    let early = plan(listed(), &live(&[]), &seen, first + GRACE / 2, GRACE);
    assert_eq!(
        decisions(&early),
        [(
            "u1".into(),
            Decision::Waiting {
                remaining: GRACE / 2
            }
        )]
    );
    assert_eq!(
        early.sightings.get(&key),
        Some(&first),
        "the first sighting is kept"
    );
    let late = plan(listed(), &live(&[]), &seen, first + GRACE, GRACE);
    assert_eq!(decisions(&late), [("u1".into(), Decision::Remove)]);
    // Zero grace still needs a later round than the first sighting.
    let same_round = plan(listed(), &live(&[]), &seen, first, Duration::ZERO);
    assert!(matches!(
        decisions(&same_round)[0].1,
        Decision::Waiting { .. }
    ));
}

#[test]
fn an_owner_appearing_forgets_the_sighting() {
    // A grant racing a sweep: its user was listed before its owner was
    // seen; in the next round the owner is live and nothing is removed.
    let first = Instant::now();
    let key = (
        "http://store".to_owned(),
        MadeKind::Principal,
        "u1".to_owned(),
    );
    let seen = Sightings::from([(key, first)]);
    let plan = plan(
        vec![listing("a", vec![user("u1", Some("new"))])],
        &live(&["new"]),
        &seen,
        first + GRACE * 2,
        GRACE,
    );
    assert_eq!(decisions(&plan), [("u1".into(), Decision::Owned)]);
    assert!(plan.sightings.is_empty());
}

#[test]
fn one_thing_listed_through_two_classes_is_one_item_and_an_owner_either_names_counts() {
    let now = Instant::now();
    let plan = plan(
        vec![
            listing("a", vec![user("u1", None)]),
            listing("b", vec![user("u1", Some("uid-1")), user("u2", None)]),
        ],
        &live(&["uid-1"]),
        &Sightings::new(),
        now,
        GRACE,
    );
    assert_eq!(plan.items.len(), 2);
    assert_eq!(plan.items[0].decision, Decision::Owned);
    assert_eq!(
        plan.items[0].class.name, "a",
        "removed through the first class"
    );
    assert_eq!(plan.orphans().values().sum::<i64>(), 1);
}

#[test]
fn the_same_name_on_two_stores_is_two_items() {
    let now = Instant::now();
    let other = Made::new(MadeKind::Principal, "http://other", "u1");
    let plan = plan(
        vec![listing("a", vec![user("u1", None), other])],
        &live(&[]),
        &Sightings::new(),
        now,
        GRACE,
    );
    assert_eq!(plan.items.len(), 2);
    assert_eq!(plan.orphans().len(), 2);
}

#[test]
fn a_class_that_cannot_list_is_not_swept_and_removes_nothing() {
    let now = Instant::now();
    let plan = plan(
        vec![Listing {
            class: class("shared"),
            result: Err("cannot list".into()),
        }],
        &live(&[]),
        &Sightings::new(),
        now,
        GRACE,
    );
    assert!(plan.items.is_empty());
    assert_eq!(plan.not_swept.len(), 1);
    assert_eq!(plan.not_swept[0].reason, "cannot list");
}

#[test]
fn buckets_are_reported_unless_the_store_recorded_delete() {
    let first = Instant::now();
    let bucket = |name: &str| Made::new(MadeKind::Bucket, "http://store", name).owned_by("gone");
    let kept = bucket("kept");
    let retained = bucket("retained").with_reclaim(ReclaimPolicy::Retain);
    let deletable = bucket("deletable").with_reclaim(ReclaimPolicy::Delete);
    let key = |n: &str| ("http://store".to_owned(), MadeKind::Bucket, n.to_owned());
    let seen = Sightings::from([(key("kept"), first), (key("deletable"), first)]);
    let plan = plan(
        vec![listing("a", vec![kept, retained, deletable])],
        &live(&[]),
        &seen,
        first + GRACE,
        GRACE,
    );
    assert_eq!(
        decisions(&plan),
        [
            ("deletable".into(), Decision::DeleteBucket),
            ("kept".into(), Decision::ReportBucket),
            ("retained".into(), Decision::ReportBucket),
        ]
    );
    assert_eq!(
        plan.sightings.keys().collect::<Vec<_>>(),
        [&key("deletable")]
    );
    assert!(!Decision::ReportBucket.acts() && Decision::DeleteBucket.acts());
}

#[test]
fn an_orphan_no_longer_listed_is_forgotten() {
    let first = Instant::now();
    let key = (
        "http://store".to_owned(),
        MadeKind::Principal,
        "u1".to_owned(),
    );
    let seen = Sightings::from([(key, first)]);
    let plan = plan(
        vec![listing("a", vec![])],
        &live(&[]),
        &seen,
        first + GRACE,
        GRACE,
    );
    assert!(plan.items.is_empty() && plan.sightings.is_empty());
    assert_eq!(plan.swept.len(), 1, "an empty store was still swept");
}
