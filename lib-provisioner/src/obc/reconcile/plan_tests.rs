//! What step comes next, from observed states built by hand: fresh claims,
//! every crash point of a provision, upgrades, bad input and deletion.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};

use super::*;
use crate::core::provisioner::Credentials;
use crate::obc::api::{
    APPLIED_CONFIG_ANNOTATION, CLASS_PARAMETERS_ANNOTATION, ClaimPhase, Endpoint, FINALIZER,
    GENERATED_NAME_ANNOTATION, ObjectBucketClaimSpec, ObjectBucketClaimStatus, ObjectBucketSpec,
    ObjectBucketStatus, PROVISIONER_LABEL,
};
use crate::obc::reconcile::status;

const LABEL: &str = "example.com-bucket";

fn claim(spec: ObjectBucketClaimSpec) -> ObjectBucketClaim {
    let mut c = ObjectBucketClaim::new("photos", spec);
    c.metadata.namespace = Some("team".into());
    c.metadata.uid = Some("uid-1".into());
    c.metadata.generation = Some(1);
    c.metadata.resource_version = Some("1".into());
    c
}

pub(super) fn generated_claim() -> ObjectBucketClaim {
    claim(ObjectBucketClaimSpec {
        storage_class_name: "buckets".into(),
        generate_bucket_name: Some("photos".into()),
        ..Default::default()
    })
}

pub(super) fn class(params: &[(&str, &str)], reclaim: Option<&str>) -> ClassState {
    let mut c = StorageClass::default();
    c.metadata.name = Some("buckets".into());
    c.provisioner = "example.com/bucket".into();
    c.reclaim_policy = reclaim.map(str::to_owned);
    c.parameters = Some(
        params
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    );
    ClassState::Ours(Box::new(c))
}

pub(super) fn observed(claim: ObjectBucketClaim, class: ClassState) -> Observed {
    Observed::new(claim, class, LABEL.into())
}

fn prepare(c: &mut ObjectBucketClaim, generated: Option<&str>) {
    c.metadata.finalizers = Some(vec![FINALIZER.into()]);
    c.metadata.labels = Some(BTreeMap::from([(PROVISIONER_LABEL.into(), LABEL.into())]));
    if let Some(name) = generated {
        c.metadata.annotations = Some(BTreeMap::from([(
            GENERATED_NAME_ANNOTATION.into(),
            name.into(),
        )]));
    }
}

/// Prepared as this version prepares a new claim: `spec.objectBucketName`
/// recorded with the finalizer.
fn prepare_now(c: &mut ObjectBucketClaim, generated: Option<&str>) {
    prepare(c, generated);
    c.spec.object_bucket_name = Some("obc-team-photos".into());
}

pub(super) fn ob_for(c: &ObjectBucketClaim, bucket: &str, origin: Option<&str>) -> ObjectBucket {
    let mut ob = ObjectBucket::new(
        "obc-team-photos",
        ObjectBucketSpec {
            storage_class_name: "buckets".into(),
            claim_ref: Some(ObjectReference {
                name: c.metadata.name.clone(),
                namespace: c.metadata.namespace.clone(),
                uid: c.metadata.uid.clone(),
                ..Default::default()
            }),
            endpoint: Some(Endpoint {
                bucket_name: bucket.into(),
                ..Default::default()
            }),
            ..Default::default()
        },
    );
    ob.metadata.finalizers = Some(vec![FINALIZER.into()]);
    ob.metadata.labels = Some(BTreeMap::from([(PROVISIONER_LABEL.into(), LABEL.into())]));
    if let Some(origin) = origin {
        // Written by this version: with its records.
        ob.metadata.annotations = Some(BTreeMap::from([
            (BUCKET_ORIGIN_ANNOTATION.into(), origin.into()),
            (
                APPLIED_CONFIG_ANNOTATION.into(),
                records::encode(&records::wanted_config(c)),
            ),
            (CLASS_PARAMETERS_ANNOTATION.into(), "{}".into()),
            // The key of `access()`, recorded with the endpoint.
            (crate::obc::api::ACCESS_KEY_ANNOTATION.into(), "id".into()),
        ]));
    }
    ob
}

/// A child owned by the claim; `adopted`: labelled, as this version writes
/// them (no finalizer).
fn child_of(c: &ObjectBucketClaim, adopted: bool) -> ObjectMeta {
    ObjectMeta {
        name: c.metadata.name.clone(),
        namespace: c.metadata.namespace.clone(),
        owner_references: Some(vec![OwnerReference {
            kind: "ObjectBucketClaim".into(),
            uid: c.metadata.uid.clone().unwrap_or_default(),
            ..Default::default()
        }]),
        labels: adopted.then(|| BTreeMap::from([(PROVISIONER_LABEL.into(), LABEL.into())])),
        ..Default::default()
    }
}

/// A child as older versions wrote them: labelled, with our finalizer.
pub(super) fn older_child_of(c: &ObjectBucketClaim) -> ObjectMeta {
    ObjectMeta {
        finalizers: Some(vec![FINALIZER.into()]),
        ..child_of(c, true)
    }
}

fn access() -> BucketAccess {
    BucketAccess::new("s3.local", 9000, Credentials::new("id", "secret"))
}

fn reason(step: Step) -> &'static str {
    match step {
        Step::Reject(p) | Step::Wait(p) => p.reason,
        other => panic!("expected a problem, got {other:?}"),
    }
}

/// Walks a fresh claim through the whole provision, applying each step's
/// effect the way the executor records it.
#[test]
fn a_fresh_generated_claim_is_provisioned_in_order() {
    let mut o = observed(generated_claim(), class(&[], None));
    assert_eq!(
        next_step(&o),
        Step::PrepareClaim {
            generate_from: Some("photos".into()),
            bind_to: Some("obc-team-photos".into())
        }
    );
    prepare_now(&mut o.claim, Some("photos-abcd1234"));
    assert_eq!(
        next_step(&o),
        Step::CreateObjectBucket {
            bucket_name: "photos-abcd1234".into(),
            origin: BucketOrigin::Greenfield,
            reclaim_policy: ReclaimPolicy::Delete
        }
    );
    o.ob = Some(reserved(ob_for(
        &o.claim,
        "photos-abcd1234",
        Some("greenfield"),
    )));
    assert_eq!(
        next_step(&o),
        Step::ObtainAccess {
            bucket_name: "photos-abcd1234".into(),
            origin: BucketOrigin::Greenfield
        }
    );
    o.access = Some(access());
    assert_eq!(next_step(&o), Step::CompleteObjectBucket);
    o.ob = Some(ob_for(&o.claim, "photos-abcd1234", Some("greenfield")));
    // Both children are missing: written side by side.
    assert_eq!(next_step(&o), Step::WriteChildren);
    o.secret = Some(child_of(&o.claim, true));
    o.secret_synced = true;
    o.config_map = Some(child_of(&o.claim, true));
    o.config_map_synced = true;
    // spec.objectBucketName came with the finalizer: no claim write here.
    assert_eq!(next_step(&o), Step::MarkObjectBucketBound);
    if let Some(ob) = o.ob.as_mut() {
        ob.status = Some(ObjectBucketStatus {
            phase: Some(BucketPhase::Bound),
        });
    }
    assert_eq!(next_step(&o), Step::MarkClaimBound);
    o.claim.status = Some(status::desired(
        &o.claim,
        ClaimPhase::Bound,
        "Provisioned",
        "ok",
    ));
    assert_eq!(next_step(&o), Step::Done);
}

pub(super) fn bound_state() -> Observed {
    let mut c = generated_claim();
    prepare(&mut c, Some("photos-abcd1234"));
    c.spec.object_bucket_name = Some("obc-team-photos".into());
    c.status = Some(status::desired(&c, ClaimPhase::Bound, "Provisioned", "ok"));
    let mut o = observed(c, class(&[], None));
    let mut ob = ob_for(&o.claim, "photos-abcd1234", Some("greenfield"));
    ob.status = Some(ObjectBucketStatus {
        phase: Some(BucketPhase::Bound),
    });
    o.ob = Some(ob);
    o.secret = Some(child_of(&o.claim, true));
    o.config_map = Some(child_of(&o.claim, true));
    o
}

#[test]
fn a_bound_claim_needs_nothing_and_calls_no_provisioner() {
    assert_eq!(next_step(&bound_state()), Step::Done);
}

#[test]
fn a_bound_claim_survives_its_class_being_deleted() {
    let mut o = bound_state();
    o.class = ClassState::NotFound("buckets".into());
    assert_eq!(next_step(&o), Step::Done);
}

fn reserved(mut ob: ObjectBucket) -> ObjectBucket {
    ob.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(crate::obc::api::RESERVED_ANNOTATION.into(), "true".into());
    ob
}

#[test]
fn after_a_restart_a_prepared_claim_reserves_its_object_bucket_before_provisioning() {
    // The pass that added the finalizer died before the reservation (or a
    // provisioner that made nothing had it removed): every pass reserves
    // first, so that a bucket never exists without a record.
    let mut c = generated_claim();
    prepare(&mut c, Some("photos-abcd1234"));
    let mut o = observed(c, class(&[], Some("Retain")));
    assert_eq!(
        next_step(&o),
        Step::CreateObjectBucket {
            bucket_name: "photos-abcd1234".into(),
            origin: BucketOrigin::Greenfield,
            reclaim_policy: ReclaimPolicy::Retain
        }
    );
    o.ob = Some(reserved(ob_for(
        &o.claim,
        "photos-abcd1234",
        Some("greenfield"),
    )));
    assert!(matches!(next_step(&o), Step::ObtainAccess { .. }));
    o.access = Some(access());
    assert_eq!(next_step(&o), Step::CompleteObjectBucket);
}

#[test]
fn a_greenfield_name_is_held_before_anything_is_reserved_and_released_after_teardown() {
    let mut c = generated_claim();
    prepare(&mut c, Some("photos-abcd1234"));
    let mut o = observed(c, class(&[], None));
    o.name_records = true;
    assert_eq!(
        next_step(&o),
        Step::HoldBucketName {
            bucket_name: "photos-abcd1234".into()
        }
    );
    o.name_held = true;
    assert!(matches!(next_step(&o), Step::CreateObjectBucket { .. }));
    // A reserved ObjectBucket (an earlier pass held the name) needs no
    // second look at the record.
    o.name_held = false;
    o.ob = Some(reserved(ob_for(
        &o.claim,
        "photos-abcd1234",
        Some("greenfield"),
    )));
    assert!(matches!(next_step(&o), Step::ObtainAccess { .. }));

    // The deletion releases the name last, after the bucket and the
    // ObjectBucket are dealt with.
    let mut o = deleting(o);
    o.ob = None;
    o.torn_down = true;
    assert_eq!(
        next_step(&o),
        Step::ReleaseBucketName {
            bucket_name: "photos-abcd1234".into()
        }
    );
    o.name_released = true;
    assert_eq!(next_step(&o), Step::RemoveClaimFinalizer);
}

#[test]
fn brownfield_names_and_unconfigured_controllers_hold_no_name_record() {
    let mut b = claim(ObjectBucketClaimSpec {
        storage_class_name: "buckets".into(),
        ..Default::default()
    });
    prepare(&mut b, None);
    let mut o = observed(b, class(&[("bucketName", "shared-data")], None));
    o.name_records = true;
    assert!(matches!(next_step(&o), Step::CreateObjectBucket { .. }));

    let mut c = generated_claim();
    prepare(&mut c, Some("photos-abcd1234"));
    let o = observed(c, class(&[], None));
    assert!(!o.name_records);
    assert!(matches!(next_step(&o), Step::CreateObjectBucket { .. }));
    let mut o = deleting(o);
    o.torn_down = true;
    assert_eq!(next_step(&o), Step::RemoveClaimFinalizer);
}

#[test]
fn a_class_switched_after_the_reservation_is_refused_until_switched_back() {
    let mut c = generated_claim();
    prepare(&mut c, Some("photos-abcd1234"));
    let mut o = observed(c, class(&[], None));
    o.ob = Some(reserved(ob_for(
        &o.claim,
        "photos-abcd1234",
        Some("greenfield"),
    )));
    o.claim.spec.storage_class_name = "other".into();
    let mut other = StorageClass::default();
    other.metadata.name = Some("other".into());
    other.provisioner = "example.com/bucket".into();
    o.class = ClassState::Ours(Box::new(other));
    match next_step(&o) {
        Step::Reject(p) => {
            assert_eq!(p.reason, "StorageClassChanged");
            assert!(
                p.message
                    .contains("set spec.storageClassName back to \"buckets\""),
                "{}",
                p.message
            );
        }
        other => panic!("expected a rejection, got {other:?}"),
    }
    // Switched to a class that does not exist, or another provisioner's:
    // the recorded class still wins over waiting or ignoring.
    o.class = ClassState::NotFound("other".into());
    assert_eq!(reason(next_step(&o)), "StorageClassChanged");
    o.class = ClassState::Foreign;
    assert_eq!(reason(next_step(&o)), "StorageClassChanged");
    // Set back: provisioning resumes on the recorded class.
    o.claim.spec.storage_class_name = "buckets".into();
    o.class = class(&[], None);
    assert!(matches!(next_step(&o), Step::ObtainAccess { .. }));
    // Deleting the claim tears down what the ObjectBucket records, whatever
    // the claim names now.
    o.claim.spec.storage_class_name = "other".into();
    let o = deleting(o);
    assert_eq!(
        next_step(&o),
        Step::Teardown {
            delete_bucket: true
        }
    );
}

#[test]
fn crash_after_bucket_created_asks_again_for_the_same_name() {
    // Claim prepared, ObjectBucket reserved, provisioner ran, process died
    // before the endpoint was recorded.
    let mut c = generated_claim();
    prepare(&mut c, Some("photos-abcd1234"));
    let mut o = observed(c, class(&[], None));
    o.ob = Some(reserved(ob_for(
        &o.claim,
        "photos-abcd1234",
        Some("greenfield"),
    )));
    assert_eq!(
        next_step(&o),
        Step::ObtainAccess {
            bucket_name: "photos-abcd1234".into(),
            origin: BucketOrigin::Greenfield
        }
    );
}

#[test]
fn a_claim_deleted_while_its_object_bucket_is_reserved_deletes_the_bucket_even_under_retain() {
    let mut c = generated_claim();
    prepare(&mut c, Some("photos-abcd1234"));
    let mut o = deleting(observed(c, class(&[], Some("Retain"))));
    let mut ob = reserved(ob_for(&o.claim, "photos-abcd1234", Some("greenfield")));
    ob.spec.reclaim_policy = ReclaimPolicy::Retain;
    o.ob = Some(ob);
    assert_eq!(
        next_step(&o),
        Step::Teardown {
            delete_bucket: true
        }
    );
    o.torn_down = true;
    assert_eq!(next_step(&o), Step::DeleteObjectBucket);
    // Brownfield: access is revoked, the bucket stays, the reservation goes.
    let mut b = claim(ObjectBucketClaimSpec {
        storage_class_name: "buckets".into(),
        ..Default::default()
    });
    prepare(&mut b, None);
    let mut o = deleting(observed(
        b,
        class(&[("bucketName", "shared-data")], Some("Retain")),
    ));
    let mut ob = reserved(ob_for(&o.claim, "shared-data", Some("brownfield")));
    ob.spec.reclaim_policy = ReclaimPolicy::Retain;
    o.ob = Some(ob);
    assert_eq!(
        next_step(&o),
        Step::Teardown {
            delete_bucket: false
        }
    );
    o.torn_down = true;
    assert_eq!(next_step(&o), Step::DeleteObjectBucket);
}

#[test]
fn crash_after_object_bucket_created_needs_credentials_again() {
    let mut o = bound_state();
    o.claim.spec.object_bucket_name = None;
    o.claim.status = None;
    o.secret = None;
    o.config_map = None;
    assert!(matches!(next_step(&o), Step::ObtainAccess { .. }));
    o.access = Some(access());
    assert_eq!(next_step(&o), Step::WriteChildren);
}

/// `WriteChildren` made the ConfigMap and not the Secret: only the Secret
/// is written again (the other way round is the crash below).
#[test]
fn a_failed_side_by_side_write_leaves_only_the_missing_child_to_write() {
    let mut o = bound_state();
    o.secret = None;
    o.access = Some(access());
    assert_eq!(next_step(&o), Step::WriteSecret);
}

#[test]
fn crash_after_secret_written_needs_no_provisioner_call() {
    let mut o = bound_state();
    o.claim.spec.object_bucket_name = None;
    o.config_map = None;
    assert_eq!(next_step(&o), Step::WriteConfigMap);
}

#[test]
fn secret_is_resynced_when_fresh_credentials_were_obtained() {
    let mut o = bound_state();
    o.ob = None;
    o.access = Some(access());
    assert!(matches!(next_step(&o), Step::CreateObjectBucket { .. }));
    o.ob = Some(ob_for(&o.claim, "photos-abcd1234", Some("greenfield")));
    assert_eq!(next_step(&o), Step::WriteSecret);
}

#[test]
fn upgrade_objectbucketname_dropped_by_schema_is_repaired_not_reprovisioned() {
    // A Go-library claim: generated name only in the OB, no annotation,
    // spec.objectBucketName pruned, phase Bound.
    let mut c = generated_claim();
    prepare(&mut c, None);
    c.status = Some(ObjectBucketClaimStatus {
        phase: Some(ClaimPhase::Bound),
        ..Default::default()
    });
    let mut o = observed(c, class(&[], None));
    o.ob = Some(ob_for(&o.claim, "photos-3c5a4e2f-8a4b", None));
    o.secret = Some(child_of(&o.claim, true));
    o.config_map = Some(child_of(&o.claim, true));
    assert_eq!(
        next_step(&o),
        Step::AdoptObjectBucket {
            origin: Some(BucketOrigin::Greenfield)
        }
    );
    o.ob = Some(ob_for(&o.claim, "photos-3c5a4e2f-8a4b", Some("greenfield")));
    assert_eq!(next_step(&o), Step::BindClaim);
}

#[test]
fn upgrade_without_labels_or_finalizers_is_adopted() {
    let mut o = bound_state();
    o.claim.metadata.finalizers = None;
    o.claim.metadata.labels = None;
    o.claim.metadata.annotations = None;
    o.claim.spec.bucket_name = Some("photos-abcd1234".into()); // written back by an old version
    // Its spec.objectBucketName is kept as the Go library wrote it.
    assert_eq!(
        next_step(&o),
        Step::PrepareClaim {
            generate_from: None,
            bind_to: None
        }
    );
    prepare(&mut o.claim, None);
    o.secret = Some(child_of(&o.claim, false));
    o.config_map = Some(child_of(&o.claim, false));
    assert_eq!(next_step(&o), Step::AdoptSecret);
    o.secret = Some(child_of(&o.claim, true));
    assert_eq!(next_step(&o), Step::AdoptConfigMap);
    // Children with the finalizer of older versions lose it.
    o.config_map = Some(child_of(&o.claim, true));
    o.secret = Some(older_child_of(&o.claim));
    assert_eq!(next_step(&o), Step::AdoptSecret);
    o.secret = Some(child_of(&o.claim, true));
    o.config_map = Some(older_child_of(&o.claim));
    assert_eq!(next_step(&o), Step::AdoptConfigMap);
}

#[test]
fn both_names_written_back_by_an_older_version_are_accepted() {
    let mut c = generated_claim();
    c.spec.bucket_name = Some("photos-abcde".into());
    let o = observed(c, class(&[], None));
    assert_eq!(
        next_step(&o),
        Step::PrepareClaim {
            generate_from: None,
            bind_to: Some("obc-team-photos".into())
        }
    );
}

#[test]
fn both_names_set_by_a_user_are_rejected() {
    let mut c = generated_claim();
    c.spec.bucket_name = Some("other".into());
    assert_eq!(
        reason(next_step(&observed(c, class(&[], None)))),
        "AmbiguousBucketName"
    );
}

#[test]
fn bad_input_is_rejected_before_anything_is_written() {
    let cases: Vec<(ObjectBucketClaimSpec, ClassState, &str)> = vec![
        (
            ObjectBucketClaimSpec {
                generate_bucket_name: Some("x".into()),
                ..Default::default()
            },
            ClassState::Unnamed,
            "MissingStorageClass",
        ),
        (
            ObjectBucketClaimSpec {
                storage_class_name: "buckets".into(),
                ..Default::default()
            },
            class(&[], None),
            "MissingBucketName",
        ),
        (
            ObjectBucketClaimSpec {
                storage_class_name: "buckets".into(),
                bucket_name: Some("Bad_Name".into()),
                ..Default::default()
            },
            class(&[], None),
            "InvalidBucketName",
        ),
        (
            ObjectBucketClaimSpec {
                storage_class_name: "buckets".into(),
                generate_bucket_name: Some("UPPER".into()),
                ..Default::default()
            },
            class(&[], None),
            "InvalidBucketName",
        ),
        (
            ObjectBucketClaimSpec {
                storage_class_name: "buckets".into(),
                bucket_name: Some("ok-name".into()),
                ..Default::default()
            },
            class(&[], Some("Recycle")),
            "InvalidReclaimPolicy",
        ),
        (
            ObjectBucketClaimSpec {
                storage_class_name: "buckets".into(),
                bucket_name: Some("other".into()),
                ..Default::default()
            },
            class(&[("bucketName", "shared")], None),
            "BucketNameMismatch",
        ),
        (
            ObjectBucketClaimSpec {
                storage_class_name: "buckets".into(),
                ..Default::default()
            },
            class(&[("bucketName", "NOT_VALID")], None),
            "InvalidBucketName",
        ),
    ];
    for (spec, class, expected) in cases {
        let o = observed(claim(spec.clone()), class);
        assert_eq!(reason(next_step(&o)), expected, "{spec:?}");
    }
}

#[test]
fn an_unknown_class_waits() {
    let o = observed(generated_claim(), ClassState::NotFound("buckets".into()));
    assert!(matches!(next_step(&o), Step::Wait(p) if p.reason == "StorageClassNotFound"));
}

#[test]
fn a_foreign_class_is_ignored() {
    assert_eq!(
        next_step(&observed(generated_claim(), ClassState::Foreign)),
        Step::Ignore
    );
}

#[test]
fn a_name_held_by_another_claim_is_rejected() {
    let mut c = generated_claim();
    c.spec.generate_bucket_name = None;
    c.spec.bucket_name = Some("shared-name".into());
    let mut o = observed(c, class(&[], None));
    o.name_holder = Some("claim other/first".into());
    assert_eq!(reason(next_step(&o)), "BucketNameTaken");
}

#[test]
fn foreign_secret_or_configmap_is_a_conflict() {
    let mut o = observed(generated_claim(), class(&[], None));
    o.secret = Some(ObjectMeta {
        name: Some("photos".into()),
        ..Default::default()
    });
    assert_eq!(reason(next_step(&o)), "NameConflict");
}

#[test]
fn an_object_bucket_of_an_earlier_claim_blocks_a_new_one() {
    let mut o = observed(generated_claim(), class(&[], None));
    let mut earlier = o.claim.clone();
    earlier.metadata.uid = Some("uid-0".into());
    o.ob = Some(ob_for(&earlier, "photos-old", Some("greenfield")));
    assert_eq!(reason(next_step(&o)), "ObjectBucketTaken");
}

#[test]
fn a_bound_claim_whose_object_bucket_vanished_never_gets_a_second_generated_name() {
    let mut o = bound_state();
    o.ob = None;
    o.claim.metadata.annotations = None;
    assert_eq!(reason(next_step(&o)), "ObjectBucketMissing");
}

#[test]
fn brownfield_grants_access_to_the_class_bucket() {
    let mut c = claim(ObjectBucketClaimSpec {
        storage_class_name: "buckets".into(),
        ..Default::default()
    });
    prepare(&mut c, None);
    let mut o = observed(c, class(&[("bucketName", "shared-data")], None));
    assert_eq!(
        next_step(&o),
        Step::CreateObjectBucket {
            bucket_name: "shared-data".into(),
            origin: BucketOrigin::Brownfield,
            reclaim_policy: ReclaimPolicy::Delete
        }
    );
    o.ob = Some(reserved(ob_for(
        &o.claim,
        "shared-data",
        Some("brownfield"),
    )));
    assert_eq!(
        next_step(&o),
        Step::ObtainAccess {
            bucket_name: "shared-data".into(),
            origin: BucketOrigin::Brownfield
        }
    );
}

pub(super) fn deleting(mut o: Observed) -> Observed {
    o.claim.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::now()));
    o
}

#[test]
fn deletion_with_reclaim_delete_deletes_then_removes_the_finalizer() {
    let mut o = deleting(bound_state());
    if let Some(ob) = o.ob.as_mut() {
        ob.spec.reclaim_policy = ReclaimPolicy::Delete;
    }
    assert_eq!(
        next_step(&o),
        Step::Teardown {
            delete_bucket: true
        }
    );
    o.torn_down = true;
    assert_eq!(next_step(&o), Step::DeleteObjectBucket);
    o.ob = None;
    // The Secret and ConfigMap are the garbage collector's, once the claim
    // is gone.
    assert_eq!(next_step(&o), Step::RemoveClaimFinalizer);
}

#[test]
fn deletion_releases_children_that_older_versions_gave_the_finalizer() {
    let mut o = deleting(bound_state());
    o.torn_down = true;
    o.ob = None;
    o.secret = Some(older_child_of(&o.claim));
    o.config_map = Some(older_child_of(&o.claim));
    assert_eq!(next_step(&o), Step::ReleaseSecret);
    o.secret = Some(child_of(&o.claim, true));
    assert_eq!(next_step(&o), Step::ReleaseConfigMap);
    o.config_map = None;
    assert_eq!(next_step(&o), Step::RemoveClaimFinalizer);
    // `--cascade=orphan`: the collector stripped the owner references first.
    let mut orphaned = older_child_of(&o.claim);
    orphaned.owner_references = None;
    o.secret = Some(orphaned.clone());
    assert_eq!(next_step(&o), Step::ReleaseSecret);
    // Someone else's object of that name (no label) is left alone.
    orphaned.labels = None;
    o.secret = Some(orphaned);
    assert_eq!(next_step(&o), Step::RemoveClaimFinalizer);
}

#[test]
fn deletion_with_reclaim_retain_revokes_and_releases() {
    let mut o = deleting(bound_state());
    if let Some(ob) = o.ob.as_mut() {
        ob.spec.reclaim_policy = ReclaimPolicy::Retain;
    }
    assert_eq!(
        next_step(&o),
        Step::Teardown {
            delete_bucket: false
        }
    );
    o.torn_down = true;
    assert_eq!(next_step(&o), Step::ReleaseObjectBucket);
    // After a crash: Released already, so no second teardown.
    let mut again = deleting(bound_state());
    let ob = again.ob.as_mut().expect("ob");
    ob.spec.reclaim_policy = ReclaimPolicy::Retain;
    ob.status = Some(ObjectBucketStatus {
        phase: Some(BucketPhase::Released),
    });
    ob.metadata.finalizers = None;
    assert_eq!(next_step(&again), Step::RemoveClaimFinalizer);
    again.secret = Some(older_child_of(&again.claim));
    assert_eq!(next_step(&again), Step::ReleaseSecret);
}

#[test]
fn brownfield_deletion_only_revokes() {
    let mut o = deleting(bound_state());
    o.ob = Some(ob_for(&o.claim, "shared-data", Some("brownfield")));
    assert_eq!(
        next_step(&o),
        Step::Teardown {
            delete_bucket: false
        }
    );
}

#[test]
fn unknown_origin_with_the_class_gone_is_treated_as_brownfield() {
    let mut o = deleting(bound_state());
    o.ob = Some(ob_for(&o.claim, "photos-abcd1234", None));
    o.class = ClassState::NotFound("buckets".into());
    assert_eq!(
        next_step(&o),
        Step::Teardown {
            delete_bucket: false
        }
    );
}

#[test]
fn deletion_after_a_crash_before_the_object_bucket_tears_down_by_name() {
    let mut c = generated_claim();
    prepare(&mut c, Some("photos-abcd1234"));
    let mut o = deleting(observed(c, class(&[], None)));
    assert_eq!(
        next_step(&o),
        Step::Teardown {
            delete_bucket: true
        }
    );
    o.torn_down = true;
    assert_eq!(next_step(&o), Step::RemoveClaimFinalizer);
}

#[test]
fn deletion_of_a_never_prepared_claim_touches_nothing() {
    let o = deleting(observed(generated_claim(), class(&[], None)));
    assert_eq!(next_step(&o), Step::Done);
}

#[test]
fn a_schema_that_drops_objectbucketname_does_not_loop() {
    let mut o = bound_state();
    o.claim.spec.object_bucket_name = None;
    assert_eq!(next_step(&o), Step::BindClaim);
    o.bind_pruned = true;
    assert_eq!(next_step(&o), Step::Done);
}

#[test]
fn a_stale_view_of_a_deleted_bound_claim_does_not_tear_down_twice() {
    // The ObjectBucket is gone because teardown finished; the cache still
    // shows the claim with its finalizer.
    let mut o = deleting(bound_state());
    o.ob = None;
    o.secret = None;
    o.config_map = None;
    assert_eq!(next_step(&o), Step::RemoveClaimFinalizer);
}

#[test]
fn takeover_with_an_unknown_class_does_not_guess_the_origin() {
    let mut o = bound_state();
    o.class = ClassState::NotFound("buckets".into());
    let mut ob = ob_for(&o.claim, "photos-abcd1234", None);
    ob.status = Some(ObjectBucketStatus {
        phase: Some(BucketPhase::Bound),
    });
    o.ob = Some(ob);
    // The applied config is recorded (the claim's, as provisioned); the
    // class parameters cannot be, with the class gone; the origin is not
    // guessed.
    assert_eq!(
        next_step(&o),
        Step::RecordObjectBucket {
            records: vec![(APPLIED_CONFIG_ANNOTATION, "{}".to_owned())]
        }
    );
    if let Some(ob) = o.ob.as_mut() {
        ob.metadata
            .annotations
            .get_or_insert_default()
            .insert(APPLIED_CONFIG_ANNOTATION.into(), "{}".into());
    }
    assert_eq!(
        next_step(&o),
        Step::Done,
        "label and finalizer present: nothing to adopt"
    );
    if let Some(ob) = o.ob.as_mut() {
        ob.metadata.finalizers = None;
    }
    assert_eq!(next_step(&o), Step::AdoptObjectBucket { origin: None });
}

#[test]
fn a_retain_claim_deleted_before_its_object_bucket_does_not_orphan_its_bucket() {
    let mut c = generated_claim();
    prepare(&mut c, Some("photos-abcd1234"));
    let o = deleting(observed(c, class(&[], Some("Retain"))));
    assert_eq!(
        next_step(&o),
        Step::Teardown {
            delete_bucket: true
        }
    );
    // Brownfield buckets are never deleted.
    let mut c = generated_claim();
    prepare(&mut c, None);
    let o = deleting(observed(
        c,
        class(&[("bucketName", "shared")], Some("Retain")),
    ));
    assert_eq!(
        next_step(&o),
        Step::Teardown {
            delete_bucket: false
        }
    );
}

#[test]
fn only_a_claim_protected_for_the_first_time_gets_its_object_bucket_name_at_prepare() {
    // A claim an older version prepared (finalizer, no objectBucketName)
    // that lacks the label: prepared again, without the name, which comes
    // at bind: that version may have provisioned before its ObjectBucket.
    let mut c = generated_claim();
    prepare(&mut c, Some("photos-abcd1234"));
    c.metadata.labels = None;
    let mut o = observed(c, class(&[], None));
    assert_eq!(
        next_step(&o),
        Step::PrepareClaim {
            generate_from: None,
            bind_to: None
        }
    );
    prepare(&mut o.claim, Some("photos-abcd1234"));
    o.ob = Some(ob_for(&o.claim, "photos-abcd1234", Some("greenfield")));
    o.secret = Some(child_of(&o.claim, true));
    o.config_map = Some(child_of(&o.claim, true));
    assert_eq!(next_step(&o), Step::BindClaim);
    // A name the user wrote is kept.
    let mut c = generated_claim();
    c.spec.generate_bucket_name = None;
    c.spec.bucket_name = Some("mine".into());
    c.spec.object_bucket_name = Some("obc-mine".into());
    assert_eq!(
        next_step(&observed(c, class(&[], None))),
        Step::PrepareClaim {
            generate_from: None,
            bind_to: None
        }
    );
}

#[test]
fn a_claim_of_this_version_deleted_before_its_reservation_tears_nothing_down_by_name() {
    // Crash after PrepareClaim (or the name's Lease), then the claim is
    // deleted: no ObjectBucket was reserved, so no provisioner call was
    // made, and spec.objectBucketName (written with the finalizer) says so.
    let mut c = generated_claim();
    prepare_now(&mut c, Some("photos-abcd1234"));
    let mut o = deleting(observed(c, class(&[], Some("Retain"))));
    assert_eq!(next_step(&o), Step::RemoveClaimFinalizer);
    o.name_records = true;
    assert_eq!(
        next_step(&o),
        Step::ReleaseBucketName {
            bucket_name: "photos-abcd1234".into()
        }
    );
}

#[test]
fn the_generation_is_held_only_for_a_bucket_made_for_the_claim() {
    // Prepared by this version, reserved, its config edited before the
    // provisioner ran: spec.objectBucketName is set, yet nothing is bound.
    let mut c = generated_claim();
    prepare_now(&mut c, Some("photos-abcd1234"));
    let mut o = observed(c, class(&[], None));
    o.ob = Some(reserved(ob_for(
        &o.claim,
        "photos-abcd1234",
        Some("greenfield"),
    )));
    o.claim
        .spec
        .additional_config
        .get_or_insert_default()
        .insert("maxSize".into(), "1Gi".into());
    assert!(!records::holds_generation(&o));
    // Completed: the bucket is the claim's, and its config is not applied.
    o.ob = o.ob.take().map(|mut ob| {
        if let Some(a) = ob.metadata.annotations.as_mut() {
            a.remove(crate::obc::api::RESERVED_ANNOTATION);
        }
        ob
    });
    assert!(records::holds_generation(&o));
}

#[test]
fn a_claim_that_lost_the_race_for_its_object_bucket_name_is_told_to_be_created_again() {
    // "a-b"/"c" and "a"/"b-c" prepared at once, both recording obc-a-b-c;
    // the other created it first. The recorded name cannot move.
    let mut c = generated_claim();
    prepare_now(&mut c, Some("photos-abcd1234"));
    let mut o = observed(c, class(&[], None));
    let mut theirs = ob_for(&o.claim, "theirs-abcd1234", Some("greenfield"));
    if let Some(r) = theirs.spec.claim_ref.as_mut() {
        r.namespace = Some("team-x".into());
        r.name = Some("y".into());
        r.uid = Some("their-uid".into());
    }
    o.ob = Some(theirs);
    match next_step(&o) {
        Step::Reject(p) => {
            assert_eq!(p.reason, "ObjectBucketTaken");
            assert!(p.message.contains("create it again"), "{}", p.message);
            assert!(
                !p.message.contains("team-x"),
                "names no other tenant's claim"
            );
        }
        other => panic!("expected a rejection, got {other:?}"),
    }
}

#[test]
fn the_scans_over_compact_caches_read_what_the_full_objects_say() {
    use crate::obc::api::GENERATED_NAME_ANNOTATION;
    use crate::obc::{CachedBucket, CachedClaim};
    let annotated = |value: &str| {
        let mut c = generated_claim();
        c.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(GENERATED_NAME_ANNOTATION.into(), value.into());
        c
    };
    let named = claim(ObjectBucketClaimSpec {
        storage_class_name: "buckets".into(),
        bucket_name: Some("fixed".into()),
        ..Default::default()
    });
    for c in [
        generated_claim(),
        annotated("photos-abc"),
        annotated(""),
        named,
    ] {
        let cached = CachedClaim::from(c.clone());
        assert_eq!(
            cached_fixed_bucket_name(&cached),
            fixed_bucket_name(&c),
            "{c:?}"
        );
    }
    let ob = ob_for(&generated_claim(), "photos-abc", Some("greenfield"));
    let mut empty = ob.clone();
    empty
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(crate::obc::api::RESERVED_ANNOTATION.into(), String::new());
    for ob in [ob.clone(), reserved(ob), empty] {
        let cached = CachedBucket::from(ob.clone());
        assert_eq!(cached_is_reserved(&cached), is_reserved(&ob), "{ob:?}");
    }
}
