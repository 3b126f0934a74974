//! COSI (`objectstorage.k8s.io/v1alpha2`) from the library's controller on
//! a real kube-apiserver, with the recording COSI provisioner: claims to
//! ready Buckets (dynamic and static), access Secrets with the modes passed
//! through, refusals shown on the user's objects, and deletion by policy.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, PostParams};
use kube::{Client, ResourceExt};
use lib_provisioner::ControllerBuilder;
use lib_provisioner::cosi::CosiOptions;
use lib_provisioner::cosi::api::*;
use obc_tests::cosi_recording::{CosiCall, CosiRecorder, DRIVER, ENDPOINT, install_cosi_crds};
use obc_tests::recording::{PROVISIONER, RunningController, events_for, wait_event, wait_gone};
use obc_tests::setup::start_with_crds;
use obc_tests::{TestEnv, wait_for};

const T: Duration = Duration::from_secs(30);

async fn setup() -> (TestEnv, Client) {
    let env = start_with_crds()
        .await
        .expect("test environment starts with the OBC CRDs");
    install_cosi_crds(&env).await.expect("COSI CRDs install");
    let client = env.admin_client();
    (env, client)
}

fn start(client: &Client, recorder: &CosiRecorder) -> RunningController {
    let options = CosiOptions::new(DRIVER).expect("driver name");
    RunningController::start_with(
        client.clone(),
        ControllerBuilder::new(PROVISIONER, recorder.clone()).cosi(options),
    )
}

async fn bucket_class(client: &Client, name: &str, policy: BucketDeletionPolicy) {
    bucket_class_of(client, name, DRIVER, policy).await;
}

/// A BucketClass of `driver` (another than the one the tests' controller
/// serves, for a driver that never answers).
async fn bucket_class_of(client: &Client, name: &str, driver: &str, policy: BucketDeletionPolicy) {
    let class = BucketClass::new(
        name,
        BucketClassSpec {
            driver_name: driver.into(),
            deletion_policy: policy,
            parameters: Some(BTreeMap::from([("tier".into(), "gold".into())])),
        },
    );
    Api::<BucketClass>::all(client.clone())
        .create(&PostParams::default(), &class)
        .await
        .expect("BucketClass");
}

async fn access_class(client: &Client, name: &str, edit: impl FnOnce(&mut BucketAccessClassSpec)) {
    let mut spec = BucketAccessClassSpec {
        driver_name: DRIVER.into(),
        authentication_type: AuthenticationType::Key,
        parameters: None,
        disallowed_bucket_access_modes: None,
        multi_bucket_access: None,
    };
    edit(&mut spec);
    Api::<BucketAccessClass>::all(client.clone())
        .create(&PostParams::default(), &BucketAccessClass::new(name, spec))
        .await
        .expect("BucketAccessClass");
}

async fn claim(client: &Client, ns: &str, name: &str, spec: BucketClaimSpec) -> BucketClaim {
    Api::<BucketClaim>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &BucketClaim::new(name, spec))
        .await
        .expect("BucketClaim")
}

fn dynamic(class: &str) -> BucketClaimSpec {
    BucketClaimSpec {
        bucket_class_name: Some(class.into()),
        protocols: Some(vec![ObjectProtocol::S3]),
        ..Default::default()
    }
}

async fn wait_claim_ready(client: &Client, ns: &str, name: &str) -> BucketClaim {
    obc_tests::cosi_recording::wait_claim_ready(client, ns, name, T).await
}

async fn access(
    client: &Client,
    ns: &str,
    name: &str,
    class: &str,
    claims: &[(&str, BucketAccessMode)],
) -> BucketAccess {
    let spec = BucketAccessSpec {
        bucket_claims: claims
            .iter()
            .map(|(c, m)| BucketClaimAccess {
                bucket_claim_name: (*c).into(),
                access_mode: *m,
                access_secret_name: format!("{name}-{c}"),
            })
            .collect(),
        bucket_access_class_name: class.into(),
        protocol: ObjectProtocol::S3,
        service_account_name: None,
    };
    Api::<BucketAccess>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &BucketAccess::new(name, spec))
        .await
        .expect("BucketAccess")
}

async fn wait_access(
    client: &Client,
    ns: &str,
    name: &str,
    what: &str,
    f: impl Fn(&BucketAccessStatus) -> bool,
) -> BucketAccess {
    let api = Api::<BucketAccess>::namespaced(client.clone(), ns);
    let result = wait_for(T, format!("BucketAccess {ns}/{name}: {what}"), || async {
        Ok(api
            .get_opt(name)
            .await?
            .filter(|a| a.status.as_ref().is_some_and(&f)))
    })
    .await;
    match result {
        Ok(a) => a,
        Err(e) => {
            let now = api.get_opt(name).await.ok().flatten();
            panic!(
                "{e:#}; the BucketAccess is {:?}",
                now.and_then(|a| a.status)
            )
        }
    }
}

fn error_of(status: &BucketAccessStatus) -> String {
    status
        .error
        .as_ref()
        .and_then(|e| e.message.clone())
        .unwrap_or_default()
}

async fn secret_data(client: &Client, ns: &str, name: &str) -> BTreeMap<String, String> {
    let secret = Api::<Secret>::namespaced(client.clone(), ns)
        .get(name)
        .await
        .expect("access Secret");
    secret
        .data
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, String::from_utf8(v.0).expect("utf-8")))
        .collect()
}

fn creates(recorder: &CosiRecorder) -> usize {
    recorder
        .calls()
        .iter()
        .filter(|c| matches!(c, CosiCall::CreateBucket(_)))
        .count()
}

#[tokio::test(flavor = "multi_thread")]
async fn claims_get_ready_buckets_and_deletion_follows_the_policy() {
    let (env, client) = setup().await;
    let ns = "cosi-claims";
    env.ensure_namespace(ns).await.expect("namespace");
    let recorder = CosiRecorder::new();
    let controller = start(&client, &recorder);
    bucket_class(&client, "gold", BucketDeletionPolicy::Delete).await;
    bucket_class(&client, "keep", BucketDeletionPolicy::Retain).await;

    // Dynamic: one Bucket bc-<uid>, one create_bucket call.
    let photos = claim(&client, ns, "photos", dynamic("gold")).await;
    let uid = photos.uid().expect("uid");
    let ready = wait_claim_ready(&client, ns, "photos").await;
    let status = ready.status.expect("status");
    assert_eq!(status.bound_bucket_name, Some(format!("bc-{uid}")));
    assert_eq!(status.protocols, Some(vec![ObjectProtocol::S3]));
    assert!(status.error.is_none());
    let buckets = Api::<Bucket>::all(client.clone());
    let bucket = buckets
        .get(&format!("bc-{uid}"))
        .await
        .expect("the claim's Bucket");
    assert_eq!(
        bucket.spec.bucket_claim_ref.uid.as_deref(),
        Some(uid.as_str())
    );
    assert_eq!(
        bucket.spec.parameters.as_ref().map(|p| p["tier"].as_str()),
        Some("gold")
    );
    assert!(bucket.finalizers().contains(&FINALIZER.to_owned()));
    let bs = bucket.status.expect("Bucket status");
    assert_eq!(bs.bucket_id, Some(format!("bc-{uid}")));
    let info = bs.bucket_info.expect("bucketInfo");
    assert_eq!(info[secret_keys::S3_ENDPOINT], ENDPOINT);
    assert_eq!(info[secret_keys::S3_BUCKET_ID], format!("bc-{uid}"));
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        creates(&recorder),
        1,
        "one create_bucket for one Bucket: {:?}",
        recorder.calls()
    );

    // Static: an administrator's Bucket reserved for a claim by name.
    recorder.add_existing("legacy-photos");
    let static_bucket = Bucket::new(
        "legacy-1",
        BucketSpec {
            driver_name: DRIVER.into(),
            deletion_policy: BucketDeletionPolicy::Retain,
            parameters: None,
            protocols: None,
            bucket_claim_ref: BucketClaimReference {
                name: "legacy".into(),
                namespace: ns.into(),
                uid: None,
            },
            existing_bucket_id: Some("legacy-photos".into()),
        },
    );
    buckets
        .create(&PostParams::default(), &static_bucket)
        .await
        .expect("static Bucket");
    let legacy = claim(
        &client,
        ns,
        "legacy",
        BucketClaimSpec {
            existing_bucket_name: Some("legacy-1".into()),
            ..Default::default()
        },
    )
    .await;
    let ready = wait_claim_ready(&client, ns, "legacy").await;
    assert_eq!(
        ready.status.and_then(|s| s.bound_bucket_name).as_deref(),
        Some("legacy-1")
    );
    let bound = buckets.get("legacy-1").await.expect("static Bucket");
    assert_eq!(
        bound.spec.bucket_claim_ref.uid,
        legacy.uid(),
        "bound by UID"
    );
    assert_eq!(
        bound.status.and_then(|s| s.bucket_id).as_deref(),
        Some("legacy-photos")
    );
    assert!(
        recorder
            .calls()
            .contains(&CosiCall::ExistingBucket("legacy-photos".into()))
    );
    assert_eq!(creates(&recorder), 1, "a static Bucket is never created");

    // A claim naming a static Bucket reserved for another claim is refused,
    // without naming that claim.
    claim(
        &client,
        ns,
        "thief",
        BucketClaimSpec {
            existing_bucket_name: Some("legacy-1".into()),
            ..Default::default()
        },
    )
    .await;
    let claims = Api::<BucketClaim>::namespaced(client.clone(), ns);
    wait_for(T, "the thief's refusal", || async {
        let c = claims.get("thief").await?;
        Ok(c.status
            .and_then(|s| s.error)
            .and_then(|e| e.message)
            .filter(|m| m.contains("Bucket legacy-1 is not available to this claim")))
    })
    .await
    .expect("refused");
    let events = wait_event(&client, ns, "thief", |r, n| {
        r == "Refused" && n.contains("not available to this claim")
    })
    .await
    .expect("a Refused Event");
    assert!(
        !events.iter().any(|(_, n)| n.contains("cosi-claims/legacy")),
        "the other claim is not named: {events:?}"
    );

    // Delete: the bucket is deleted, then the Bucket and the claim go.
    claims
        .delete("photos", &DeleteParams::default())
        .await
        .expect("delete claim");
    wait_gone(&claims, "photos", T).await.expect("claim gone");
    wait_gone(&buckets, &format!("bc-{uid}"), T)
        .await
        .expect("Bucket gone");
    assert!(
        recorder
            .calls()
            .contains(&CosiCall::Delete(format!("bc-{uid}")))
    );
    assert!(
        recorder.state().buckets.is_empty(),
        "the bucket is deleted in the store"
    );

    // Retain: the claim goes, the Bucket and the bucket stay, released.
    let kept = claim(&client, ns, "kept", dynamic("keep")).await;
    wait_claim_ready(&client, ns, "kept").await;
    claims
        .delete("kept", &DeleteParams::default())
        .await
        .expect("delete claim");
    wait_gone(&claims, "kept", T).await.expect("claim gone");
    let kept_name = format!("bc-{}", kept.uid().expect("uid"));
    let retained = buckets
        .get(&kept_name)
        .await
        .expect("the Bucket is retained");
    assert!(
        retained
            .annotations()
            .contains_key(BUCKETCLAIM_BEING_DELETED_ANNOTATION)
    );
    assert!(
        recorder.state().buckets.contains_key(&kept_name),
        "the bucket is kept"
    );
    assert!(!recorder.calls().contains(&CosiCall::Delete(kept_name)));
    controller.stop().await.expect("controller stops");
}

#[tokio::test(flavor = "multi_thread")]
async fn accesses_get_secrets_in_their_modes_and_are_revoked_on_deletion() {
    let (env, client) = setup().await;
    let ns = "cosi-access";
    env.ensure_namespace(ns).await.expect("namespace");
    let recorder = CosiRecorder::new();
    let controller = start(&client, &recorder);
    bucket_class(&client, "gold", BucketDeletionPolicy::Delete).await;
    access_class(&client, "multi", |s| {
        s.multi_bucket_access = Some(MultiBucketAccess::MultipleBuckets)
    })
    .await;
    let photos = claim(&client, ns, "photos", dynamic("gold")).await;
    let logs = claim(&client, ns, "logs", dynamic("gold")).await;
    wait_claim_ready(&client, ns, "photos").await;
    wait_claim_ready(&client, ns, "logs").await;
    let photos_bucket = format!("bc-{}", photos.uid().expect("uid"));
    let logs_bucket = format!("bc-{}", logs.uid().expect("uid"));

    let rw = access(
        &client,
        ns,
        "writer",
        "multi",
        &[("photos", BucketAccessMode::ReadWrite)],
    )
    .await;
    let ready = wait_access(&client, ns, "writer", "ready", |s| s.ready_to_use).await;
    let account = format!("ba-{}", rw.uid().expect("uid"));
    let status = ready.status.expect("status");
    assert_eq!(status.account_id.as_deref(), Some(account.as_str()));
    assert_eq!(status.driver_name.as_deref(), Some(DRIVER));
    let data = secret_data(&client, ns, "writer-photos").await;
    assert_eq!(data[secret_keys::S3_BUCKET_ID], photos_bucket);
    assert_eq!(data[secret_keys::S3_ENDPOINT], ENDPOINT);
    assert_eq!(data[secret_keys::S3_ACCESS_KEY_ID], format!("AK-{account}"));
    assert_eq!(
        data[secret_keys::S3_ACCESS_SECRET_KEY],
        format!("SK-{account}")
    );
    assert!(!data[secret_keys::S3_REGION].is_empty());
    assert_eq!(data[secret_keys::S3_ADDRESSING_STYLE], "path");
    let secret = Api::<Secret>::namespaced(client.clone(), ns)
        .get("writer-photos")
        .await
        .expect("Secret");
    let owner = secret.owner_references().first().cloned().expect("owner");
    assert_eq!(
        (owner.uid, owner.controller),
        (rw.uid().expect("uid"), Some(true))
    );
    assert!(secret.finalizers().contains(&FINALIZER.to_owned()));

    // ReadOnly on one bucket, ReadWrite on the other: each mode passed on.
    let ro = access(
        &client,
        ns,
        "reader",
        "multi",
        &[
            ("photos", BucketAccessMode::ReadOnly),
            ("logs", BucketAccessMode::ReadWrite),
        ],
    )
    .await;
    wait_access(&client, ns, "reader", "ready", |s| s.ready_to_use).await;
    let reader_account = format!("ba-{}", ro.uid().expect("uid"));
    let grant = recorder
        .calls()
        .into_iter()
        .find(|c| matches!(c, CosiCall::GrantAccess(a, _) if *a == reader_account))
        .expect("grant_access for the reader");
    assert_eq!(
        grant,
        CosiCall::GrantAccess(
            reader_account.clone(),
            vec![
                (photos_bucket.clone(), "ReadOnly".into()),
                (logs_bucket.clone(), "ReadWrite".into())
            ]
        )
    );
    assert_eq!(
        secret_data(&client, ns, "reader-logs").await[secret_keys::S3_BUCKET_ID],
        logs_bucket
    );
    assert_eq!(
        secret_data(&client, ns, "reader-photos").await[secret_keys::S3_ACCESS_KEY_ID],
        secret_data(&client, ns, "reader-logs").await[secret_keys::S3_ACCESS_KEY_ID],
        "one credential for both buckets"
    );

    // Deletion: Secrets deleted, access revoked, then the BucketAccess goes.
    let accesses = Api::<BucketAccess>::namespaced(client.clone(), ns);
    let secrets = Api::<Secret>::namespaced(client.clone(), ns);
    accesses
        .delete("reader", &DeleteParams::default())
        .await
        .expect("delete");
    wait_gone(&accesses, "reader", T)
        .await
        .expect("BucketAccess gone");
    wait_gone(&secrets, "reader-photos", T)
        .await
        .expect("Secret gone");
    wait_gone(&secrets, "reader-logs", T)
        .await
        .expect("Secret gone");
    assert!(
        recorder
            .calls()
            .contains(&CosiCall::RevokeAccess(reader_account.clone()))
    );
    assert!(!recorder.state().accounts.contains_key(&reader_account));
    assert!(
        recorder.state().accounts.contains_key(&account),
        "the writer keeps its access"
    );

    // A claim's deletion waits for the BucketAccess still naming it.
    let claims = Api::<BucketClaim>::namespaced(client.clone(), ns);
    claims
        .delete("photos", &DeleteParams::default())
        .await
        .expect("delete claim");
    wait_for(T, "the claim to wait for its BucketAccess", || async {
        let c = claims.get("photos").await?;
        Ok(c.status
            .and_then(|s| s.error)
            .and_then(|e| e.message)
            .filter(|m| m.contains("BucketAccess writer still uses this claim")))
    })
    .await
    .expect("waits");
    assert!(
        recorder.state().buckets.contains_key(&photos_bucket),
        "nothing deleted under a live access"
    );
    accesses
        .delete("writer", &DeleteParams::default())
        .await
        .expect("delete");
    wait_gone(&claims, "photos", T)
        .await
        .expect("claim gone after its access");
    assert!(!recorder.state().buckets.contains_key(&photos_bucket));
    let revoked_before_deleted = recorder
        .calls()
        .iter()
        .position(|c| *c == CosiCall::RevokeAccess(account.clone()))
        < recorder
            .calls()
            .iter()
            .position(|c| *c == CosiCall::Delete(photos_bucket.clone()));
    assert!(
        revoked_before_deleted,
        "access revoked before the bucket is deleted: {:?}",
        recorder.calls()
    );
    controller.stop().await.expect("controller stops");
}

/// A BucketAccess (name, class, claims with modes) and the refusal it gets.
type Refusal = (
    &'static str,
    &'static str,
    Vec<(&'static str, BucketAccessMode)>,
    &'static str,
);

#[tokio::test(flavor = "multi_thread")]
async fn refusals_are_shown_on_the_users_objects() {
    let (env, client) = setup().await;
    let ns = "cosi-refusals";
    let other = "cosi-other";
    env.ensure_namespace(ns).await.expect("namespace");
    env.ensure_namespace(other).await.expect("namespace");
    let recorder = CosiRecorder::new().single_bucket();
    let controller = start(&client, &recorder);
    bucket_class(&client, "gold", BucketDeletionPolicy::Delete).await;
    access_class(&client, "no-write-only", |s| {
        s.disallowed_bucket_access_modes = Some(vec![BucketAccessMode::WriteOnly])
    })
    .await;
    access_class(&client, "single", |_| {}).await;
    access_class(&client, "multi", |s| {
        s.multi_bucket_access = Some(MultiBucketAccess::MultipleBuckets)
    })
    .await;
    claim(&client, ns, "photos", dynamic("gold")).await;
    claim(&client, ns, "logs", dynamic("gold")).await;
    wait_claim_ready(&client, ns, "photos").await;
    wait_claim_ready(&client, ns, "logs").await;

    let refused = |m: &'static str| move |s: &BucketAccessStatus| error_of(s).contains(m);
    let checks: [Refusal; 4] = [
        (
            "wo",
            "no-write-only",
            vec![("photos", BucketAccessMode::WriteOnly)],
            "does not allow access mode WriteOnly",
        ),
        (
            "two-single",
            "single",
            vec![
                ("photos", BucketAccessMode::ReadWrite),
                ("logs", BucketAccessMode::ReadWrite),
            ],
            "allows one bucket per BucketAccess",
        ),
        // The class allows it; the store cannot: its error reaches the user.
        (
            "two-store",
            "multi",
            vec![
                ("photos", BucketAccessMode::ReadWrite),
                ("logs", BucketAccessMode::ReadWrite),
            ],
            "one credential access to one bucket only",
        ),
        // The class allows WriteOnly; the store cannot give it.
        (
            "wo-store",
            "single",
            vec![("photos", BucketAccessMode::WriteOnly)],
            "cannot grant WriteOnly",
        ),
    ];
    for (name, class, claims, message) in checks {
        access(&client, ns, name, class, &claims).await;
        let a = wait_access(&client, ns, name, message, refused(message)).await;
        let status = a.status.expect("status");
        assert!(!status.ready_to_use);
        assert!(
            status.error.and_then(|e| e.time).is_some(),
            "{name}: the error has its time"
        );
        wait_event(&client, ns, name, |r, n| {
            r == "Refused" && n.contains(message)
        })
        .await
        .unwrap_or_else(|e| panic!("{name}: {e:#}"));
        assert!(
            Api::<Secret>::namespaced(client.clone(), ns)
                .get_opt(&format!("{name}-photos"))
                .await
                .expect("get")
                .is_none()
                || class == "multi"
                || name == "wo-store",
            "{name}: no Secret for a refusal the binding role made"
        );
    }
    let granted: Vec<_> = recorder
        .calls()
        .into_iter()
        .filter(|c| matches!(c, CosiCall::GrantAccess(..)))
        .collect();
    assert_eq!(
        granted.len(),
        2,
        "only the two the store refused reached it: {granted:?}"
    );
    assert!(recorder.state().accounts.is_empty(), "nothing granted");

    // A BucketAccess names claims of its own namespace only: "photos" in
    // another namespace is not this one's.
    access(
        &client,
        other,
        "stranger",
        "single",
        &[("photos", BucketAccessMode::ReadWrite)],
    )
    .await;
    wait_access(
        &client,
        other,
        "stranger",
        "waits for a claim of its own namespace",
        refused("BucketClaim photos does not exist in namespace cosi-other"),
    )
    .await;

    // A Secret that is not the BucketAccess's is never taken over.
    let foreign = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some("squat-photos".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    Api::<Secret>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &foreign)
        .await
        .expect("foreign Secret");
    access(
        &client,
        ns,
        "squat",
        "single",
        &[("photos", BucketAccessMode::ReadWrite)],
    )
    .await;
    wait_access(
        &client,
        ns,
        "squat",
        "refuses the foreign Secret",
        refused("Secret squat-photos exists and does not belong to this BucketAccess"),
    )
    .await;
    let kept = Api::<Secret>::namespaced(client.clone(), ns)
        .get("squat-photos")
        .await
        .expect("kept");
    assert!(
        kept.data.is_none() && kept.owner_references().is_empty(),
        "the foreign Secret is untouched"
    );
    controller.stop().await.expect("controller stops");
}

/// Issue 36, item 2: the Buckets the library creates carry no CRD-only
/// annotation (upstream's carry none).
#[tokio::test(flavor = "multi_thread")]
async fn created_buckets_carry_no_crd_annotation() {
    let (env, client) = setup().await;
    let ns = "cosi-annotations";
    env.ensure_namespace(ns).await.expect("namespace");
    let recorder = CosiRecorder::new();
    let controller = start(&client, &recorder);
    bucket_class(&client, "gold", BucketDeletionPolicy::Delete).await;
    let photos = claim(&client, ns, "photos", dynamic("gold")).await;
    wait_claim_ready(&client, ns, "photos").await;
    let name = format!("bc-{}", photos.uid().expect("uid"));
    let bucket = Api::<Bucket>::all(client.clone())
        .get(&name)
        .await
        .expect("the claim's Bucket");
    assert!(
        !bucket.annotations().contains_key(API_APPROVED_ANNOTATION.0),
        "{:?}",
        bucket.annotations()
    );
    controller.stop().await.expect("controller stops");
}

/// A Bucket reserved by name and UID for `claim` of `ns` (no such claim
/// needed), provisioned by this driver as a dynamic Bucket.
fn bucket_for(name: &str, ns: &str, claim: &str, uid: &str) -> Bucket {
    let spec = BucketSpec {
        driver_name: DRIVER.into(),
        deletion_policy: BucketDeletionPolicy::Delete,
        parameters: None,
        protocols: Some(vec![ObjectProtocol::S3]),
        bucket_claim_ref: BucketClaimReference {
            name: claim.into(),
            namespace: ns.into(),
            uid: Some(uid.into()),
        },
        existing_bucket_id: None,
    };
    let mut b = Bucket::new(name, spec);
    b.metadata.annotations = None;
    b
}

async fn wait_bucket(client: &Client, name: &str, what: &str, f: impl Fn(&Bucket) -> bool) {
    let api = Api::<Bucket>::all(client.clone());
    wait_for(T, format!("Bucket {name}: {what}"), || async {
        Ok(api.get_opt(name).await?.filter(&f))
    })
    .await
    .expect(what);
}

/// Issue 36, item 1: with upstream's controller binding, a Bucket whose
/// claim is gone (or re-created under another UID) is deleted by its
/// policy; one whose bound claim exists is still refused.
#[tokio::test(flavor = "multi_thread")]
async fn a_bucket_whose_claim_is_gone_can_be_deleted() {
    let (env, client) = setup().await;
    let ns = "cosi-orphans";
    env.ensure_namespace(ns).await.expect("namespace");
    let recorder = CosiRecorder::new();
    let options = CosiOptions::new(DRIVER)
        .expect("driver name")
        .without_binding();
    let controller = RunningController::start_with(
        client.clone(),
        ControllerBuilder::new(PROVISIONER, recorder.clone()).cosi(options),
    );
    let buckets = Api::<Bucket>::all(client.clone());
    // The bound claim exists: refused.
    let live = claim(&client, ns, "live", dynamic("gold")).await;
    let live_uid = live.uid().expect("uid");
    // A claim of the same name, another UID: not the bound claim.
    claim(&client, ns, "renamed", dynamic("gold")).await;
    let cases = [
        ("orphan", "photos", "9c5d1a43-6a0e-4c43-9f6c-2f1a7e6b3c01"),
        (
            "recreated",
            "renamed",
            "9c5d1a43-6a0e-4c43-9f6c-2f1a7e6b3c02",
        ),
        ("held", "live", live_uid.as_str()),
    ];
    for (name, claim_name, uid) in cases {
        let b = bucket_for(name, ns, claim_name, uid);
        buckets
            .create(&PostParams::default(), &b)
            .await
            .expect("Bucket");
        wait_bucket(&client, name, "provisioned", |b| {
            b.status.as_ref().is_some_and(|s| s.ready_to_use)
        })
        .await;
        buckets
            .delete(name, &DeleteParams::default())
            .await
            .expect("delete Bucket");
    }
    for gone in ["orphan", "recreated"] {
        wait_gone(&buckets, gone, T).await.expect("Bucket gone");
        assert!(recorder.calls().contains(&CosiCall::Delete(gone.into())));
    }
    wait_bucket(&client, "held", "refused while its claim exists", |b| {
        b.status
            .as_ref()
            .and_then(|s| s.error.as_ref())
            .and_then(|e| e.message.as_deref())
            .is_some_and(|m| m.contains("still bound to BucketClaim"))
    })
    .await;
    assert!(!recorder.calls().contains(&CosiCall::Delete("held".into())));
    controller.stop().await.expect("controller stops");
}

/// A recorder whose buckets are "not empty" (delete refused, permanent)
/// until [`Self::empty`].
#[derive(Clone)]
struct NotEmpty {
    inner: CosiRecorder,
    full: std::sync::Arc<std::sync::atomic::AtomicBool>,
    refused: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl NotEmpty {
    fn empty(&self) {
        self.full.store(false, std::sync::atomic::Ordering::SeqCst);
    }
}

#[async_trait::async_trait]
impl lib_provisioner::Provisioner for NotEmpty {
    async fn provision(
        &self,
        r: &lib_provisioner::BucketRequest,
    ) -> Result<lib_provisioner::BucketAccess, lib_provisioner::ProvisionError> {
        self.inner.provision(r).await
    }
    async fn grant(
        &self,
        r: &lib_provisioner::BucketRequest,
    ) -> Result<lib_provisioner::BucketAccess, lib_provisioner::ProvisionError> {
        self.inner.grant(r).await
    }
    async fn revoke(
        &self,
        r: &lib_provisioner::TeardownRequest,
    ) -> Result<(), lib_provisioner::ProvisionError> {
        self.inner.revoke(r).await
    }
    async fn delete(
        &self,
        r: &lib_provisioner::TeardownRequest,
    ) -> Result<(), lib_provisioner::ProvisionError> {
        if self.full.load(std::sync::atomic::Ordering::SeqCst) {
            self.refused
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            return Err(lib_provisioner::ProvisionError::permanent(format!(
                "bucket {} is not empty: empty it",
                r.bucket_name
            )));
        }
        self.inner.delete(r).await
    }
    async fn create_bucket(
        &self,
        r: &lib_provisioner::BucketRequest,
    ) -> Result<lib_provisioner::provisioner::BucketInfo, lib_provisioner::ProvisionError> {
        self.inner.create_bucket(r).await
    }
}

/// Issue 36, item 5: a claim whose bucket was not empty goes soon after
/// the bucket is emptied (a short capped backoff for that refusal), and
/// the refused delete is not asked in a hot loop meanwhile.
#[tokio::test(flavor = "multi_thread")]
async fn a_claim_goes_soon_after_its_bucket_is_emptied() {
    let (env, client) = setup().await;
    let ns = "cosi-not-empty";
    env.ensure_namespace(ns).await.expect("namespace");
    let provisioner = NotEmpty {
        inner: CosiRecorder::new(),
        full: std::sync::Arc::new(true.into()),
        refused: Default::default(),
    };
    let options = CosiOptions::new(DRIVER).expect("driver name");
    let controller = RunningController::start_with(
        client.clone(),
        ControllerBuilder::new(PROVISIONER, provisioner.clone()).cosi(options),
    );
    bucket_class(&client, "gold", BucketDeletionPolicy::Delete).await;
    let photos = claim(&client, ns, "photos", dynamic("gold")).await;
    wait_claim_ready(&client, ns, "photos").await;
    let bucket = format!("bc-{}", photos.uid().expect("uid"));
    let claims = Api::<BucketClaim>::namespaced(client.clone(), ns);
    claims
        .delete("photos", &DeleteParams::default())
        .await
        .expect("delete claim");
    wait_bucket(&client, &bucket, "delete refused", |b| {
        b.status
            .as_ref()
            .and_then(|s| s.error.as_ref())
            .and_then(|e| e.message.as_deref())
            .is_some_and(|m| m.contains("is not empty"))
    })
    .await;
    // Refusals keep coming (a short backoff), though not in a hot loop.
    tokio::time::sleep(Duration::from_secs(12)).await;
    let refused = provisioner
        .refused
        .load(std::sync::atomic::Ordering::SeqCst);
    assert!(
        (2..=6).contains(&refused),
        "the refused delete is asked again a few times: {refused}"
    );
    provisioner.empty();
    let emptied = std::time::Instant::now();
    let buckets = Api::<Bucket>::all(client.clone());
    wait_gone(&claims, "photos", Duration::from_secs(70))
        .await
        .expect("the claim goes within 70 s of the bucket being emptied");
    wait_gone(&buckets, &bucket, T).await.expect("Bucket gone");
    eprintln!("gone {:?} after the bucket was emptied", emptied.elapsed());
    controller.stop().await.expect("controller stops");
}

/// Issue 37: a driver's wait is shown on the claim only once it outlasts
/// the library's grace (5 s from the Bucket's creation): a claim whose
/// class names a driver nobody serves gets, after it and not before, the
/// wait in its status and a `Waiting` Event; a served claim gets neither.
#[tokio::test(flavor = "multi_thread")]
async fn a_drivers_wait_is_shown_only_once_it_lasts() {
    let (env, client) = setup().await;
    let ns = "cosi-no-driver";
    env.ensure_namespace(ns).await.expect("namespace");
    let recorder = CosiRecorder::new();
    let controller = start(&client, &recorder);
    bucket_class(&client, "gold", BucketDeletionPolicy::Delete).await;
    let unserved = "nobody.example.com";
    bucket_class_of(&client, "elsewhere", unserved, BucketDeletionPolicy::Delete).await;

    claim(&client, ns, "served", dynamic("gold")).await;
    wait_claim_ready(&client, ns, "served").await;
    let asked = std::time::Instant::now();
    let orphan = claim(&client, ns, "orphan", dynamic("elsewhere")).await;
    let bucket = format!("bc-{}", orphan.uid().expect("uid"));
    let claims = Api::<BucketClaim>::namespaced(client.clone(), ns);
    let shown = wait_for(T, "the wait shown on the claim", || async {
        let c = claims.get("orphan").await?;
        Ok(c.status
            .and_then(|s| s.error?.message)
            .filter(|m| m.contains("waiting for driver nobody.example.com to provision Bucket")))
    })
    .await
    .expect("shown");
    // creationTimestamp has whole seconds: the grace may end up to 1 s early.
    assert!(
        asked.elapsed() >= Duration::from_millis(3500),
        "shown after {:?}, inside the grace",
        asked.elapsed()
    );
    assert!(shown.contains(&bucket), "{shown}");
    wait_event(&client, ns, "orphan", |r, n| r == "Waiting" && n == shown)
        .await
        .expect("a Waiting Event");
    let served = events_for(&client, ns, "served").await;
    assert!(
        !served.iter().any(|(r, _)| r == "Waiting"),
        "a served claim's moment of waiting is not shown: {served:?}"
    );

    for name in ["orphan", "served"] {
        claims
            .delete(name, &DeleteParams::default())
            .await
            .expect("delete claim");
        wait_gone(&claims, name, T).await.expect("claim gone");
    }
    controller.stop().await.expect("controller stops");
}

/// Issue 36 item 6 / issue 37: a tenant's edits of a granted BucketAccess
/// (an annotation, all the `edit` role needs) cost the controller no read
/// of what its watches hold: the pass plans on the cache's copy of the
/// access, its claims, their Buckets and the class. Only the access
/// Secrets, which no watch holds, are read. Before the COSI passes read
/// from their caches (`0b92fea`), each edit cost about 7 GETs here.
#[tokio::test(flavor = "multi_thread")]
async fn a_tenants_edits_of_a_granted_access_read_nothing_the_caches_hold() {
    let (env, admin) = setup().await;
    let (sa_ns, sa) = ("default", "cosi-reads");
    let controller_client = env
        .service_account_client(sa_ns, sa)
        .await
        .expect("ServiceAccount client");
    bind_cluster_admin(&admin, sa_ns, sa).await;
    let recorder = CosiRecorder::new();
    let controller = start(&controller_client, &recorder);
    bucket_class(&admin, "gold", BucketDeletionPolicy::Delete).await;
    access_class(&admin, "keys", |s| {
        s.multi_bucket_access = Some(MultiBucketAccess::MultipleBuckets)
    })
    .await;
    let ns = "tenant";
    env.ensure_namespace(ns).await.expect("namespace");
    for name in ["photos", "logs"] {
        claim(&admin, ns, name, dynamic("gold")).await;
        wait_claim_ready(&admin, ns, name).await;
    }
    let modes = [
        ("photos", BucketAccessMode::ReadWrite),
        ("logs", BucketAccessMode::ReadOnly),
    ];
    access(&admin, ns, "app", "keys", &modes).await;
    wait_access(&admin, ns, "app", "ready", |s| s.ready_to_use).await;
    // Let the grant's own writes reach the caches.
    tokio::time::sleep(Duration::from_secs(2)).await;

    let audit = env.audit_log_path();
    let before = obc_tests::rbac::audit_mark(&audit).expect("audit log");
    let accesses = Api::<BucketAccess>::namespaced(admin.clone(), ns);
    const EDITS: usize = 10;
    for i in 0..EDITS {
        let patch =
            serde_json::json!({"metadata": {"annotations": {"tenant/edit": i.to_string()}}});
        accesses
            .patch(
                "app",
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(&patch),
            )
            .await
            .expect("the tenant's edit");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let user = format!("system:serviceaccount:{sa_ns}:{sa}");
    let requests: Vec<(String, String)> = obc_tests::rbac::requests_after(&audit, before, &user)
        .expect("audit log")
        .into_iter()
        .map(|r| (r.verb, r.resource))
        .collect();
    let count = |verb: &str, resource: &str| {
        requests
            .iter()
            .filter(|(v, r)| v == verb && r == resource)
            .count()
    };
    let secret_reads = count("get", "secrets");
    assert!(
        secret_reads >= EDITS,
        "the passes ran (they read the access Secrets): {requests:?}"
    );
    for cached in [
        "bucketaccesses",
        "bucketclaims",
        "buckets",
        "bucketaccessclasses",
    ] {
        assert_eq!(count("get", cached), 0, "{cached} read: {requests:?}");
    }
    let writes: Vec<_> = requests
        .iter()
        .filter(|(v, _)| !["get", "list", "watch"].contains(&v.as_str()))
        .collect();
    assert!(writes.is_empty(), "an edit wrote: {writes:?}");
    assert!(
        accesses
            .get("app")
            .await
            .expect("access")
            .status
            .is_some_and(|s| s.ready_to_use),
        "still granted"
    );
    assert_eq!(
        recorder
            .calls()
            .iter()
            .filter(|c| matches!(c, CosiCall::GrantAccess(..)))
            .count(),
        1,
        "granted once"
    );
    controller.stop().await.expect("controller stops");
}

async fn bind_cluster_admin(admin: &Client, ns: &str, sa: &str) {
    use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleRef, Subject};
    let binding = ClusterRoleBinding {
        metadata: kube::api::ObjectMeta {
            name: Some(format!("{sa}-admin")),
            ..Default::default()
        },
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "ClusterRole".into(),
            name: "cluster-admin".into(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: sa.into(),
            namespace: Some(ns.into()),
            ..Default::default()
        }]),
    };
    Api::<ClusterRoleBinding>::all(admin.clone())
        .create(&PostParams::default(), &binding)
        .await
        .expect("ClusterRoleBinding");
}
