//! After bind: a Bound claim whose config changes, teardown that reads the
//! ObjectBucket's records rather than the (changed or gone) class; and the
//! ObjectBucket names of new claims whose default name is taken.

use std::collections::BTreeMap;

use super::tests::{bound_state, class, deleting, generated_claim, ob_for, observed};
use super::*;
use crate::core::provisioner::{BucketAccess, Credentials, Revocation};
use crate::obc::api::{
    ACCESS_KEY_ANNOTATION, APPLIED_CONFIG_ANNOTATION, CLASS_PARAMETERS_ANNOTATION, ClaimPhase,
    OBJECT_BUCKET_NAME_ANNOTATION, ROTATED_ANNOTATION, ROTATION_PENDING_ANNOTATION,
    ROTATION_PREVIOUS_KEY_ANNOTATION,
};
use crate::obc::reconcile::status;

fn with_config(mut o: Observed, key: &str, value: &str) -> Observed {
    o.claim
        .spec
        .additional_config
        .get_or_insert_default()
        .insert(key.into(), value.into());
    o.claim.metadata.generation = Some(2);
    o
}

fn record(o: &mut Observed, key: &'static str, value: &str) {
    if let Some(ob) = o.ob.as_mut() {
        ob.metadata
            .annotations
            .get_or_insert_default()
            .insert(key.into(), value.into());
    }
}

#[test]
fn a_changed_config_is_applied_before_the_generation_is_observed() {
    let mut o = with_config(bound_state(), "maxSize", "2Gi");
    assert_eq!(next_step(&o), Step::UpdateBucket);
    // Applied and recorded: only then the status takes the generation.
    record(&mut o, APPLIED_CONFIG_ANNOTATION, r#"{"maxSize":"2Gi"}"#);
    assert_eq!(next_step(&o), Step::MarkClaimBound);
    let bound = status::desired(&o.claim, ClaimPhase::Bound, "Provisioned", "ok");
    o.claim.status = Some(bound);
    assert_eq!(next_step(&o), Step::Done);
}

#[test]
fn a_refused_config_settles_its_generation_and_keeps_the_claim_bound() {
    let mut o = with_config(bound_state(), "accessMode", "nonsense");
    let refused = status::with_condition(
        &o.claim,
        o.claim.status.clone().unwrap_or_default(),
        status::CONFIG_APPLIED_CONDITION,
        false,
        "UpdateRefused",
        "no",
    );
    o.claim.status = Some(refused);
    // Not asked again, and the status is not rewritten to claim generation 2.
    assert_eq!(next_step(&o), Step::Done);
    // A new edit (generation 3) is tried again.
    o.claim.metadata.generation = Some(3);
    assert_eq!(next_step(&o), Step::UpdateBucket);
}

#[test]
fn a_passing_update_failure_is_retried() {
    let mut o = with_config(bound_state(), "maxSize", "2Gi");
    let pending = status::with_condition(
        &o.claim,
        o.claim.status.clone().unwrap_or_default(),
        status::CONFIG_APPLIED_CONDITION,
        false,
        "UpdatePending",
        "store down",
    );
    o.claim.status = Some(pending);
    assert_eq!(next_step(&o), Step::UpdateBucket);
}

#[test]
fn reverting_a_refused_config_clears_the_condition() {
    let mut o = bound_state();
    o.claim.metadata.generation = Some(3);
    let refused = status::with_condition(
        &o.claim,
        o.claim.status.clone().unwrap_or_default(),
        status::CONFIG_APPLIED_CONDITION,
        false,
        "UpdateRefused",
        "no",
    );
    o.claim.status = Some(refused);
    // The spec matches the applied config again: the status is brought up
    // to date (ConfigApplied flips to True there).
    assert_eq!(next_step(&o), Step::MarkClaimBound);
}

#[test]
fn teardown_uses_the_recorded_parameters_not_the_class() {
    let mut o = deleting(bound_state());
    record(
        &mut o,
        CLASS_PARAMETERS_ANNOTATION,
        r#"{"endpoint":"http://a"}"#,
    );
    o.class = class(&[("endpoint", "http://b")], None);
    let expected = BTreeMap::from([("endpoint".to_owned(), "http://a".to_owned())]);
    assert_eq!(
        records::parameters_for(o.ob.as_ref(), &o.class),
        Some(expected)
    );
    // Class gone: the record still answers.
    o.class = ClassState::NotFound("buckets".into());
    assert!(records::parameters_for(o.ob.as_ref(), &o.class).is_some());
    // Not recorded (an older version) and the class gone: unknown.
    if let Some(ob) = o.ob.as_mut() {
        ob.metadata
            .annotations
            .get_or_insert_default()
            .remove(CLASS_PARAMETERS_ANNOTATION);
    }
    assert_eq!(records::parameters_for(o.ob.as_ref(), &o.class), None);
}

#[test]
fn an_edited_storage_class_name_never_lends_its_parameters() {
    let mut o = bound_state();
    if let Some(ob) = o.ob.as_mut() {
        ob.metadata
            .annotations
            .get_or_insert_default()
            .remove(CLASS_PARAMETERS_ANNOTATION);
        ob.spec.storage_class_name = "the-old-class".into();
    }
    // The claim's class ("buckets") is not the one the bucket came from.
    assert_eq!(records::parameters_for(o.ob.as_ref(), &o.class), None);
    assert!(records::missing(o.ob.as_ref().expect("ob"), &o.claim, &o.class).is_empty());
}

fn other_claims_object_bucket(c: &ObjectBucketClaim, ns: &str, name: &str) -> ObjectBucket {
    let mut ob = ob_for(c, "theirs-abcd1234", Some("greenfield"));
    if let Some(r) = ob.spec.claim_ref.as_mut() {
        r.namespace = Some(ns.into());
        r.name = Some(name.into());
        r.uid = Some("their-uid".into());
    }
    ob
}

#[test]
fn a_name_taken_by_a_claim_elsewhere_gets_a_name_of_its_own() {
    // "team"/"photos" and "team-photos"/… would not collide, but
    // "a-b"/"c" and "a"/"b-c" both map to obc-a-b-c.
    let c = generated_claim();
    let mut o = observed(c.clone(), class(&[], None));
    o.ob = Some(other_claims_object_bucket(&c, "team-x", "y"));
    assert_eq!(
        next_step(&o),
        Step::NameObjectBucket {
            name: "obc-uid-1".into()
        }
    );
    // Recorded: the claim's ObjectBucket is the new name from now on.
    o.claim
        .metadata
        .annotations
        .get_or_insert_default()
        .insert(OBJECT_BUCKET_NAME_ANNOTATION.into(), "obc-uid-1".into());
    o.ob = None;
    assert_eq!(object_bucket_name(&o.claim), "obc-uid-1");
    assert!(matches!(next_step(&o), Step::PrepareClaim { .. }));
}

#[test]
fn a_default_name_over_253_characters_is_replaced() {
    let mut c = generated_claim();
    c.metadata.namespace = Some("n".repeat(63));
    c.metadata.name = Some("c".repeat(200));
    let o = observed(c, class(&[], None));
    assert_eq!(
        next_step(&o),
        Step::NameObjectBucket {
            name: "obc-uid-1".into()
        }
    );
}

#[test]
fn bound_and_recreated_claims_keep_the_name_they_have() {
    // Bound: the binding is not moved, whatever the ObjectBucket says.
    let mut o = bound_state();
    let theirs = other_claims_object_bucket(&o.claim, "team-x", "y");
    o.ob = Some(theirs);
    assert!(matches!(next_step(&o), Step::Reject(p) if p.reason == "ObjectBucketTaken"));
    // A claim recreated with the same namespace and name finds its
    // predecessor's retained ObjectBucket: it is told so, not renamed.
    let c = generated_claim();
    let mut o = observed(c.clone(), class(&[], None));
    let mut predecessor = ob_for(&c, "old-abcd1234", Some("greenfield"));
    if let Some(r) = predecessor.spec.claim_ref.as_mut() {
        r.uid = Some("old-uid".into());
    }
    o.ob = Some(predecessor);
    assert!(matches!(next_step(&o), Step::Reject(p) if p.reason == "ObjectBucketTaken"));
}

#[test]
fn an_edited_secret_gets_fresh_credentials_and_an_edited_config_map_is_rewritten() {
    let mut o = bound_state();
    o.secret_drifted = true;
    assert!(matches!(next_step(&o), Step::ObtainAccess { .. }));
    o.access = Some(crate::core::provisioner::BucketAccess::new(
        "s3.local",
        9000,
        crate::core::provisioner::Credentials::new("id", "secret"),
    ));
    // The same key and state as recorded: written at once.
    assert_eq!(next_step(&o), Step::WriteSecret);
    // Another key (or state): recorded before the Secret is written.
    o.access = Some(access("id-2"));
    assert_eq!(next_step(&o), Step::RecordAccess);
    record(&mut o, ACCESS_KEY_ANNOTATION, "id-2");
    assert_eq!(next_step(&o), Step::WriteSecret);

    let mut o = bound_state();
    o.config_map_drifted = true;
    assert_eq!(next_step(&o), Step::WriteConfigMap);
}

#[test]
fn a_child_deleted_by_a_user_is_released_then_written_again() {
    // One of this version is simply gone (no finalizer): written again.
    let mut o = bound_state();
    o.secret = None;
    assert!(matches!(next_step(&o), Step::ObtainAccess { .. }));
    // One an older version wrote with the finalizer is let go first.
    let mut o = bound_state();
    o.secret = Some(super::tests::older_child_of(&o.claim));
    if let Some(s) = o.secret.as_mut() {
        s.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            jiff::Timestamp::now(),
        ));
    }
    // Credentials first (the Secret's data goes with it), then let it go.
    assert!(matches!(next_step(&o), Step::ObtainAccess { .. }));
    o.access = Some(crate::core::provisioner::BucketAccess::new(
        "s3.local",
        9000,
        crate::core::provisioner::Credentials::new("id", "secret"),
    ));
    assert_eq!(next_step(&o), Step::ReleaseSecret);
    o.secret = None;
    assert_eq!(next_step(&o), Step::WriteSecret);

    let mut o = bound_state();
    o.config_map = Some(super::tests::older_child_of(&o.claim));
    if let Some(c) = o.config_map.as_mut() {
        c.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            jiff::Timestamp::now(),
        ));
    }
    assert_eq!(next_step(&o), Step::ReleaseConfigMap);
    o.config_map = None;
    assert_eq!(next_step(&o), Step::WriteConfigMap);
}

fn rotation_asked(o: &mut Observed, value: &str) {
    o.claim
        .metadata
        .annotations
        .get_or_insert_default()
        .insert(crate::obc::api::ROTATE_ANNOTATION.into(), value.into());
}

fn access(key: &str) -> BucketAccess {
    BucketAccess::new("s3.local", 9000, Credentials::new(key, "secret"))
}

/// An ObjectBucket of an older version: no record of the Secret's key.
fn unrecorded(mut o: Observed) -> Observed {
    if let Some(ob) = o.ob.as_mut() {
        ob.metadata
            .annotations
            .get_or_insert_default()
            .remove(ACCESS_KEY_ANNOTATION);
    }
    o
}

/// A Bound claim whose ObjectBucket records that its Secret got `key`.
fn bound_with_key(key: &str) -> Observed {
    let mut o = bound_state();
    record(&mut o, ACCESS_KEY_ANNOTATION, key);
    o
}

fn pending(o: &mut Observed, rotation: &str, previous: &str) {
    record(o, ROTATION_PENDING_ANNOTATION, rotation);
    record(o, ROTATION_PREVIOUS_KEY_ANNOTATION, previous);
}

/// This pass's `rotate` returned `key`.
fn rotated(o: &mut Observed, key: &str) {
    o.access = Some(access(key));
    o.rotated_now = true;
    o.config_map_synced = true;
}

#[test]
fn a_rotation_issues_then_records_then_switches_then_revokes_then_finishes() {
    let mut o = bound_with_key("old");
    rotation_asked(&mut o, "t1");
    // The key replaced is the ObjectBucket's record, not the Secret's word.
    o.secret_key_id = Some("someone-elses".into());
    assert_eq!(
        next_step(&o),
        Step::StartRotation {
            rotation: "t1".into(),
            previous: "old".into()
        }
    );
    pending(&mut o, "t1", "old");
    o.secret_key_id = Some("old".into());
    // Restarted here, or after the provisioner issued (nothing recorded):
    // the record still says the previous key, so issue.
    let rotate = Step::RotateCredentials {
        rotation: "t1".into(),
        previous: "old".into(),
    };
    assert_eq!(next_step(&o), rotate);
    rotated(&mut o, "new");
    assert_eq!(
        next_step(&o),
        Step::RecordAccess,
        "recorded before the switch"
    );
    record(&mut o, ACCESS_KEY_ANNOTATION, "new");
    assert_eq!(next_step(&o), Step::WriteSecret, "switch before revoking");
    o.secret_synced = true;
    o.secret_key_id = Some("new".into());
    let revoke = Step::RevokePreviousCredentials {
        rotation: "t1".into(),
        previous: "old".into(),
    };
    assert_eq!(next_step(&o), revoke);
    o.revocation = Some(Revocation::Revoked);
    assert_eq!(
        next_step(&o),
        Step::FinishRotation {
            rotation: "t1".into(),
            previous: "old".into()
        }
    );
    // Restarted after the switch: revoke again (idempotent), then finish.
    o.revocation = None;
    o.access = None;
    o.rotated_now = false;
    assert_eq!(next_step(&o), revoke);
    // Done: the record ends it; the same value asks for nothing more.
    let mut done = bound_with_key("new");
    rotation_asked(&mut done, "t1");
    done.secret_key_id = Some("new".into());
    record(&mut done, ROTATED_ANNOTATION, "t1");
    assert_eq!(next_step(&done), Step::Done);
    rotation_asked(&mut done, "t2");
    assert!(matches!(next_step(&done), Step::StartRotation { .. }));
}

#[test]
fn a_crash_between_the_record_and_the_switch_issues_again() {
    // The new key is recorded, the Secret still holds the previous one.
    let mut o = bound_with_key("new");
    rotation_asked(&mut o, "t1");
    pending(&mut o, "t1", "old");
    o.secret_key_id = Some("old".into());
    assert!(matches!(next_step(&o), Step::RotateCredentials { previous, .. } if previous == "old"));
    // A tenant writing the recorded key into the Secret only makes the
    // library revoke the claim's own recorded previous key.
    o.secret_key_id = Some("new".into());
    assert!(
        matches!(next_step(&o), Step::RevokePreviousCredentials { previous, .. } if previous == "old")
    );
    // Any other key in the Secret: not switched, issue again.
    o.secret_key_id = Some("someone-elses".into());
    assert!(matches!(next_step(&o), Step::RotateCredentials { .. }));
}

#[test]
fn a_rotation_that_returns_the_previous_key_id_ends_after_writing_its_secret() {
    let mut o = bound_with_key("same");
    rotation_asked(&mut o, "t1");
    pending(&mut o, "t1", "same");
    o.secret_key_id = Some("same".into());
    rotated(&mut o, "same");
    // The state may have changed: recorded; then the secret is written
    // (the old one may be dead already), then the rotation ends.
    o.access = Some(access("same").with_state("v", "2"));
    assert_eq!(next_step(&o), Step::RecordAccess);
    if let Some(ob) = o.ob.as_mut() {
        ob.spec.additional_state = Some(BTreeMap::from([("v".into(), "2".into())]));
    }
    assert_eq!(next_step(&o), Step::WriteSecret);
    o.secret_synced = true;
    assert!(matches!(
        next_step(&o),
        Step::EndRotation { problem, .. } if problem.reason == "KeyIdUnchanged" && problem.message.contains("\"same\"")
    ));
    // Access from a repair (not rotate) with the same key is no such thing.
    o.rotated_now = false;
    assert!(matches!(next_step(&o), Step::RotateCredentials { .. }));
}

#[test]
fn an_older_object_bucket_records_the_provisioners_answer_before_rotating() {
    // No record of the Secret's key: the Secret's word is not taken.
    let mut o = unrecorded(bound_state());
    rotation_asked(&mut o, "t1");
    o.secret_key_id = Some("someone-elses".into());
    assert!(matches!(next_step(&o), Step::ObtainAccess { .. }));
    o.access = Some(access("mine"));
    assert_eq!(next_step(&o), Step::RecordAccess);
    record(&mut o, ACCESS_KEY_ANNOTATION, "mine");
    assert_eq!(next_step(&o), Step::WriteSecret);
    o.secret_synced = true;
    o.config_map_synced = true;
    o.secret_key_id = Some("mine".into());
    assert_eq!(
        next_step(&o),
        Step::StartRotation {
            rotation: "t1".into(),
            previous: "mine".into()
        }
    );
    // Its class gone, nothing can re-issue: the rotation ends, saying why.
    let mut o = unrecorded(bound_state());
    rotation_asked(&mut o, "t1");
    o.secret_key_id = Some("someone-elses".into());
    o.class = ClassState::NotFound("buckets".into());
    assert!(matches!(
        next_step(&o),
        Step::EndRotation { problem, .. } if problem.reason == "RotationNeedsStorageClass"
    ));
}

#[test]
fn recorded_state_is_replaced_exactly() {
    let mut o = bound_with_key("k");
    if let Some(ob) = o.ob.as_mut() {
        ob.spec.additional_state = Some(BTreeMap::from([
            ("user".into(), "u".into()),
            ("old".into(), "x".into()),
        ]));
    }
    // Same key, a state with a key dropped: recorded again.
    o.access = Some(access("k").with_state("user", "u"));
    o.secret_drifted = true;
    assert_eq!(next_step(&o), Step::RecordAccess);
    if let Some(ob) = o.ob.as_mut() {
        ob.spec.additional_state = Some(BTreeMap::from([("user".into(), "u".into())]));
    }
    assert_eq!(next_step(&o), Step::WriteSecret);
}

#[test]
fn a_refused_config_holds_the_generation_through_a_later_problem() {
    let mut o = with_config(bound_state(), "maxSize", "2Gi");
    let refused = status::with_condition(
        &o.claim,
        o.claim.status.clone().unwrap_or_default(),
        status::CONFIG_APPLIED_CONDITION,
        false,
        "UpdateRefused",
        "no",
    );
    o.claim.status = Some(refused);
    assert!(holds_generation(&o));
    // A problem shown meanwhile keeps observedGeneration (1, not 2).
    let problem = status::desired(
        &o.claim,
        ClaimPhase::Pending,
        "ProvisionerUnavailable",
        "down",
    );
    let shown = status::keeping_observed_generation(&o.claim, problem);
    assert_eq!(shown.observed_generation, Some(1));
    o.claim.status = Some(shown);
    // Once it passes: Bound again, not updated again.
    assert_eq!(next_step(&o), Step::MarkClaimBound);
    let bound = status::desired(&o.claim, ClaimPhase::Bound, "Provisioned", "ok");
    o.claim.status = Some(status::keeping_observed_generation(&o.claim, bound));
    assert_eq!(next_step(&o), Step::Done);
    // Applied (the spec reverted, or a new edit applied): not held.
    record(&mut o, APPLIED_CONFIG_ANNOTATION, r#"{"maxSize":"2Gi"}"#);
    assert!(!holds_generation(&o));
}

/// The request that restores a bound claim's Secret is a re-issue, taken
/// from what its ObjectBucket recorded (issue 25, item 5).
#[test]
fn a_bound_claims_lost_secret_is_reissued_from_its_object_bucket() {
    use crate::obc::reconcile::drift::reissue_request;
    // Read-only at bind; the claim's owner widened it since (refused).
    let mut o = with_config(bound_state(), "accessMode", "read-write");
    record(
        &mut o,
        APPLIED_CONFIG_ANNOTATION,
        r#"{"accessMode":"read-only"}"#,
    );
    record(
        &mut o,
        CLASS_PARAMETERS_ANNOTATION,
        r#"{"endpoint":"at-bind"}"#,
    );
    if let Some(ob) = o.ob.as_mut() {
        ob.spec.additional_state = Some(BTreeMap::from([("user".into(), "u-1".into())]));
    }
    // Edits the old CRD lets through do not move the bucket either.
    o.claim.spec.bucket_name = Some("someone-elses".into());
    o.secret = None;
    assert!(matches!(next_step(&o), Step::ObtainAccess { .. }));
    let req = reissue_request(&o).expect("a bound claim is re-issued");
    assert!(req.reissue);
    assert_eq!(req.bucket_name, "photos-abcd1234");
    assert_eq!(req.additional_config["accessMode"], "read-only");
    assert_eq!(req.parameters["endpoint"], "at-bind");
    assert_eq!(req.additional_state["user"], "u-1");
    assert_eq!(req.claim.uid, "uid-1");
}

#[test]
fn a_claim_taken_over_from_the_go_library_is_reissued_with_its_class() {
    use crate::obc::reconcile::drift::reissue_request;
    // The Go library's ObjectBucket: no label, no records, no origin.
    let mut o = bound_state();
    o.class = class(&[("endpoint", "now")], None);
    let c = o.claim.clone();
    o.ob = Some(ob_for(&c, "go-3c5a4e2f", None));
    if let Some(ob) = o.ob.as_mut() {
        ob.metadata.labels = None;
    }
    o.secret = None;
    let req = reissue_request(&o).expect("taken over: bound by its ObjectBucket");
    assert!(req.reissue);
    assert_eq!(req.bucket_name, "go-3c5a4e2f");
    assert_eq!(req.parameters["endpoint"], "now");
    assert!(req.additional_state.is_empty());
}

#[test]
fn a_claim_not_yet_bound_by_its_object_bucket_gets_a_new_claims_request() {
    use crate::obc::reconcile::drift::reissue_request;
    let base = bound_state();
    // No ObjectBucket yet.
    let mut o = base.clone();
    o.ob = None;
    assert!(reissue_request(&o).is_none());
    // A reservation: the provisioner has not been asked yet.
    let mut o = base.clone();
    if let Some(ob) = o.ob.as_mut() {
        ob.metadata
            .annotations
            .get_or_insert_default()
            .insert(crate::obc::api::RESERVED_ANNOTATION.into(), "true".into());
    }
    assert!(reissue_request(&o).is_none());
    // Another claim's (an earlier one of this name).
    let mut o = base.clone();
    if let Some(r) = o.ob.as_mut().and_then(|ob| ob.spec.claim_ref.as_mut()) {
        r.uid = Some("old-uid".into());
    }
    assert!(reissue_request(&o).is_none());
    // Parameters known from nowhere: the class is gone, none recorded.
    let mut o = base;
    o.class = ClassState::NotFound("buckets".into());
    if let Some(a) =
        o.ob.as_mut()
            .and_then(|ob| ob.metadata.annotations.as_mut())
    {
        a.remove(CLASS_PARAMETERS_ANNOTATION);
    }
    assert!(reissue_request(&o).is_none());
}

#[test]
fn a_due_config_check_runs_after_a_pending_update_and_only_against_a_record() {
    let mut o = bound_state();
    record(&mut o, APPLIED_CONFIG_ANNOTATION, "{}");
    o.config_check_due = true;
    assert_eq!(next_step(&o), Step::CheckConfig);
    // A changed spec is applied first; the check compares with what was.
    let mut changed = with_config(o.clone(), "maxSize", "2Gi");
    assert_eq!(next_step(&changed), Step::UpdateBucket);
    record(
        &mut changed,
        APPLIED_CONFIG_ANNOTATION,
        r#"{"maxSize":"2Gi"}"#,
    );
    assert_eq!(next_step(&changed), Step::CheckConfig);
    // Bound by the Go library or an older version: no record, no check
    // (an empty config would ask the provisioner to remove everything).
    if let Some(ob) = o.ob.as_mut() {
        ob.metadata.annotations = None;
    }
    assert_ne!(next_step(&o), Step::CheckConfig);
}

#[test]
fn a_failed_config_check_keeps_the_claim_unsettled_until_one_passes() {
    let mut o = bound_state();
    record(&mut o, APPLIED_CONFIG_ANNOTATION, "{}");
    let drifted = status::with_condition(
        &o.claim,
        o.claim.status.clone().unwrap_or_default(),
        status::CONFIG_APPLIED_CONDITION,
        false,
        "ConfigDrifted",
        "versioning was suspended on the store and could not be enabled",
    );
    o.claim.status = Some(drifted);
    // Still due (the failed check recorded nothing): checked again first.
    o.config_check_due = true;
    assert_eq!(next_step(&o), Step::CheckConfig);
    // Once a check passes, the condition is brought back to True.
    o.config_check_due = false;
    assert_eq!(next_step(&o), Step::MarkClaimBound);
}
