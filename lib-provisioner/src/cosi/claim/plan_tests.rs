use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use super::plan::{DRIVER_GRACE, Observed, Step, bucket_name, looks_at_bucket, next_step};
use crate::cosi::api::*;
use crate::cosi::plan::Next;

const UID: &str = "0d8f9bd2-4bd8-4d4c-9b5b-6c7a0f6b2d11";

fn claim(dynamic: bool) -> BucketClaim {
    let spec = if dynamic {
        BucketClaimSpec {
            bucket_class_name: Some("gold".into()),
            ..Default::default()
        }
    } else {
        BucketClaimSpec {
            existing_bucket_name: Some("static-1".into()),
            ..Default::default()
        }
    };
    let mut c = BucketClaim::new("photos", spec);
    c.metadata.namespace = Some("shop".into());
    c.metadata.uid = Some(UID.into());
    c
}

fn prepared(dynamic: bool) -> BucketClaim {
    let mut c = claim(dynamic);
    c.metadata.finalizers = Some(vec![FINALIZER.into()]);
    c
}

fn class(policy: BucketDeletionPolicy) -> BucketClass {
    BucketClass::new(
        "gold",
        BucketClassSpec {
            driver_name: "s3.example.com".into(),
            deletion_policy: policy,
            parameters: None,
        },
    )
}

fn bucket_of(c: &BucketClaim, uid: Option<&str>) -> Bucket {
    let mut b = super::plan::new_bucket(
        c,
        &class(BucketDeletionPolicy::Delete),
        &bucket_name(c).expect("name"),
    );
    b.spec.bucket_claim_ref.uid = uid.map(Into::into);
    b
}

fn ready(mut b: Bucket) -> Bucket {
    b.status = Some(BucketStatus {
        ready_to_use: true,
        bucket_id: Some("bc-x".into()),
        protocols: Some(vec![ObjectProtocol::S3]),
        ..Default::default()
    });
    b
}

fn observed(claim: BucketClaim, bucket: Option<Bucket>) -> Observed {
    Observed {
        claim,
        bucket,
        class: Some(class(BucketDeletionPolicy::Delete)),
        access: None,
        now: Timestamp::UNIX_EPOCH,
    }
}

fn bound(mut c: BucketClaim) -> BucketClaim {
    let name = bucket_name(&c).expect("name");
    c.status = Some(BucketClaimStatus {
        bound_bucket_name: Some(name),
        ..Default::default()
    });
    c
}

fn deleting(mut c: BucketClaim) -> BucketClaim {
    c.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::now()));
    c
}

#[test]
fn a_dynamic_claim_gets_its_bucket_named_after_its_uid() {
    assert_eq!(
        next_step(&observed(claim(true), None)),
        Next::Step(Step::AddFinalizer)
    );
    let Next::Step(Step::CreateBucket(b)) = next_step(&observed(prepared(true), None)) else {
        panic!("expected CreateBucket");
    };
    assert_eq!(
        b.metadata.name.as_deref(),
        Some(format!("bc-{UID}").as_str())
    );
    assert_eq!(b.spec.bucket_claim_ref.uid.as_deref(), Some(UID));
    assert_eq!(b.spec.driver_name, "s3.example.com");
    assert!(b.metadata.finalizers.is_none(), "the driver adds its own");
}

/// The pass does not read the Bucket of a live claim without the
/// finalizer: whatever that Bucket is, the plan protects the claim first.
#[test]
fn a_live_claim_without_the_finalizer_is_protected_whatever_its_bucket() {
    let claims = [true, false].map(claim);
    let bound_ones = [true, false].map(|d| bound(claim(d)));
    for c in claims.into_iter().chain(bound_ones) {
        assert!(!looks_at_bucket(&c));
        let foreign = {
            let mut b = bucket_of(&c, Some("another-uid"));
            b.spec.bucket_claim_ref.namespace = "elsewhere".into();
            b
        };
        let buckets = [
            None,
            Some(bucket_of(&c, None)),
            Some(ready(bucket_of(&c, Some(UID)))),
            Some(foreign),
        ];
        for bucket in buckets {
            let mut o = observed(c.clone(), bucket);
            assert_eq!(next_step(&o), Next::Step(Step::AddFinalizer));
            o.class = None;
            assert_eq!(next_step(&o), Next::Step(Step::AddFinalizer));
        }
    }
    assert!(looks_at_bucket(&prepared(true)));
    assert!(looks_at_bucket(&deleting(claim(true))));
}

#[test]
fn a_missing_class_waits() {
    let mut o = observed(prepared(true), None);
    o.class = None;
    assert!(
        matches!(next_step(&o), Next::Wait(m) if m.contains("BucketClass gold does not exist"))
    );
}

#[test]
fn then_binding_then_the_buckets_status() {
    let c = prepared(true);
    let b = bucket_of(&c, Some(UID));
    assert_eq!(
        next_step(&observed(c.clone(), Some(b.clone()))),
        Next::Step(Step::RecordBinding)
    );
    let c = bound(c);
    assert!(
        matches!(next_step(&observed(c.clone(), Some(b.clone()))), Next::Wait(m) if m.contains("waiting for driver s3.example.com"))
    );
    assert_eq!(
        next_step(&observed(c.clone(), Some(ready(b.clone())))),
        Next::Step(Step::CopyBucketStatus {
            ready: true,
            protocols: Some(vec![ObjectProtocol::S3])
        })
    );
    let mut done = c;
    done.status = Some(BucketClaimStatus {
        bound_bucket_name: bucket_name(&done),
        ready_to_use: true,
        protocols: Some(vec![ObjectProtocol::S3]),
        error: None,
    });
    assert_eq!(next_step(&observed(done, Some(ready(b)))), Next::Done);
}

/// Issue 37: the first moments of a driver's wait are not shown (two
/// writes per claim); a longer wait, or one with the driver's error, is.
#[test]
fn a_new_buckets_wait_for_its_driver_is_shown_only_once_it_lasts() {
    let c = bound(prepared(true));
    let created = Timestamp::from_second(1_000).expect("time");
    let at = |b: &Bucket, seconds: i64| {
        let mut o = observed(c.clone(), Some(b.clone()));
        o.now = created + SignedDuration::from_secs(seconds);
        next_step(&o)
    };
    let waits = |next: Next<Step>| matches!(next, Next::Wait(m) if m.contains("waiting for driver s3.example.com"));
    let mut b = bucket_of(&c, Some(UID));
    b.metadata.creation_timestamp = Some(Time(created));
    assert_eq!(at(&b, 0), Next::Pending(DRIVER_GRACE));
    let two = Duration::from_secs(2);
    assert_eq!(at(&b, 2), Next::Pending(DRIVER_GRACE - two));
    assert_eq!(at(&b, -60), Next::Pending(DRIVER_GRACE), "a clock behind");
    assert!(waits(at(&b, 5)) && waits(at(&b, 3600)));
    let mut stale = observed(c.clone(), Some(b.clone()));
    stale.now = created;
    if let Some(s) = stale.claim.status.as_mut() {
        s.error = Some(TimestampedError::now("BucketClass gold does not exist"));
    }
    assert!(
        matches!(next_step(&stale), Next::Wait(m) if m.contains("waiting for driver")),
        "an earlier error shown is replaced at once: it is no longer so"
    );
    b.status = Some(BucketStatus {
        error: Some(TimestampedError::now("the store is full")),
        ..Default::default()
    });
    assert!(
        matches!(at(&b, 0), Next::Wait(m) if m.ends_with(": the store is full")),
        "the driver's error is shown at once"
    );
}

#[test]
fn a_static_claim_binds_a_reserved_bucket_and_no_other() {
    let c = prepared(false);
    assert!(
        matches!(next_step(&observed(c.clone(), None)), Next::Wait(m) if m.contains("administrator must create it"))
    );
    let unbound = bucket_of(&c, None);
    assert_eq!(
        next_step(&observed(c.clone(), Some(unbound.clone()))),
        Next::Step(Step::BindBucket)
    );
    let mut other = unbound.clone();
    other.spec.bucket_claim_ref.namespace = "other".into();
    assert!(
        matches!(next_step(&observed(c.clone(), Some(other))), Next::Refuse(m) if m.contains("Bucket static-1 is not available to this claim"))
    );
    let earlier = bucket_of(&c, Some("1d8f9bd2-4bd8-4d4c-9b5b-6c7a0f6b2d11"));
    assert!(
        matches!(next_step(&observed(c, Some(earlier))), Next::Refuse(m) if m.contains("never bound again"))
    );
}

/// Issue 36, item 7: a refusal names nothing of another namespace.
#[test]
fn a_refusal_names_no_other_namespaces_claim() {
    let c = prepared(false);
    let mut other = bucket_of(&c, None);
    other.spec.bucket_claim_ref.namespace = "team-b".into();
    other.spec.bucket_claim_ref.name = "x-private".into();
    let Next::Refuse(m) = next_step(&observed(c, Some(other))) else {
        panic!("refused");
    };
    assert!(!m.contains("team-b") && !m.contains("x-private"), "{m}");
}

#[test]
fn a_bound_claim_whose_bucket_vanished_is_not_bound_again() {
    let c = bound(prepared(true));
    assert!(matches!(next_step(&observed(c, None)), Next::Refuse(m) if m.contains("was deleted")));
}

#[test]
fn missing_protocols_are_refused() {
    let mut c = bound(prepared(true));
    c.spec.protocols = Some(vec![ObjectProtocol::Gcs]);
    let b = ready(bucket_of(&c, Some(UID)));
    assert!(
        matches!(next_step(&observed(c, Some(b))), Next::Refuse(m) if m.contains("does not support protocol GCS"))
    );
}

#[test]
fn deletion_releases_then_deletes_by_policy() {
    let c = deleting(bound(prepared(true)));
    let b = ready(bucket_of(&c, Some(UID)));
    assert_eq!(
        next_step(&observed(c.clone(), Some(b.clone()))),
        Next::Step(Step::ReleaseBucket)
    );
    let mut released = b.clone();
    released.metadata.annotations = Some(
        [(
            BUCKETCLAIM_BEING_DELETED_ANNOTATION.to_owned(),
            String::new(),
        )]
        .into(),
    );
    assert_eq!(
        next_step(&observed(c.clone(), Some(released.clone()))),
        Next::Step(Step::DeleteBucket)
    );
    let mut going = released.clone();
    let deleted = Timestamp::from_second(1_000).expect("time");
    going.metadata.deletion_timestamp = Some(Time(deleted));
    let mut o = observed(c.clone(), Some(going));
    o.now = deleted + SignedDuration::from_secs(1);
    let four = DRIVER_GRACE - Duration::from_secs(1);
    assert_eq!(next_step(&o), Next::Pending(four), "the driver's moment");
    o.now = deleted + SignedDuration::from_secs(5);
    assert!(matches!(next_step(&o), Next::Wait(m) if m.contains("to delete Bucket")));
    let refused = o
        .bucket
        .as_mut()
        .expect("Bucket")
        .status
        .as_mut()
        .expect("status");
    refused.error = Some(TimestampedError::now("the bucket is not empty"));
    o.now = deleted;
    assert!(
        matches!(next_step(&o), Next::Wait(m) if m.ends_with("to delete Bucket bc-0d8f9bd2-4bd8-4d4c-9b5b-6c7a0f6b2d11: the bucket is not empty")),
        "the driver's reason is shown at once"
    );
    assert_eq!(
        next_step(&observed(c.clone(), None)),
        Next::Step(Step::RemoveFinalizer)
    );
    let mut retained = released;
    retained.spec.deletion_policy = BucketDeletionPolicy::Retain;
    assert_eq!(
        next_step(&observed(c, Some(retained))),
        Next::Step(Step::RemoveFinalizer)
    );
}

#[test]
fn deletion_waits_for_its_accesses_and_marks_not_ready_first() {
    let mut c = deleting(bound(prepared(true)));
    if let Some(s) = c.status.as_mut() {
        s.ready_to_use = true;
    }
    let b = ready(bucket_of(&c, Some(UID)));
    assert_eq!(
        next_step(&observed(c.clone(), Some(b.clone()))),
        Next::Step(Step::MarkNotReady)
    );
    if let Some(s) = c.status.as_mut() {
        s.ready_to_use = false;
    }
    let mut o = observed(c, Some(b));
    o.access = Some("reader".into());
    assert!(matches!(next_step(&o), Next::Wait(m) if m.contains("BucketAccess reader")));
}

#[test]
fn deleting_a_static_claim_leaves_a_bucket_it_never_bound() {
    let c = deleting(prepared(false));
    let b = bucket_of(&c, None);
    assert_eq!(
        next_step(&observed(c, Some(b))),
        Next::Step(Step::RemoveFinalizer)
    );
}

/// Issue 36, item 2: the Bucket made for a claim carries no CRD-only
/// annotation.
#[test]
fn a_new_bucket_has_no_annotations() {
    let c = prepared(true);
    let b = super::plan::new_bucket(&c, &class(BucketDeletionPolicy::Delete), "bc-x");
    assert_eq!(b.metadata.annotations, None);
}
