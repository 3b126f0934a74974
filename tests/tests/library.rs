//! The library against a real kube-apiserver, with a provisioner that
//! records calls: greenfield, brownfield, reclaim policies, resuming
//! half-done work, and the takeover of claims left by older versions. Bad
//! input is the reliability suite's (`tests/tests/reliability/bad_input.rs`),
//! against the sample provisioner.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use lib_provisioner::api::{
    BucketPhase, ClaimPhase, FINALIZER, ObjectBucket, ObjectBucketClaim, ObjectBucketClaimSpec,
    PROVISIONER_LABEL, ReclaimPolicy,
};
use lib_provisioner::{ControllerBuilder, EventLevel};
use obc_tests::recording::{
    Call, PROVISIONER, Recorder, RunningController, create_claim, create_class, events_for,
    message, wait_event, wait_gone, wait_phase,
};
use obc_tests::setup::{install_crds_without_object_bucket_name, start_with_crds};
use obc_tests::{TestEnv, wait_for};
use serde_json::json;

const T: Duration = Duration::from_secs(30);
const LABEL: &str = "test.objectbucket.io-recorder";

fn spec(class: &str) -> ObjectBucketClaimSpec {
    ObjectBucketClaimSpec {
        storage_class_name: class.into(),
        ..Default::default()
    }
}

fn generated(class: &str, prefix: &str) -> ObjectBucketClaimSpec {
    ObjectBucketClaimSpec {
        generate_bucket_name: Some(prefix.into()),
        ..spec(class)
    }
}

fn exact(class: &str, bucket: &str) -> ObjectBucketClaimSpec {
    ObjectBucketClaimSpec {
        bucket_name: Some(bucket.into()),
        ..spec(class)
    }
}

/// An environment with the CRDs and kube-controller-manager: the claims'
/// Secrets and ConfigMaps are deleted by its garbage collector.
async fn setup() -> (TestEnv, Client) {
    let env = start_with_crds()
        .await
        .expect("test environment starts with the CRDs");
    env.start_controller_manager()
        .await
        .expect("kube-controller-manager starts");
    let client = env.admin_client();
    (env, client)
}

fn has_finalizer<K: ResourceExt>(k: &K) -> bool {
    k.finalizers().iter().any(|f| f == FINALIZER)
}

fn string_data(cm: &ConfigMap, key: &str) -> String {
    cm.data
        .as_ref()
        .and_then(|d| d.get(key))
        .cloned()
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn greenfield_claims_bind_and_follow_their_reclaim_policy() {
    let (env, client) = setup().await;
    env.ensure_namespace("apps").await.expect("namespace");
    create_class(&client, "delete-class", "Delete", &[])
        .await
        .expect("class");
    create_class(&client, "retain-class", "Retain", &[])
        .await
        .expect("class");
    let rec = Recorder::default();
    let controller = RunningController::start(client.clone(), rec.clone());

    create_claim(&client, "apps", "gen", generated("delete-class", "photos"))
        .await
        .expect("claim");
    create_claim(
        &client,
        "apps",
        "exact",
        exact("delete-class", "exact-bucket-1"),
    )
    .await
    .expect("claim");
    create_claim(&client, "apps", "kept", generated("retain-class", "kept"))
        .await
        .expect("claim");

    let genc = wait_phase(&client, "apps", "gen", ClaimPhase::Bound, T)
        .await
        .expect("genc binds");
    let exact_claim = wait_phase(&client, "apps", "exact", ClaimPhase::Bound, T)
        .await
        .expect("exact binds");
    let kept = wait_phase(&client, "apps", "kept", ClaimPhase::Bound, T)
        .await
        .expect("kept binds");

    // The claim: bound to obc-<ns>-<name>, protected, labelled, with a Bound condition.
    assert_eq!(
        genc.spec.object_bucket_name.as_deref(),
        Some("obc-apps-gen")
    );
    assert!(has_finalizer(&genc));
    assert_eq!(
        genc.labels().get(PROVISIONER_LABEL).map(String::as_str),
        Some(LABEL)
    );
    let status = genc.status.clone().expect("status");
    assert!(
        status
            .conditions
            .iter()
            .any(|c| c.type_ == "Bound" && c.status == "True")
    );
    assert_eq!(status.observed_generation, genc.metadata.generation);

    // The ObjectBucket.
    let obs: Api<ObjectBucket> = Api::all(client.clone());
    let ob = obs.get("obc-apps-gen").await.expect("OB exists");
    let bucket = ob.bucket_name().expect("bucket name").to_owned();
    assert!(
        bucket.starts_with("photos-") && bucket.len() == "photos-".len() + 8,
        "{bucket}"
    );
    let claim_ref = ob.spec.claim_ref.clone().expect("claimRef");
    assert_eq!(claim_ref.uid, genc.metadata.uid);
    assert_eq!(ob.spec.reclaim_policy, ReclaimPolicy::Delete);
    assert_eq!(
        ob.status.as_ref().and_then(|s| s.phase),
        Some(BucketPhase::Bound)
    );
    assert!(has_finalizer(&ob));
    assert_eq!(
        ob.spec
            .additional_state
            .as_ref()
            .and_then(|s| s.get("user"))
            .cloned(),
        Some(format!("user-{}", genc.uid().unwrap_or_default()))
    );
    assert_eq!(
        obs.get("obc-apps-exact").await.expect("OB").bucket_name(),
        Some("exact-bucket-1")
    );
    assert_eq!(
        exact_claim.spec.bucket_name.as_deref(),
        Some("exact-bucket-1")
    );

    // Secret and ConfigMap: named after the claim, owned by it, labelled.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "apps");
    let secret = secrets.get("gen").await.expect("secret");
    let data = secret.data.clone().expect("data");
    assert_eq!(
        data.keys().cloned().collect::<Vec<_>>(),
        vec!["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"]
    );
    assert_eq!(
        data["AWS_ACCESS_KEY_ID"].0,
        format!("AK-{}", genc.uid().unwrap_or_default()).into_bytes()
    );
    let owner = &secret.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), Some(&owner.uid)),
        ("ObjectBucketClaim", genc.metadata.uid.as_ref())
    );
    assert_eq!(owner.controller, Some(true));
    assert!(
        !has_finalizer(&secret),
        "the garbage collector deletes it with the claim"
    );
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "apps");
    let cm = cms.get("gen").await.expect("configmap");
    assert_eq!(string_data(&cm, "BUCKET_NAME"), bucket);
    assert_eq!(string_data(&cm, "BUCKET_HOST"), "s3.test.local");
    assert_eq!(string_data(&cm, "BUCKET_PORT"), "9000");
    assert_eq!(string_data(&cm, "BUCKET_REGION"), "test-1");
    assert_eq!(cm.owner_references()[0].uid, genc.uid().unwrap_or_default());
    wait_event(&client, "apps", "gen", |r, _| r == "Bound")
        .await
        .expect("a Bound Event");

    // Exactly one provision per claim.
    assert_eq!(
        rec.count(|c| matches!(c, Call::Provision(b) if *b == bucket)),
        1,
        "{:?}",
        rec.calls()
    );
    assert_eq!(
        rec.count(|c| matches!(c, Call::Provision(_))),
        3,
        "{:?}",
        rec.calls()
    );

    // Reclaim policy Delete: bucket, OB, Secret, ConfigMap and claim all go
    // (the Secret and ConfigMap by the garbage collector).
    let claims: Api<ObjectBucketClaim> = Api::namespaced(client.clone(), "apps");
    claims
        .delete("gen", &DeleteParams::default())
        .await
        .expect("delete");
    wait_gone(&claims, "gen", T).await.expect("claim gone");
    wait_gone(&obs, "obc-apps-gen", T).await.expect("OB gone");
    wait_gone(&secrets, "gen", T).await.expect("secret gone");
    wait_gone(&cms, "gen", T).await.expect("configmap gone");
    assert_eq!(
        rec.count(|c| *c == Call::Delete(bucket.clone())),
        1,
        "{:?}",
        rec.calls()
    );
    assert!(!rec.buckets().contains(&bucket));

    // Reclaim policy Retain: access revoked, bucket kept, OB Released.
    let kept_bucket = obs
        .get("obc-apps-kept")
        .await
        .expect("OB")
        .bucket_name()
        .expect("name")
        .to_owned();
    claims
        .delete("kept", &DeleteParams::default())
        .await
        .expect("delete");
    wait_gone(&claims, "kept", T).await.expect("claim gone");
    let released = wait_for(T, "OB to be Released", || async {
        let ob = obs.get("obc-apps-kept").await?;
        Ok((ob.status.as_ref().and_then(|s| s.phase) == Some(BucketPhase::Released)).then_some(ob))
    })
    .await
    .expect("released");
    assert!(
        !has_finalizer(&released),
        "a released OB can be deleted by an admin"
    );
    assert!(rec.buckets().contains(&kept_bucket));
    assert_eq!(
        rec.count(|c| matches!(c, Call::Delete(b) if *b == kept_bucket)),
        0
    );
    assert_eq!(rec.count(|c| *c == Call::Revoke(kept_bucket.clone())), 1);
    assert!(!rec.grants().contains(&kept.uid().unwrap_or_default()));
    wait_gone(&secrets, "kept", T).await.expect("secret gone");

    // A new claim with the retained claim's name is told why it cannot bind.
    create_claim(&client, "apps", "kept", generated("retain-class", "kept"))
        .await
        .expect("claim");
    let failed = wait_phase(&client, "apps", "kept", ClaimPhase::Failed, T)
        .await
        .expect("fails");
    assert!(
        message(&failed).contains("delete that ObjectBucket"),
        "{}",
        message(&failed)
    );
    // Deleting the released OB (the bucket stays) lets the new claim bind.
    obs.delete("obc-apps-kept", &DeleteParams::default())
        .await
        .expect("delete OB");
    wait_gone(&obs, "obc-apps-kept", T).await.expect("OB gone");
    wait_phase(
        &client,
        "apps",
        "kept",
        ClaimPhase::Bound,
        Duration::from_secs(60),
    )
    .await
    .expect("binds after");
    assert!(
        rec.buckets().contains(&kept_bucket),
        "retained bucket survives"
    );

    controller.stop().await.expect("controller stops cleanly");
}

/// `EventLevel::WarningsOnly`: a claim binds and is deleted without an
/// Event, while a claim that cannot be served still gets its Warning.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warnings_only_leaves_out_the_normal_events_and_keeps_the_warnings() {
    let env = start_with_crds()
        .await
        .expect("test environment starts with the CRDs");
    let client = env.admin_client();
    env.ensure_namespace("quiet").await.expect("namespace");
    create_class(&client, "delete-class", "Delete", &[])
        .await
        .expect("class");
    let rec = Recorder::default();
    let builder = ControllerBuilder::new(PROVISIONER, rec.clone()).events(EventLevel::WarningsOnly);
    let controller = RunningController::start_with(client.clone(), builder);

    create_claim(&client, "quiet", "ok", generated("delete-class", "quiet"))
        .await
        .expect("claim");
    create_claim(&client, "quiet", "bad", exact("delete-class", "Bad_Name"))
        .await
        .expect("claim");
    wait_phase(&client, "quiet", "ok", ClaimPhase::Bound, T)
        .await
        .expect("the claim binds");
    let bad = wait_phase(&client, "quiet", "bad", ClaimPhase::Failed, T)
        .await
        .expect("the invalid claim fails");
    assert!(message(&bad).contains("Bad_Name"), "{:?}", message(&bad));
    wait_event(&client, "quiet", "bad", |r, _| r == "InvalidBucketName")
        .await
        .expect("a Warning is still sent");

    let claims: Api<ObjectBucketClaim> = Api::namespaced(client.clone(), "quiet");
    claims
        .delete("ok", &DeleteParams::default())
        .await
        .expect("delete");
    wait_gone(&claims, "ok", T).await.expect("the claim goes");
    // The Warning above was listed after the bind, and this after the
    // deletion: a Normal Event of either would be there by now.
    assert_eq!(events_for(&client, "quiet", "ok").await, Vec::new());
    assert_eq!(
        rec.count(|c| matches!(c, Call::Delete(_))),
        1,
        "{:?}",
        rec.calls()
    );
    controller.stop().await.expect("controller stops");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn brownfield_claims_get_access_and_deletion_only_revokes() {
    let (env, client) = setup().await;
    env.ensure_namespace("apps").await.expect("namespace");
    create_class(
        &client,
        "shared",
        "Delete",
        &[("bucketName", "shared-data")],
    )
    .await
    .expect("class");
    let rec = Recorder::default();
    rec.add_existing_bucket("shared-data");
    let controller = RunningController::start(client.clone(), rec.clone());

    create_claim(&client, "apps", "reader", spec("shared"))
        .await
        .expect("claim");
    create_claim(&client, "apps", "writer", generated("shared", "ignored"))
        .await
        .expect("claim");
    let reader = wait_phase(&client, "apps", "reader", ClaimPhase::Bound, T)
        .await
        .expect("binds");
    wait_phase(&client, "apps", "writer", ClaimPhase::Bound, T)
        .await
        .expect("binds");
    assert_eq!(
        rec.count(|c| *c == Call::Grant("shared-data".into())),
        2,
        "{:?}",
        rec.calls()
    );
    assert_eq!(rec.count(|c| matches!(c, Call::Provision(_))), 0);
    let obs: Api<ObjectBucket> = Api::all(client.clone());
    let ob = obs.get("obc-apps-reader").await.expect("OB");
    assert_eq!(ob.bucket_name(), Some("shared-data"));
    assert_eq!(
        ob.annotations()
            .get("objectbucket.io/bucket-origin")
            .map(String::as_str),
        Some("brownfield")
    );

    let claims: Api<ObjectBucketClaim> = Api::namespaced(client.clone(), "apps");
    claims
        .delete("reader", &DeleteParams::default())
        .await
        .expect("delete");
    wait_gone(&claims, "reader", T).await.expect("gone");
    wait_gone(&obs, "obc-apps-reader", T)
        .await
        .expect("OB gone");
    assert_eq!(rec.count(|c| *c == Call::Revoke("shared-data".into())), 1);
    assert_eq!(
        rec.count(|c| matches!(c, Call::Delete(_))),
        0,
        "a brownfield bucket is never deleted"
    );
    assert!(rec.buckets().contains("shared-data"));
    assert!(!rec.grants().contains(&reader.uid().unwrap_or_default()));
    assert!(rec.grants().len() == 1, "the other claim keeps its access");

    // A brownfield claim that asks for another bucket is told why.
    create_claim(&client, "apps", "wrong", exact("shared", "another-bucket"))
        .await
        .expect("claim");
    let failed = wait_phase(&client, "apps", "wrong", ClaimPhase::Failed, T)
        .await
        .expect("fails");
    assert!(
        message(&failed).contains("grants access to the existing bucket \"shared-data\""),
        "{}",
        message(&failed)
    );
    controller.stop().await.expect("stops");
}

/// Writes raw objects in the shapes the Go library and older versions leave.
async fn write_raw_bound_claim(
    client: &Client,
    ns: &str,
    name: &str,
    spec: serde_json::Value,
    bucket: &str,
    with_labels: bool,
) -> ObjectBucketClaim {
    let claims: Api<ObjectBucketClaim> = Api::namespaced(client.clone(), ns);
    let mut claim: ObjectBucketClaim = serde_json::from_value(json!({
        "apiVersion": "objectbucket.io/v1alpha1", "kind": "ObjectBucketClaim",
        "metadata": {"name": name, "namespace": ns, "finalizers": if with_labels { json!([FINALIZER]) } else { json!([]) }},
        "spec": spec,
    }))
    .expect("claim json");
    claim = claims
        .create(&PostParams::default(), &claim)
        .await
        .expect("create claim");
    claims
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Bound"}})),
        )
        .await
        .expect("status");
    let uid = claim.uid().expect("uid");
    let labels = if with_labels {
        json!({PROVISIONER_LABEL: LABEL})
    } else {
        json!({})
    };
    let finalizers = if with_labels {
        json!([FINALIZER])
    } else {
        json!([])
    };
    let owner = json!([{"apiVersion": "objectbucket.io/v1alpha1", "kind": "ObjectBucketClaim", "name": name, "uid": uid, "controller": true, "blockOwnerDeletion": true}]);
    let obs: Api<ObjectBucket> = Api::all(client.clone());
    let ob: ObjectBucket = serde_json::from_value(json!({
        "apiVersion": "objectbucket.io/v1alpha1", "kind": "ObjectBucket",
        "metadata": {"name": format!("obc-{ns}-{name}"), "labels": labels, "finalizers": finalizers},
        "spec": {
            "storageClassName": "go-class", "reclaimPolicy": "Delete",
            "claimRef": {"apiVersion": "objectbucket.io/v1alpha1", "kind": "ObjectBucketClaim", "name": name, "namespace": ns, "uid": uid},
            "endpoint": {"bucketHost": "s3.test.local", "bucketPort": 9000, "bucketName": bucket, "region": "test-1", "subRegion": "", "additionalConfig": {}},
            "additionalState": {"user": format!("user-{uid}")}
        }
    }))
    .expect("ob json");
    obs.create(&PostParams::default(), &ob)
        .await
        .expect("create OB");
    obs.patch_status(
        &format!("obc-{ns}-{name}"),
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Bound"}})),
    )
    .await
    .expect("OB status");
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": ns, "labels": labels, "finalizers": finalizers, "ownerReferences": owner},
        "stringData": {"AWS_ACCESS_KEY_ID": format!("AK-{uid}"), "AWS_SECRET_ACCESS_KEY": format!("SK-{uid}")}
    }))
    .expect("secret json");
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .expect("create secret");
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": ns, "labels": labels, "finalizers": finalizers, "ownerReferences": owner},
        "data": {"BUCKET_HOST": "s3.test.local", "BUCKET_PORT": "9000", "BUCKET_NAME": bucket, "BUCKET_REGION": "test-1", "BUCKET_SUBREGION": ""}
    }))
    .expect("cm json");
    cms.create(&PostParams::default(), &cm)
        .await
        .expect("create cm");
    claims.get(name).await.expect("claim")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_left_by_older_versions_are_taken_over_without_provisioning() {
    let (env, client) = setup().await;
    env.ensure_namespace("legacy").await.expect("namespace");
    create_class(&client, "go-class", "Delete", &[])
        .await
        .expect("class");
    let rec = Recorder::default();

    // 1. Go library: generated name known only to the OB, objectBucketName missing.
    let go = write_raw_bound_claim(
        &client,
        "legacy",
        "go",
        json!({"storageClassName": "go-class", "generateBucketName": "go"}),
        "go-3c5a4e2f-8a4b-4a59",
        true,
    )
    .await;
    // 2. An older version wrote the generated name back into bucketName.
    let both = write_raw_bound_claim(&client, "legacy", "both", json!({"storageClassName": "go-class", "generateBucketName": "both", "bucketName": "both-x1y2z"}), "both-x1y2z", true).await;
    // 3. No labels or finalizers anywhere.
    let bare = write_raw_bound_claim(&client, "legacy", "bare", json!({"storageClassName": "go-class", "bucketName": "bare-bucket", "objectBucketName": "obc-legacy-bare"}), "bare-bucket", false).await;
    for (c, b) in [
        (&go, "go-3c5a4e2f-8a4b-4a59"),
        (&both, "both-x1y2z"),
        (&bare, "bare-bucket"),
    ] {
        rec.add_owned_bucket(b, &c.uid().unwrap_or_default());
    }

    let controller = RunningController::start(client.clone(), rec.clone());
    let claims: Api<ObjectBucketClaim> = Api::namespaced(client.clone(), "legacy");
    let obs: Api<ObjectBucket> = Api::all(client.clone());
    for name in ["go", "both", "bare"] {
        let claim = wait_for(T, format!("{name} to be repaired"), || async {
            let c = claims.get(name).await?;
            let ok = c.spec.object_bucket_name.as_deref() == Some(&format!("obc-legacy-{name}"))
                && has_finalizer(&c)
                && c.status.as_ref().is_some_and(|s| {
                    s.conditions
                        .iter()
                        .any(|x| x.type_ == "Bound" && x.status == "True")
                });
            Ok(ok.then_some(c))
        })
        .await
        .expect("repaired");
        assert_eq!(
            claim.labels().get(PROVISIONER_LABEL).map(String::as_str),
            Some(LABEL)
        );
        let ob = obs.get(&format!("obc-legacy-{name}")).await.expect("OB");
        assert!(
            has_finalizer(&ob) && ob.labels().get(PROVISIONER_LABEL).is_some(),
            "{name}: OB adopted"
        );
        let secret = Api::<Secret>::namespaced(client.clone(), "legacy")
            .get(name)
            .await
            .expect("secret");
        assert!(
            !has_finalizer(&secret) && secret.labels().get(PROVISIONER_LABEL).is_some(),
            "{name}: secret adopted (labelled, the finalizer of older versions off)"
        );
    }
    assert_eq!(
        rec.calls(),
        Vec::<Call>::new(),
        "takeover must not provision, grant, delete or revoke"
    );
    wait_event(&client, "legacy", "bare", |r, _| r == "TakenOver")
        .await
        .expect("a TakenOver Event");

    // A restart over the taken-over claims is a no-op too.
    controller.stop().await.expect("stops");
    let rv_before: BTreeMap<String, String> = claims
        .list(&ListParams::default())
        .await
        .expect("list")
        .items
        .iter()
        .map(|c| (c.name_any(), c.resource_version().unwrap_or_default()))
        .collect();
    let controller = RunningController::start(client.clone(), rec.clone());
    tokio::time::sleep(Duration::from_secs(3)).await;
    let rv_after: BTreeMap<String, String> = claims
        .list(&ListParams::default())
        .await
        .expect("list")
        .items
        .iter()
        .map(|c| (c.name_any(), c.resource_version().unwrap_or_default()))
        .collect();
    assert_eq!(rv_before, rv_after, "a restart wrote to bound claims");
    assert!(rec.calls().is_empty());

    // And deleting a taken-over claim deletes the bucket the Go library made.
    claims
        .delete("go", &DeleteParams::default())
        .await
        .expect("delete");
    wait_gone(&claims, "go", T).await.expect("gone");
    wait_gone(&obs, "obc-legacy-go", T).await.expect("OB gone");
    assert!(
        !rec.buckets().contains("go-3c5a4e2f-8a4b-4a59"),
        "{:?}",
        rec.calls()
    );
    controller.stop().await.expect("stops");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crd_schema_without_object_bucket_name_neither_loops_nor_reprovisions() {
    let env = TestEnv::start().await.expect("env");
    let client = env.admin_client();
    // The claim CRD as some older installs have it: no spec.objectBucketName.
    install_crds_without_object_bucket_name(&env)
        .await
        .expect("old CRDs");
    env.ensure_namespace("old").await.expect("ns");
    create_class(&client, "c", "Delete", &[])
        .await
        .expect("class");

    let rec = Recorder::default();
    let controller = RunningController::start(client.clone(), rec.clone());
    create_claim(&client, "old", "pruned", generated("c", "pruned"))
        .await
        .expect("claim");
    let claim = wait_phase(&client, "old", "pruned", ClaimPhase::Bound, T)
        .await
        .expect("binds");
    assert!(
        claim.spec.object_bucket_name.is_none(),
        "the schema prunes it"
    );
    wait_event(&client, "old", "pruned", |r, _| {
        r == "ObjectBucketNameDropped"
    })
    .await
    .expect("an ObjectBucketNameDropped Event");
    // A second controller (a restart) finds the OB by name: no second bucket.
    controller.stop().await.expect("stops");
    let controller = RunningController::start(client.clone(), rec.clone());
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        rec.count(|c| matches!(c, Call::Provision(_))),
        1,
        "{:?}",
        rec.calls()
    );
    assert_eq!(rec.buckets().len(), 1);
    controller.stop().await.expect("stops");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_done_work_is_resumed_and_direct_ob_deletion_waits_for_the_claim() {
    let (env, client) = setup().await;
    env.ensure_namespace("resume").await.expect("ns");
    create_class(&client, "c", "Delete", &[])
        .await
        .expect("class");
    let rec = Recorder::default();

    // A crash after the claim was prepared and the bucket created, before
    // the ObjectBucket: the claim carries the finalizer and generated name.
    let claims: Api<ObjectBucketClaim> = Api::namespaced(client.clone(), "resume");
    let mut claim = ObjectBucketClaim::new("half", generated("c", "half"));
    claim.metadata.finalizers = Some(vec![FINALIZER.into()]);
    claim.metadata.labels = Some(BTreeMap::from([(PROVISIONER_LABEL.into(), LABEL.into())]));
    claim.metadata.annotations = Some(BTreeMap::from([(
        "objectbucket.io/generated-bucket-name".into(),
        "half-aaaabbbb".into(),
    )]));
    let claim = claims
        .create(&PostParams::default(), &claim)
        .await
        .expect("claim");
    rec.add_owned_bucket("half-aaaabbbb", &claim.uid().unwrap_or_default());

    let controller = RunningController::start(client.clone(), rec.clone());
    wait_phase(&client, "resume", "half", ClaimPhase::Bound, T)
        .await
        .expect("resumes");
    assert_eq!(rec.buckets().len(), 1, "no second bucket");
    assert_eq!(rec.calls(), vec![Call::Provision("half-aaaabbbb".into())]);

    // Deleting the OB directly: it waits (Terminating) while the claim lives.
    let obs: Api<ObjectBucket> = Api::all(client.clone());
    obs.delete("obc-resume-half", &DeleteParams::default())
        .await
        .expect("delete OB");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let ob = obs.get("obc-resume-half").await.expect("still there");
    assert!(ob.metadata.deletion_timestamp.is_some() && has_finalizer(&ob));
    let pending = wait_phase(&client, "resume", "half", ClaimPhase::Pending, T)
        .await
        .expect("claim says why");
    assert!(
        message(&pending).contains("Delete the claim to release the bucket"),
        "{}",
        message(&pending)
    );
    // Deleting the claim then completes both.
    claims
        .delete("half", &DeleteParams::default())
        .await
        .expect("delete claim");
    wait_gone(&claims, "half", T).await.expect("claim gone");
    wait_gone(&obs, "obc-resume-half", T)
        .await
        .expect("OB gone");
    assert!(rec.buckets().is_empty());

    // A claim force-deleted past its finalizer leaves an orphan OB: it is torn down.
    create_claim(&client, "resume", "forced", generated("c", "forced"))
        .await
        .expect("claim");
    wait_phase(&client, "resume", "forced", ClaimPhase::Bound, T)
        .await
        .expect("binds");
    claims
        .patch(
            "forced",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .expect("strip finalizer");
    claims
        .delete("forced", &DeleteParams::default())
        .await
        .expect("delete");
    wait_gone(&claims, "forced", T).await.expect("gone");
    wait_gone(&obs, "obc-resume-forced", T)
        .await
        .expect("orphan OB torn down");
    assert!(
        rec.buckets().is_empty(),
        "orphaned bucket deleted per reclaim policy Delete"
    );
    assert_eq!(PROVISIONER, "test.objectbucket.io/recorder");
    controller.stop().await.expect("stops");
}

/// A deletion pass reads the ObjectBucket, Secret and ConfigMap, then calls
/// the provisioner. Objects changed meanwhile (another controller's
/// annotation; a cache that missed events across an apiserver restart) make
/// its finalizer patches fail with 409: it must re-read and release them
/// all, not drop the one whose write lost and release the claim without it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_changed_during_a_deletion_pass_are_still_released() {
    let (env, client) = setup().await;
    env.ensure_namespace("moved").await.expect("ns");
    create_class(&client, "c", "Delete", &[])
        .await
        .expect("class");
    let rec = Recorder::default();
    let controller = RunningController::start(client.clone(), rec.clone());
    create_claim(&client, "moved", "m", generated("c", "moved"))
        .await
        .expect("claim");
    wait_phase(&client, "moved", "m", ClaimPhase::Bound, T)
        .await
        .expect("binds");

    let gate = rec.hold_teardowns();
    let claims: Api<ObjectBucketClaim> = Api::namespaced(client.clone(), "moved");
    claims
        .delete("m", &DeleteParams::default())
        .await
        .expect("delete claim");
    gate.entered(1, T)
        .await
        .expect("the deletion pass tears down");
    let touch = Patch::Merge(json!({"metadata": {"annotations": {"example.com/touched": "yes"}}}));
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "moved");
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), "moved");
    let obs: Api<ObjectBucket> = Api::all(client.clone());
    secrets
        .patch("m", &PatchParams::default(), &touch)
        .await
        .expect("touch Secret");
    config_maps
        .patch("m", &PatchParams::default(), &touch)
        .await
        .expect("touch ConfigMap");
    obs.patch("obc-moved-m", &PatchParams::default(), &touch)
        .await
        .expect("touch ObjectBucket");
    gate.open();

    wait_gone(&claims, "m", T).await.expect("claim released");
    wait_gone(&secrets, "m", T).await.expect("Secret deleted");
    wait_gone(&config_maps, "m", T)
        .await
        .expect("ConfigMap deleted");
    wait_gone(&obs, "obc-moved-m", T)
        .await
        .expect("ObjectBucket deleted");
    assert!(rec.buckets().is_empty(), "bucket deleted");
    assert_eq!(
        rec.count(|c| matches!(c, Call::Delete(_))),
        1,
        "one teardown: {:?}",
        rec.calls()
    );
    controller.stop().await.expect("stops");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_leader_acts_and_it_serves_metrics_and_health() {
    use k8s_openapi::api::coordination::v1::Lease;
    use lib_provisioner::ControllerBuilder;
    use lib_provisioner::leader::LeaderElection;

    let (env, client) = setup().await;
    env.ensure_namespace("ha").await.expect("namespace");
    create_class(&client, "c", "Delete", &[])
        .await
        .expect("class");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let election = |id: &str| {
        LeaderElection::new("default", "test-provisioner", id)
            .with_lease_duration(Duration::from_secs(6))
    };
    let rec_a = Recorder::default();
    let a = RunningController::start_with(
        client.clone(),
        ControllerBuilder::new(PROVISIONER, rec_a.clone())
            .leader_election(election("replica-a"))
            .serve_on(([127, 0, 0, 1], port).into()),
    );
    let leases: Api<Lease> = Api::namespaced(client.clone(), "default");
    let holder = || async {
        let lease = leases.get_opt("test-provisioner").await?;
        Ok::<_, anyhow::Error>(lease.and_then(|l| l.spec?.holder_identity))
    };
    wait_for(T, "replica-a to lead", || async {
        Ok((holder().await?.as_deref() == Some("replica-a")).then_some(()))
    })
    .await
    .expect("a leads");
    let rec_b = Recorder::default();
    let b = RunningController::start_with(
        client.clone(),
        ControllerBuilder::new(PROVISIONER, rec_b.clone()).leader_election(election("replica-b")),
    );

    create_claim(&client, "ha", "one", generated("c", "one"))
        .await
        .expect("claim");
    wait_phase(&client, "ha", "one", ClaimPhase::Bound, T)
        .await
        .expect("binds");
    assert_eq!(rec_a.count(|c| matches!(c, Call::Provision(_))), 1);
    assert!(
        rec_b.calls().is_empty(),
        "the standby acted: {:?}",
        rec_b.calls()
    );

    let http = reqwest::Client::new();
    let get = |path: &'static str| {
        let http = http.clone();
        async move {
            let r = http
                .get(format!("http://127.0.0.1:{port}{path}"))
                .send()
                .await
                .expect("request");
            (r.status().as_u16(), r.text().await.expect("body"))
        }
    };
    assert_eq!(get("/healthz").await.0, 200);
    assert_eq!(get("/readyz").await, (200, "ready".to_owned()));
    let (_, metrics) = get("/metrics").await;
    let content_type = http
        .get(format!("http://127.0.0.1:{port}/metrics"))
        .send()
        .await
        .expect("request")
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    assert_eq!(
        content_type.as_deref(),
        Some("application/openmetrics-text; version=1.0.0; charset=utf-8"),
        "what prometheus-client writes"
    );
    for needle in [
        "obc_claims{phase=\"Bound\"} 1",
        "obc_provisioner_operations_total{operation=\"provision\",result=\"ok\"} 1",
        "obc_reconciles_total{result=\"ok\"}",
        "obc_reconcile_duration_seconds_bucket",
        "obc_bucket_reconcile_duration_seconds_count",
    ] {
        assert!(
            metrics.contains(needle),
            "metrics lack {needle}:\n{metrics}"
        );
    }

    // The leader stops (and releases the lease): the standby takes over.
    a.stop().await.expect("a stops");
    wait_for(T, "replica-b to lead", || async {
        Ok((holder().await?.as_deref() == Some("replica-b")).then_some(()))
    })
    .await
    .expect("b leads");
    create_claim(&client, "ha", "two", generated("c", "two"))
        .await
        .expect("claim");
    wait_phase(&client, "ha", "two", ClaimPhase::Bound, T)
        .await
        .expect("binds under b");
    assert_eq!(
        rec_b.count(|c| matches!(c, Call::Provision(_))),
        1,
        "{:?}",
        rec_b.calls()
    );
    assert_eq!(
        rec_a.count(|c| matches!(c, Call::Provision(_))),
        1,
        "a stopped acting"
    );
    b.stop().await.expect("b stops");
}
