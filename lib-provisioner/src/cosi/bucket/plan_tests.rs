use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::plan::{Observed, Step, next_step};
use crate::core::provisioner::{BucketInfo, StoreEndpoint};
use crate::cosi::api::*;
use crate::cosi::plan::Next;

const UID: &str = "0d8f9bd2-4bd8-4d4c-9b5b-6c7a0f6b2d11";

fn bucket(existing: Option<&str>, uid: Option<&str>) -> Bucket {
    let mut b = Bucket::new(
        &format!("bc-{UID}"),
        BucketSpec {
            driver_name: "s3.example.com".into(),
            deletion_policy: BucketDeletionPolicy::Delete,
            parameters: None,
            protocols: Some(vec![ObjectProtocol::S3]),
            bucket_claim_ref: BucketClaimReference {
                name: "photos".into(),
                namespace: "shop".into(),
                uid: uid.map(Into::into),
            },
            existing_bucket_id: existing.map(Into::into),
        },
    );
    b.metadata.finalizers = Some(vec![FINALIZER.into()]);
    b
}

fn o(bucket: Bucket) -> Observed {
    Observed {
        bucket,
        found: None,
        deleted: false,
        kept: false,
        claim_gone: false,
    }
}

fn recorded(mut b: Bucket) -> Bucket {
    b.status = Some(BucketStatus {
        ready_to_use: true,
        bucket_id: Some("bc-x".into()),
        ..Default::default()
    });
    b
}

fn deleting(mut b: Bucket) -> Bucket {
    b.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::now()));
    b
}

fn released(mut b: Bucket) -> Bucket {
    b.metadata.annotations = Some(
        [(
            BUCKETCLAIM_BEING_DELETED_ANNOTATION.to_owned(),
            String::new(),
        )]
        .into(),
    );
    b
}

#[test]
fn a_dynamic_bucket_is_created_once_then_recorded() {
    let mut fresh = bucket(None, Some(UID));
    fresh.metadata.finalizers = None;
    assert_eq!(next_step(&o(fresh)), Next::Step(Step::AddFinalizer));
    assert_eq!(
        next_step(&o(bucket(None, Some(UID)))),
        Next::Step(Step::Create)
    );
    let mut made = o(bucket(None, Some(UID)));
    made.found = Some(BucketInfo::new(StoreEndpoint::new("s3", 1)));
    assert_eq!(next_step(&made), Next::Step(Step::RecordBucket));
    assert_eq!(
        next_step(&o(recorded(bucket(None, Some(UID))))),
        Next::Done,
        "no second create"
    );
}

#[test]
fn a_static_bucket_is_looked_up_never_created() {
    assert_eq!(
        next_step(&o(bucket(Some("store-b"), None))),
        Next::Step(Step::LookUp)
    );
}

#[test]
fn a_dynamic_bucket_without_a_claim_uid_is_refused() {
    assert!(matches!(next_step(&o(bucket(None, None))), Next::Refuse(_)));
}

#[test]
fn unsupported_protocols_are_refused() {
    let mut b = bucket(None, Some(UID));
    b.spec.protocols = Some(vec![ObjectProtocol::Azure]);
    assert!(matches!(next_step(&o(b)), Next::Refuse(m) if m.contains("Azure")));
}

#[test]
fn a_released_bucket_is_only_marked_not_ready() {
    assert_eq!(
        next_step(&o(released(recorded(bucket(None, Some(UID)))))),
        Next::Step(Step::MarkNotReady)
    );
    assert_eq!(next_step(&o(released(bucket(None, Some(UID))))), Next::Done);
}

#[test]
fn deletion_needs_policy_delete_and_a_released_claim() {
    let mut retain = deleting(released(bucket(None, Some(UID))));
    retain.spec.deletion_policy = BucketDeletionPolicy::Retain;
    assert!(matches!(next_step(&o(retain)), Next::Refuse(m) if m.contains("Retain")));
    assert!(
        matches!(next_step(&o(deleting(bucket(None, Some(UID))))), Next::Refuse(m) if m.contains("still bound"))
    );
    let going = deleting(released(recorded(bucket(None, Some(UID)))));
    assert_eq!(next_step(&o(going)), Next::Step(Step::MarkNotReady));
}

/// Issue 36, item 1: a Bucket whose claim is gone (no binding role saw it
/// go, so nothing released it) follows its policy; the claim is read only
/// for such a deletion.
#[test]
fn a_bucket_whose_claim_is_gone_is_deleted_by_its_policy() {
    let orphan = deleting(recorded(bucket(None, Some(UID))));
    assert!(super::plan::reads_claim(&orphan));
    assert!(!super::plan::reads_claim(&released(orphan.clone())));
    let live = recorded(bucket(None, Some(UID)));
    assert!(!super::plan::reads_claim(&live));
    let gone = Observed {
        claim_gone: true,
        ..o(orphan.clone())
    };
    assert_eq!(next_step(&gone), Next::Step(Step::MarkNotReady));
    let mut retain = orphan;
    retain.spec.deletion_policy = BucketDeletionPolicy::Retain;
    assert!(!super::plan::reads_claim(&retain));
    let gone = Observed {
        claim_gone: true,
        ..o(retain.clone())
    };
    assert_eq!(next_step(&gone), Next::Step(Step::Keep));
    let kept = Observed {
        claim_gone: true,
        kept: true,
        ..o(retain)
    };
    assert!(matches!(next_step(&kept), Next::Refuse(m) if m.contains("Retain")));
}

/// Issue 36, item 2: a Bucket kept under Retain first has the driver
/// record that (once per pass), since its policy may have been Delete when
/// the bucket was made and the store sweep reads only the store's record;
/// a bucket the driver did not make (static, or never recorded) has
/// nothing to record.
#[test]
fn a_kept_bucket_is_recorded_as_kept_once_per_pass_then_refused() {
    let retain = |b: Bucket| {
        let mut b = deleting(released(b));
        b.spec.deletion_policy = BucketDeletionPolicy::Retain;
        b
    };
    let made = retain(recorded(bucket(None, Some(UID))));
    assert_eq!(next_step(&o(made.clone())), Next::Step(Step::Keep));
    let after = Observed {
        kept: true,
        ..o(made)
    };
    assert!(matches!(next_step(&after), Next::Refuse(m) if m.contains("Retain")));
    for not_made in [
        retain(recorded(bucket(Some("shared"), None))),
        retain(bucket(None, Some(UID))),
    ] {
        assert!(matches!(next_step(&o(not_made)), Next::Refuse(m) if m.contains("Retain")));
    }
}

#[test]
fn deletion_deletes_even_an_unrecorded_dynamic_bucket_then_lets_go() {
    let going = deleting(released(bucket(None, Some(UID))));
    assert_eq!(
        next_step(&o(going.clone())),
        Next::Step(Step::Delete),
        "a crash may have kept the id from being recorded"
    );
    let mut done = o(going);
    done.deleted = true;
    assert_eq!(next_step(&done), Next::Step(Step::RemoveFinalizer));
    let never_found = deleting(bucket(Some("store-b"), None));
    assert_eq!(
        next_step(&o(never_found)),
        Next::Step(Step::RemoveFinalizer)
    );
}
