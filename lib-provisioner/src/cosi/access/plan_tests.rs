use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};

use super::bind_plan::{self, ClaimSeen};
use super::grant_plan::{self, Step as G};
use super::owner::{Owner, owner};
use crate::core::provisioner::{AccessGrant, Credentials, StoreEndpoint};
use crate::cosi::api::*;
use crate::cosi::plan::Next;

const CLAIM_UID: &str = "0d8f9bd2-4bd8-4d4c-9b5b-6c7a0f6b2d11";
const ACCESS_UID: &str = "2d8f9bd2-4bd8-4d4c-9b5b-6c7a0f6b2d11";
const DRIVER: &str = "s3.example.com";

fn entry(claim: &str, mode: BucketAccessMode) -> BucketClaimAccess {
    BucketClaimAccess {
        bucket_claim_name: claim.into(),
        access_mode: mode,
        access_secret_name: format!("{claim}-creds"),
    }
}

fn access(entries: Vec<BucketClaimAccess>) -> BucketAccess {
    let mut a = BucketAccess::new(
        "reader",
        BucketAccessSpec {
            bucket_claims: entries,
            bucket_access_class_name: "rw".into(),
            protocol: ObjectProtocol::S3,
            service_account_name: None,
        },
    );
    a.metadata.namespace = Some("shop".into());
    a.metadata.uid = Some(ACCESS_UID.into());
    a.metadata.finalizers = Some(vec![FINALIZER.into()]);
    a
}

fn class(spec: impl FnOnce(&mut BucketAccessClassSpec)) -> BucketAccessClass {
    let mut s = BucketAccessClassSpec {
        driver_name: DRIVER.into(),
        authentication_type: AuthenticationType::Key,
        parameters: None,
        disallowed_bucket_access_modes: None,
        multi_bucket_access: None,
    };
    spec(&mut s);
    BucketAccessClass::new("rw", s)
}

/// A ready claim `name` in `shop` with its Bucket, bound by UID.
fn seen(name: &str) -> ClaimSeen {
    let mut c = BucketClaim::new(
        name,
        BucketClaimSpec {
            bucket_class_name: Some("gold".into()),
            ..Default::default()
        },
    );
    c.metadata.namespace = Some("shop".into());
    c.metadata.uid = Some(CLAIM_UID.into());
    c.metadata.annotations = Some(
        [(
            HAS_BUCKETACCESS_REFERENCES_ANNOTATION.to_owned(),
            String::new(),
        )]
        .into(),
    );
    let bucket_name = format!("bc-{CLAIM_UID}");
    c.status = Some(BucketClaimStatus {
        bound_bucket_name: Some(bucket_name.clone()),
        ready_to_use: true,
        protocols: Some(vec![ObjectProtocol::S3]),
        error: None,
    });
    let mut b = Bucket::new(
        &bucket_name,
        BucketSpec {
            driver_name: DRIVER.into(),
            deletion_policy: BucketDeletionPolicy::Delete,
            parameters: None,
            protocols: None,
            bucket_claim_ref: BucketClaimReference {
                name: name.into(),
                namespace: "shop".into(),
                uid: Some(CLAIM_UID.into()),
            },
            existing_bucket_id: None,
        },
    );
    b.status = Some(BucketStatus {
        ready_to_use: true,
        bucket_id: Some(bucket_name),
        ..Default::default()
    });
    ClaimSeen {
        name: name.into(),
        claim: Some(c),
        bucket: Some(b),
    }
}

fn bind(
    a: BucketAccess,
    class: Option<BucketAccessClass>,
    claims: Vec<ClaimSeen>,
) -> Next<bind_plan::Step> {
    bind_plan::next_step(&bind_plan::Observed {
        access: a,
        class,
        claims,
        secrets_held: Vec::new(),
    })
}

#[test]
fn a_valid_access_is_handed_off_with_its_claims_buckets() {
    let next = bind(
        access(vec![entry("photos", BucketAccessMode::ReadOnly)]),
        Some(class(|_| {})),
        vec![seen("photos")],
    );
    let Next::Step(bind_plan::Step::HandOff { buckets, class }) = next else {
        panic!("expected HandOff, got {next:?}")
    };
    assert_eq!(
        buckets,
        vec![AccessedBucket {
            bucket_name: format!("bc-{CLAIM_UID}"),
            bucket_id: format!("bc-{CLAIM_UID}"),
            bucket_claim_name: "photos".into()
        }]
    );
    assert_eq!(class.spec.driver_name, DRIVER);
}

#[test]
fn class_rules_refuse() {
    let a = access(vec![entry("photos", BucketAccessMode::WriteOnly)]);
    let no_write =
        class(|s| s.disallowed_bucket_access_modes = Some(vec![BucketAccessMode::WriteOnly]));
    assert!(
        matches!(bind(a, Some(no_write), vec![seen("photos")]), Next::Refuse(m) if m.contains("does not allow access mode WriteOnly"))
    );
    let two = access(vec![
        entry("photos", BucketAccessMode::ReadWrite),
        entry("logs", BucketAccessMode::ReadWrite),
    ]);
    assert!(
        matches!(bind(two.clone(), Some(class(|_| {})), vec![seen("photos"), seen("logs")]), Next::Refuse(m) if m.contains("one bucket per BucketAccess"))
    );
    let multi = class(|s| s.multi_bucket_access = Some(MultiBucketAccess::MultipleBuckets));
    assert!(matches!(
        bind(two, Some(multi), vec![seen("photos"), seen("logs")]),
        Next::Step(bind_plan::Step::HandOff { .. })
    ));
    let sa = class(|s| s.authentication_type = AuthenticationType::ServiceAccount);
    assert!(
        matches!(bind(access(vec![entry("photos", BucketAccessMode::ReadWrite)]), Some(sa), vec![seen("photos")]), Next::Refuse(m) if m.contains("serviceAccountName"))
    );
}

#[test]
fn a_claim_bound_elsewhere_gives_nothing() {
    let a = access(vec![entry("photos", BucketAccessMode::ReadWrite)]);
    let mut other_ns = seen("photos");
    if let Some(b) = other_ns.bucket.as_mut() {
        b.spec.bucket_claim_ref.namespace = "victim".into();
    }
    assert!(
        matches!(bind(a.clone(), Some(class(|_| {})), vec![other_ns]), Next::Refuse(m) if m.contains("is not bound to BucketClaim shop/photos"))
    );
    let mut other_uid = seen("photos");
    if let Some(b) = other_uid.bucket.as_mut() {
        b.spec.bucket_claim_ref.uid = Some(ACCESS_UID.into());
    }
    assert!(matches!(
        bind(a.clone(), Some(class(|_| {})), vec![other_uid]),
        Next::Refuse(_)
    ));
    let mut lying = seen("photos");
    if let Some(c) = lying.claim.as_mut() {
        c.status.as_mut().expect("status").bound_bucket_name = Some("someone-elses".into());
    }
    assert!(
        matches!(bind(a, Some(class(|_| {})), vec![lying]), Next::Refuse(m) if m.contains("not its Bucket"))
    );
}

#[test]
fn missing_or_unready_claims_wait() {
    let a = access(vec![entry("photos", BucketAccessMode::ReadWrite)]);
    let missing = ClaimSeen {
        name: "photos".into(),
        claim: None,
        bucket: None,
    };
    assert!(
        matches!(bind(a.clone(), Some(class(|_| {})), vec![missing]), Next::Wait(m) if m.contains("does not exist in namespace shop"))
    );
    let mut unready = seen("photos");
    if let Some(c) = unready.claim.as_mut() {
        c.status.as_mut().expect("status").ready_to_use = false;
    }
    assert!(matches!(
        bind(a.clone(), Some(class(|_| {})), vec![unready]),
        Next::Wait(_)
    ));
    assert!(
        matches!(bind(a, None, vec![seen("photos")]), Next::Wait(m) if m.contains("BucketAccessClass rw does not exist"))
    );
}

fn handed_off(mut a: BucketAccess) -> BucketAccess {
    a.status = Some(BucketAccessStatus {
        accessed_buckets: Some(vec![AccessedBucket {
            bucket_name: format!("bc-{CLAIM_UID}"),
            bucket_id: format!("bc-{CLAIM_UID}"),
            bucket_claim_name: "photos".into(),
        }]),
        driver_name: Some(DRIVER.into()),
        authentication_type: Some(AuthenticationType::Key),
        ..Default::default()
    });
    a
}

#[test]
fn ownership_moves_at_the_hand_off_and_back_after_cleanup() {
    let a = access(vec![entry("photos", BucketAccessMode::ReadWrite)]);
    assert_eq!(owner(&a), Owner::Binding);
    let mut a = handed_off(a);
    assert_eq!(owner(&a), Owner::Driver(DRIVER.into()));
    a.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::now()));
    assert_eq!(owner(&a), Owner::Driver(DRIVER.into()));
    a.metadata.annotations = Some(
        [(
            SIDECAR_CLEANUP_FINISHED_ANNOTATION.to_owned(),
            String::new(),
        )]
        .into(),
    );
    assert_eq!(owner(&a), Owner::Binding);
}

fn secret(owner_uid: &str) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some("photos-creds".into()),
            finalizers: Some(vec![FINALIZER.into()]),
            owner_references: Some(vec![OwnerReference {
                uid: owner_uid.into(),
                controller: Some(true),
                ..Default::default()
            }]),
            ..Default::default()
        },
        ..Default::default()
    }
}

fn grant_o(a: BucketAccess, s: Option<Secret>) -> grant_plan::Observed {
    let buckets = vec![seen("photos").bucket];
    grant_plan::Observed {
        access: a,
        buckets,
        secrets: vec![("photos-creds".into(), s)],
        class: Some(class(|_| {})),
        driver: DRIVER.into(),
        grant: None,
        written: BTreeSet::new(),
        revoked: false,
    }
}

fn a_grant() -> AccessGrant {
    AccessGrant::new(
        "acct-1",
        Credentials::new("AK", "SK"),
        StoreEndpoint::new("s3", 1),
    )
}

#[test]
fn the_driver_reserves_grants_records_writes_then_is_ready() {
    let a = handed_off(access(vec![entry("photos", BucketAccessMode::ReadOnly)]));
    assert_eq!(
        grant_plan::next_step(&grant_o(a.clone(), None)),
        Next::Step(G::ReserveSecret("photos-creds".into()))
    );
    let mut o = grant_o(a.clone(), Some(secret(ACCESS_UID)));
    assert_eq!(grant_plan::next_step(&o), Next::Step(G::Grant));
    o.grant = Some(a_grant());
    assert_eq!(
        grant_plan::next_step(&o),
        Next::Step(G::RecordAccount("acct-1".into()))
    );
    o.access.status.as_mut().expect("status").account_id = Some("acct-1".into());
    assert_eq!(
        grant_plan::next_step(&o),
        Next::Step(G::WriteSecret("photos-creds".into()))
    );
    o.written.insert("photos-creds".into());
    assert_eq!(grant_plan::next_step(&o), Next::Step(G::MarkReady));
    o.access.status.as_mut().expect("status").ready_to_use = true;
    assert_eq!(grant_plan::next_step(&o), Next::Done);
    o.grant = None;
    assert_eq!(
        grant_plan::next_step(&o),
        Next::Done,
        "a restart does not grant again"
    );
}

#[test]
fn a_foreign_secret_is_refused_and_left_alone_on_deletion() {
    let a = handed_off(access(vec![entry("photos", BucketAccessMode::ReadWrite)]));
    let foreign = secret("9d8f9bd2-4bd8-4d4c-9b5b-6c7a0f6b2d11");
    assert!(
        matches!(grant_plan::next_step(&grant_o(a.clone(), Some(foreign.clone()))), Next::Refuse(m) if m.contains("does not belong to this BucketAccess"))
    );
    let mut gone = a;
    gone.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::now()));
    assert_eq!(
        grant_plan::next_step(&grant_o(gone, Some(foreign))),
        Next::Step(G::Revoke)
    );
}

#[test]
fn deletion_deletes_our_secrets_then_revokes_then_hands_back() {
    let mut a = handed_off(access(vec![entry("photos", BucketAccessMode::ReadWrite)]));
    a.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::now()));
    let mut o = grant_o(a, Some(secret(ACCESS_UID)));
    assert_eq!(
        grant_plan::next_step(&o),
        Next::Step(G::DeleteSecret("photos-creds".into()))
    );
    let mut s = secret(ACCESS_UID);
    s.metadata.deletion_timestamp = o.access.metadata.deletion_timestamp.clone();
    o.secrets[0].1 = Some(s);
    assert_eq!(
        grant_plan::next_step(&o),
        Next::Step(G::ReleaseSecret("photos-creds".into()))
    );
    o.secrets[0].1 = None;
    assert_eq!(grant_plan::next_step(&o), Next::Step(G::Revoke));
    o.revoked = true;
    assert_eq!(grant_plan::next_step(&o), Next::Step(G::FinishCleanup));
}

#[test]
fn the_driver_checks_the_buckets_it_is_handed() {
    let a = handed_off(access(vec![entry("photos", BucketAccessMode::ReadWrite)]));
    let mut o = grant_o(a, None);
    if let Some(b) = o.buckets[0].as_mut() {
        b.spec.driver_name = "other.example.com".into();
    }
    assert!(
        matches!(grant_plan::next_step(&o), Next::Refuse(m) if m.contains("belongs to another driver"))
    );
    if let Some(b) = o.buckets[0].as_mut() {
        b.spec.driver_name = DRIVER.into();
        b.spec.bucket_claim_ref.namespace = "victim".into();
    }
    assert!(
        matches!(grant_plan::next_step(&o), Next::Refuse(m) if m.contains("not bound to a claim of this namespace"))
    );
}

#[test]
fn a_service_account_class_is_refused_not_given_keys() {
    let mut a = handed_off(access(vec![entry("photos", BucketAccessMode::ReadWrite)]));
    if let Some(s) = a.status.as_mut() {
        s.authentication_type = Some(AuthenticationType::ServiceAccount);
    }
    assert!(matches!(
        grant_plan::next_step(&grant_o(a, None)),
        Next::Refuse(m) if m.contains("authenticationType Key")
    ));
}

/// Issue 36, item 4: the class's rules hold at grant time, against the
/// spec granted, whatever hand-off the status carries (one computed for an
/// object since replaced under the same name, say).
#[test]
fn the_driver_checks_the_class_again_before_it_grants() {
    let wide = handed_off(access(vec![entry("photos", BucketAccessMode::ReadWrite)]));
    let mut o = grant_o(wide, Some(secret(ACCESS_UID)));
    assert_eq!(grant_plan::next_step(&o), Next::Step(G::Grant));
    o.class = Some(class(|s| {
        s.disallowed_bucket_access_modes = Some(vec![BucketAccessMode::ReadWrite]);
    }));
    assert!(
        matches!(grant_plan::next_step(&o), Next::Refuse(m) if m.contains("does not allow access mode ReadWrite"))
    );
    let two = handed_off(access(vec![
        entry("photos", BucketAccessMode::ReadOnly),
        entry("logs", BucketAccessMode::ReadOnly),
    ]));
    let mut two = two;
    if let Some(accessed) = two
        .status
        .as_mut()
        .and_then(|s| s.accessed_buckets.as_mut())
    {
        let mut logs = accessed[0].clone();
        logs.bucket_claim_name = "logs".into();
        accessed.push(logs);
    }
    let mut o = grant_o(two, Some(secret(ACCESS_UID)));
    let mut logs_bucket = seen("photos").bucket;
    if let Some(b) = logs_bucket.as_mut() {
        b.spec.bucket_claim_ref.name = "logs".into();
    }
    o.buckets.push(logs_bucket);
    let mut logs_secret = secret(ACCESS_UID);
    logs_secret.metadata.name = Some("logs-creds".into());
    o.secrets.push(("logs-creds".into(), Some(logs_secret)));
    assert!(
        matches!(grant_plan::next_step(&o), Next::Refuse(m) if m.contains("one bucket per BucketAccess"))
    );
    let mut o = grant_o(
        handed_off(access(vec![entry("photos", BucketAccessMode::ReadOnly)])),
        Some(secret(ACCESS_UID)),
    );
    o.class = Some(class(|s| {
        s.parameters = Some([("endpoint".to_owned(), "http://store-x".to_owned())].into());
    }));
    assert!(
        matches!(grant_plan::next_step(&o), Next::Refuse(m) if m.contains("is not what BucketAccessClass rw says"))
    );
    o.class = None;
    assert!(matches!(grant_plan::next_step(&o), Next::Wait(m) if m.contains("does not exist")));
}

/// Issue 36, item 3: a deleting BucketAccess of a driver this process does
/// not run carries `sidecar-cleanup-finished` (which its owner can write);
/// its finalizer stays while the Secrets that driver reserved remain.
#[test]
fn a_foreign_drivers_cleanup_is_believed_once_its_secrets_are_gone() {
    let mut a = handed_off(access(vec![entry("photos", BucketAccessMode::ReadWrite)]));
    if let Some(s) = a.status.as_mut() {
        s.driver_name = Some("other.example.com".into());
    }
    a.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::now()));
    a.metadata.annotations = Some(
        [(
            SIDECAR_CLEANUP_FINISHED_ANNOTATION.to_owned(),
            String::new(),
        )]
        .into(),
    );
    assert_eq!(owner(&a), Owner::Binding);
    let mut o = bind_plan::Observed {
        access: a,
        class: None,
        claims: vec![],
        secrets_held: vec!["photos-creds".into()],
    };
    assert!(
        matches!(bind_plan::next_step(&o), Next::Wait(m) if m.contains("driver other.example.com") && m.contains("photos-creds"))
    );
    o.secrets_held.clear();
    assert_eq!(
        bind_plan::next_step(&o),
        Next::Step(bind_plan::Step::RemoveFinalizer)
    );
    // Never handed off: nothing was granted, nothing to wait for.
    o.access.status = None;
    o.secrets_held = vec!["photos-creds".into()];
    assert_eq!(
        bind_plan::next_step(&o),
        Next::Step(bind_plan::Step::RemoveFinalizer)
    );
}
