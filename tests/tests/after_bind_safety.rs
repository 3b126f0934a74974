//! The after-bind path's safety (issue 25, items 3, 4, 7 and 10), against
//! the real apiserver with the recording provisioner in this process:
//!
//! - the provisioner state a rotation (or a Secret's repair) returns is on
//!   the ObjectBucket, exactly, even after a crash before the rotation
//!   finished;
//! - the key a rotation revokes is the one the library recorded, never one
//!   a tenant wrote into the claim's Secret, and the status says what the
//!   provisioner really did with it;
//! - a rotation whose new key id is the previous one stops and says why;
//! - a refused update stays refused (and `observedGeneration` stays) through
//!   a later problem shown on the claim.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, Patch, PatchParams};
use kube::{Client, ResourceExt};
use lib_provisioner::api::{
    ClaimPhase, ObjectBucket, ObjectBucketClaim, ObjectBucketClaimSpec, ROTATE_ANNOTATION,
    ROTATED_ANNOTATION, ROTATION_PENDING_ANNOTATION,
};
use lib_provisioner::{CONFIG_APPLIED_CONDITION, CREDENTIALS_ROTATED_CONDITION};
use obc_tests::recording::{
    Call, Recorder, Revoking, Rotation, RunningController, create_claim, create_class, wait_event,
    wait_phase,
};
use obc_tests::setup::start_with_crds;
use obc_tests::{TestEnv, wait_for};
use serde_json::json;

const T: Duration = Duration::from_secs(30);
/// The ObjectBucket's record of the access key id the claim's Secret was given.
const ACCESS_KEY_RECORD: &str = lib_provisioner::api::ACCESS_KEY_ANNOTATION;

async fn setup(namespaces: &[&str]) -> (TestEnv, Client) {
    let env = start_with_crds().await.expect("environment with the CRDs");
    for ns in namespaces {
        env.ensure_namespace(ns).await.expect("namespace");
    }
    let client = env.admin_client();
    create_class(&client, "c", "Delete", &[])
        .await
        .expect("class");
    (env, client)
}

fn spec(config: &[(&str, &str)]) -> ObjectBucketClaimSpec {
    ObjectBucketClaimSpec {
        storage_class_name: "c".into(),
        generate_bucket_name: Some("b".into()),
        additional_config: (!config.is_empty()).then(|| {
            config
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        }),
        ..Default::default()
    }
}

async fn bound(client: &Client, ns: &str, name: &str) -> ObjectBucketClaim {
    bound_with(client, ns, name, &[]).await
}

async fn bound_with(
    client: &Client,
    ns: &str,
    name: &str,
    config: &[(&str, &str)],
) -> ObjectBucketClaim {
    create_claim(client, ns, name, spec(config))
        .await
        .expect("claim");
    wait_phase(client, ns, name, ClaimPhase::Bound, T)
        .await
        .unwrap_or_else(|e| panic!("{ns}/{name}: {e:#}"))
}

fn claims(client: &Client, ns: &str) -> Api<ObjectBucketClaim> {
    Api::namespaced(client.clone(), ns)
}

async fn rotate(client: &Client, ns: &str, name: &str, value: &str) {
    claims(client, ns)
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {ROTATE_ANNOTATION: value}}})),
        )
        .await
        .expect("annotate");
}

/// The claim's `CredentialsRotated` condition: status, reason, message.
fn rotated_condition(claim: &ObjectBucketClaim) -> Option<(String, String, String)> {
    condition(claim, CREDENTIALS_ROTATED_CONDITION)
}

fn condition(claim: &ObjectBucketClaim, type_: &str) -> Option<(String, String, String)> {
    claim.status.as_ref().and_then(|s| {
        s.conditions
            .iter()
            .find(|c| c.type_ == type_)
            .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
    })
}

/// Waits until the rotation `value` is over (done or not) on the claim
/// and its ObjectBucket: the condition names it, the ObjectBucket records
/// it and nothing is pending.
async fn rotation_over(client: &Client, ns: &str, name: &str, value: &str) -> ObjectBucketClaim {
    wait_for(T, format!("{ns}/{name}: rotation {value} over"), || async {
        let c = claims(client, ns).get(name).await?;
        let Some((_, _, message)) = rotated_condition(&c) else {
            return Ok(None);
        };
        let ob = object_bucket(client, &c).await;
        let a = ob.metadata.annotations.unwrap_or_default();
        let recorded = a.get(ROTATED_ANNOTATION).map(String::as_str) == Some(value)
            && !a.contains_key(ROTATION_PENDING_ANNOTATION);
        Ok((recorded && message.contains(value)).then_some(c))
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}"))
}

async fn object_bucket(client: &Client, claim: &ObjectBucketClaim) -> ObjectBucket {
    let name = claim.spec.object_bucket_name.clone().expect("bound");
    Api::<ObjectBucket>::all(client.clone())
        .get(&name)
        .await
        .expect("ObjectBucket")
}

async fn secret(client: &Client, ns: &str, name: &str) -> Secret {
    Api::<Secret>::namespaced(client.clone(), ns)
        .get(name)
        .await
        .expect("Secret")
}

fn value(secret: &Secret, key: &str) -> String {
    String::from_utf8(secret.data.as_ref().expect("data")[key].0.clone()).expect("utf8")
}

async fn key_of(client: &Client, ns: &str, name: &str) -> String {
    value(&secret(client, ns, name).await, "AWS_ACCESS_KEY_ID")
}

fn state(pairs: &[(&str, &str)]) -> Option<BTreeMap<String, String>> {
    Some(
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    )
}

/// What a tenant can do to their own Secret: any data, and the hash
/// annotation removed (or recomputed: it is a plain SHA-256 of the data).
async fn tenant_writes_key(client: &Client, ns: &str, name: &str, key: &str) {
    let data = json!({"AWS_ACCESS_KEY_ID": ByteString(key.as_bytes().to_vec())});
    Api::<Secret>::namespaced(client.clone(), ns)
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({
                "metadata": {"annotations": {"objectbucket.io/secret-hash": null}},
                "data": data,
            })),
        )
        .await
        .expect("the tenant edits their Secret");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotations_state_is_recorded_exactly_even_after_a_crash_before_it_finished() {
    let (_env, client) = setup(&["state"]).await;
    let rec = Recorder::default();
    rec.rotate_with(Rotation::NewKey);
    let controller = RunningController::start(client.clone(), rec.clone());
    let claim = bound(&client, "state", "c").await;
    let uid = claim.uid().expect("uid");
    let ob = object_bucket(&client, &claim).await;
    assert_eq!(
        ob.spec.additional_state,
        state(&[("user", &format!("user-{uid}"))])
    );

    // The process dies after the Secret's switch, before revoking and
    // finishing (revoke_previous is held, then the controller is dropped).
    let gate = rec.hold_revocations();
    rotate(&client, "state", "c", "r1").await;
    gate.entered(1, T)
        .await
        .expect("the rotation reaches revoke");
    drop(controller);
    tokio::time::sleep(Duration::from_millis(500)).await;
    gate.open();
    let controller = RunningController::start(client.clone(), rec.clone());
    let claim = rotation_over(&client, "state", "c", "r1").await;
    let key = key_of(&client, "state", "c").await;
    let ob = object_bucket(&client, &claim).await;
    assert_eq!(
        ob.spec.additional_state,
        state(&[("key", &key), ("rotation", "r1")]),
        "the ObjectBucket must hold exactly the state rotate returned for the key the Secret holds ({key}); a teardown reading it would revoke the wrong key"
    );
    controller.stop().await.expect("stops");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repaired_secrets_state_replaces_the_recorded_one() {
    let (_env, client) = setup(&["repair"]).await;
    let rec = Recorder::default();
    rec.rotate_with(Rotation::NewKey);
    let controller = RunningController::start(client.clone(), rec.clone());
    let claim = bound(&client, "repair", "c").await;
    let uid = claim.uid().expect("uid");
    rotate(&client, "repair", "c", "r1").await;
    let claim = rotation_over(&client, "repair", "c", "r1").await;
    let rotated_key = key_of(&client, "repair", "c").await;
    assert_ne!(rotated_key, format!("AK-{uid}"));

    // Edited Secret: restored through provision, whose state is {user}.
    Api::<Secret>::namespaced(client.clone(), "repair")
        .patch(
            "c",
            &PatchParams::default(),
            &Patch::Merge(json!({"stringData": {"AWS_SECRET_ACCESS_KEY": "tampered"}})),
        )
        .await
        .expect("tamper");
    wait_for(T, "the Secret repaired", || async {
        let s = secret(&client, "repair", "c").await;
        Ok((value(&s, "AWS_SECRET_ACCESS_KEY") != "tampered").then_some(()))
    })
    .await
    .expect("repaired");
    let key = key_of(&client, "repair", "c").await;
    assert_eq!(key, format!("AK-{uid}"));
    let settled = wait_for(T, "the repair's state recorded", || async {
        let ob = object_bucket(&client, &claim).await;
        Ok((ob.spec.additional_state == state(&[("user", &format!("user-{uid}"))])).then_some(()))
    })
    .await;
    let ob = object_bucket(&client, &claim).await;
    assert!(
        settled.is_ok(),
        "after the repair the Secret holds {key}, but the ObjectBucket still records {:?} (and key record {:?})",
        ob.spec.additional_state,
        ob.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(ACCESS_KEY_RECORD))
    );
    controller.stop().await.expect("stops");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_id_a_tenant_writes_into_their_secret_is_never_revoked() {
    let (_env, client) = setup(&["victim", "tenant"]).await;
    let rec = Recorder::default();
    rec.rotate_with(Rotation::NewKey);
    rec.revoke_with(Revoking::Any);
    let controller = RunningController::start(client.clone(), rec.clone());
    bound(&client, "victim", "v").await;
    let claim = bound(&client, "tenant", "t").await;
    let victim_key = key_of(&client, "victim", "v").await;
    let own_key = key_of(&client, "tenant", "t").await;

    // The tenant writes the victim's key id into their own Secret and asks
    // for a rotation.
    tenant_writes_key(&client, "tenant", "t", &victim_key).await;
    rotate(&client, "tenant", "t", "steal").await;
    let c = rotation_over(&client, "tenant", "t", "steal").await;
    let asked = rec.count(|c| *c == Call::RevokePrevious(victim_key.clone()));
    assert_eq!(
        asked,
        0,
        "revoke_previous was asked to revoke the victim's key {victim_key}: {:?}",
        rec.calls()
    );
    assert!(rec.key_works(&victim_key), "the victim's key was revoked");
    // The rotation went from the key the library recorded: that one is
    // revoked, and the status says so by name.
    assert!(
        !rec.key_works(&own_key),
        "the tenant's previous key {own_key} still works after the rotation: {:?}",
        rec.calls()
    );
    let (status, _, message) = rotated_condition(&c).expect("condition");
    assert_eq!(status, "True", "{message}");
    assert!(
        message.contains(&own_key) && !message.contains(&victim_key),
        "{message}"
    );

    // The same on an ObjectBucket of an older version, which has no record
    // of the key: the rotation still never takes the Secret's word.
    let ob = object_bucket(&client, &claim).await;
    Api::<ObjectBucket>::all(client.clone())
        .patch(
            &ob.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {ACCESS_KEY_RECORD: null}}})),
        )
        .await
        .expect("an ObjectBucket without the record");
    tenant_writes_key(&client, "tenant", "t", &victim_key).await;
    rotate(&client, "tenant", "t", "steal-again").await;
    rotation_over(&client, "tenant", "t", "steal-again").await;
    assert_eq!(
        rec.count(|c| *c == Call::RevokePrevious(victim_key.clone())),
        0,
        "without a record, revoke_previous was asked to revoke the victim's key: {:?}",
        rec.calls()
    );
    assert!(rec.key_works(&victim_key), "the victim's key was revoked");
    let key = key_of(&client, "tenant", "t").await;
    assert!(rec.key_works(&key), "the tenant's Secret holds a dead key");
    controller.stop().await.expect("stops");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_previous_key_the_provisioner_kept_is_not_reported_revoked() {
    let (_env, client) = setup(&["kept"]).await;
    let rec = Recorder::default();
    rec.rotate_with(Rotation::NewKey);
    rec.revoke_with(Revoking::Nothing);
    let controller = RunningController::start(client.clone(), rec.clone());
    bound(&client, "kept", "c").await;
    let previous = key_of(&client, "kept", "c").await;
    rotate(&client, "kept", "c", "r1").await;
    let c = rotation_over(&client, "kept", "c", "r1").await;
    assert!(rec.key_works(&previous), "fixture: the key is kept");
    let (status, reason, message) = rotated_condition(&c).expect("condition");
    assert!(
        status == "False" && reason == "PreviousKeyKept" && message.contains(&previous),
        "the provisioner kept {previous}, but the claim says CredentialsRotated={status} ({reason}): {message}"
    );
    wait_event(&client, "kept", "c", |r, n| {
        r == "PreviousKeyKept" && n.contains(&previous)
    })
    .await
    .expect("a PreviousKeyKept Event");
    controller.stop().await.expect("stops");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotation_that_keeps_the_key_id_stops_and_says_why() {
    let (_env, client) = setup(&["same"]).await;
    let rec = Recorder::default();
    rec.rotate_with(Rotation::KeepKeyId);
    let controller = RunningController::start(client.clone(), rec.clone());
    let claim = bound(&client, "same", "c").await;
    let uid = claim.uid().expect("uid");
    rotate(&client, "same", "c", "once").await;
    let over = wait_for(Duration::from_secs(20), "the rotation stopped", || async {
        let c = claims(&client, "same").get("c").await?;
        Ok(rotated_condition(&c).filter(|(s, _, m)| s == "False" && m.contains("once")))
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rotations = rec.count(|c| matches!(c, Call::Rotate(_)));
    let (_, reason, message) = over.unwrap_or_else(|e| {
        panic!("{e:#}: rotate was called {rotations} times and nothing says why")
    });
    assert_eq!(rotations, 1, "rotate was called {rotations} times");
    assert_eq!(reason, "KeyIdUnchanged", "{message}");
    assert!(
        message.contains(&format!("AK-{uid}")) && message.contains("provisioner"),
        "{message}"
    );
    assert_eq!(rec.count(|c| matches!(c, Call::RevokePrevious(_))), 0);
    // The Secret holds what rotate returned (the key's new secret), and the
    // rotation is recorded over: not asked again.
    let s = secret(&client, "same", "c").await;
    assert_eq!(value(&s, "AWS_SECRET_ACCESS_KEY"), format!("SK-{uid}-r1"));
    rotation_over(&client, "same", "c", "once").await;
    wait_event(&client, "same", "c", |r, _| r == "KeyIdUnchanged")
        .await
        .expect("a KeyIdUnchanged Event");
    controller.stop().await.expect("stops");
}

fn observed_generation(claim: &ObjectBucketClaim) -> Option<i64> {
    claim.status.as_ref().and_then(|s| s.observed_generation)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_update_stays_refused_through_a_later_problem() {
    let (_env, client) = setup(&["cfg"]).await;
    let rec = Recorder::default();
    rec.refuse_updates("maxSize cannot change on this store");
    let controller = RunningController::start(client.clone(), rec.clone());
    let first = bound_with(&client, "cfg", "c", &[("maxSize", "1")]).await;
    let applied = observed_generation(&first);
    let api = claims(&client, "cfg");
    api.patch(
        "c",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"additionalConfig": {"maxSize": "2"}}})),
    )
    .await
    .expect("edit");
    wait_for(T, "ConfigApplied=False", || async {
        let c = api.get("c").await?;
        Ok(condition(&c, CONFIG_APPLIED_CONDITION).filter(|(s, _, _)| s == "False"))
    })
    .await
    .expect("refused");

    // A later problem: the Secret is edited and its repair fails.
    rec.fail(true, "store down");
    Api::<Secret>::namespaced(client.clone(), "cfg")
        .patch(
            "c",
            &PatchParams::default(),
            &Patch::Merge(json!({"stringData": {"AWS_SECRET_ACCESS_KEY": "tampered"}})),
        )
        .await
        .expect("tamper");
    let shown = wait_for(T, "the failed repair on the claim", || async {
        let c = api.get("c").await?;
        let m = obc_tests::recording::message(&c);
        Ok(m.contains("store down").then_some(c))
    })
    .await
    .expect("shown");
    assert_eq!(
        observed_generation(&shown),
        applied,
        "a problem moved observedGeneration to the refused generation {:?}",
        shown.metadata.generation
    );
    rec.heal();
    wait_for(T, "repaired and Bound again", || async {
        let c = api.get("c").await?;
        let s = secret(&client, "cfg", "c").await;
        let bound = condition(&c, lib_provisioner::BOUND_CONDITION)
            .is_some_and(|(s, r, _)| s == "True" && r == "Provisioned");
        Ok((bound && value(&s, "AWS_SECRET_ACCESS_KEY") != "tampered").then_some(()))
    })
    .await
    .expect("repaired");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let c = api.get("c").await.expect("claim");
    let (status, reason, message) = condition(&c, CONFIG_APPLIED_CONDITION).expect("condition");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "UpdateRefused"),
        "the refused config is reported as {status} ({reason}): {message}"
    );
    assert_eq!(observed_generation(&c), applied);
    assert_eq!(
        rec.count(|c| matches!(c, Call::Update(_))),
        1,
        "update asked again: {:?}",
        rec.calls()
    );
    controller.stop().await.expect("stops");
}
