//! After bind, against the real apiserver and RustFS, with the sample
//! provisioner: each test changes one thing on a Bound claim and asserts
//! the end state in the store, in Kubernetes, in the status and the Events.
//!
//! - a claim's `additionalConfig` changes (applied, or refused with a reason);
//! - its StorageClass is deleted, or recreated with other parameters, before
//!   the claim is deleted (teardown uses what the ObjectBucket recorded);
//! - fields that cannot change after bind are refused by the apiserver;
//! - a claim whose `obc-<namespace>-<name>` is taken gets another name;
//! - its Secret or ConfigMap is edited or deleted (repaired, recreated).

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use lib_provisioner::api::{
    APPLIED_CONFIG_ANNOTATION, CLASS_PARAMETERS_ANNOTATION, ClaimPhase, ObjectBucket,
    ObjectBucketClaim, ObjectBucketClaimSpec,
};
use lib_provisioner::{CONFIG_APPLIED_CONDITION, ControllerBuilder};
use obc_tests::recording::{RunningController, install_crds, wait_event, wait_gone, wait_phase};
use obc_tests::reliability::register_secret;
use obc_tests::rustfs::{RustFs, is_quota_exceeded, put_object_when_quota_ready};
use obc_tests::testenv::s3_client_for;
use obc_tests::{TestEnv, wait_for};
use sample_provisioner::S3Provisioner;
use serde_json::json;

pub(crate) const T: Duration = Duration::from_secs(45);
pub(crate) const NS: &str = "apps";

/// The control plane, RustFS, the CRDs and `deploy/` RBAC, an admin
/// Secret, and the sample provisioner running as its ServiceAccount.
pub(crate) struct Fixture {
    pub(crate) env: TestEnv,
    pub(crate) store: RustFs,
    pub(crate) admin: Client,
    controller: Option<RunningController>,
    /// How often Bound claims are resynced and their buckets' config checked
    /// (the library's defaults unless a test sets it).
    checks_every: Option<Duration>,
}

fn read(path: &str) -> String {
    std::fs::read_to_string(format!("{}/../{path}", env!("CARGO_MANIFEST_DIR"))).expect(path)
}

impl Fixture {
    pub(crate) async fn start() -> Self {
        Self::start_checking(None).await
    }

    /// As [`Fixture::start`], resyncing Bound claims and checking their
    /// buckets' config every `every`.
    pub(crate) async fn start_checking(checks_every: Option<Duration>) -> Self {
        let env = TestEnv::start().await.expect("env");
        let store = RustFs::start(env.dir()).await.expect("rustfs");
        let admin = env.admin_client();
        install_crds(&env).await.expect("crds");
        env.apply_yaml(&read("deploy/namespace.yaml"))
            .await
            .expect("namespace");
        env.apply_yaml(&read("deploy/rbac.yaml"))
            .await
            .expect("rbac");
        let (ak, sk) = store.root_credentials();
        register_secret(&sk);
        let secret: Secret = serde_json::from_value(json!({
            "metadata": {"name": "s3-admin", "namespace": "obc-system"},
            "stringData": {"AWS_ACCESS_KEY_ID": ak, "AWS_SECRET_ACCESS_KEY": sk}
        }))
        .expect("secret");
        Api::<Secret>::namespaced(admin.clone(), "obc-system")
            .create(&PostParams::default(), &secret)
            .await
            .expect("admin secret");
        env.ensure_namespace(NS).await.expect("ns");
        let mut fixture = Self {
            env,
            store,
            admin,
            controller: None,
            checks_every,
        };
        fixture.class("s3", &fixture.endpoint()).await;
        fixture.start_controller().await;
        fixture
    }

    pub(crate) fn endpoint(&self) -> String {
        self.store.endpoint().trim_end_matches('/').to_owned()
    }

    async fn start_controller(&mut self) {
        let sa = self
            .env
            .service_account_client("obc-system", "sample-provisioner")
            .await
            .expect("sa client");
        let mut builder =
            ControllerBuilder::new("objectbucket.io/sample-s3", S3Provisioner::new(sa.clone()));
        if let Some(every) = self.checks_every {
            builder = builder.resync(every).config_check_interval(every);
        }
        self.controller = Some(RunningController::start_with(sa, builder));
    }

    /// A greenfield class of the sample (Delete, forceDelete) at `endpoint`.
    async fn class(&self, name: &str, endpoint: &str) {
        self.class_with(name, endpoint, &[]).await;
    }

    pub(crate) async fn class_with(&self, name: &str, endpoint: &str, extra: &[(&str, &str)]) {
        let mut class: StorageClass = serde_json::from_value(json!({
            "metadata": {"name": name},
            "provisioner": "objectbucket.io/sample-s3",
            "reclaimPolicy": "Delete",
            "parameters": {
                "endpoint": endpoint,
                "adminSecretName": "s3-admin",
                "adminSecretNamespace": "obc-system",
                "forceDelete": "true",
            }
        }))
        .expect("class");
        let params = class.parameters.get_or_insert_default();
        for (k, v) in extra {
            params.insert((*k).to_owned(), (*v).to_owned());
        }
        Api::<StorageClass>::all(self.admin.clone())
            .create(&PostParams::default(), &class)
            .await
            .expect("class");
    }

    async fn delete_class(&self, name: &str) {
        let api = Api::<StorageClass>::all(self.admin.clone());
        api.delete(name, &DeleteParams::default())
            .await
            .expect("delete class");
        wait_gone(&api, name, T).await.expect("class gone");
    }

    pub(crate) fn claims(&self) -> Api<ObjectBucketClaim> {
        Api::namespaced(self.admin.clone(), NS)
    }

    async fn bound_claim(&self, name: &str, config: &[(&str, &str)]) -> ObjectBucketClaim {
        self.bound_claim_of("s3", name, config).await
    }

    pub(crate) async fn bound_claim_of(
        &self,
        class: &str,
        name: &str,
        config: &[(&str, &str)],
    ) -> ObjectBucketClaim {
        let spec = ObjectBucketClaimSpec {
            storage_class_name: class.into(),
            generate_bucket_name: Some(name.into()),
            additional_config: (!config.is_empty()).then(|| {
                config
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect()
            }),
            ..Default::default()
        };
        self.claims()
            .create(&PostParams::default(), &ObjectBucketClaim::new(name, spec))
            .await
            .expect("claim");
        wait_phase(&self.admin, NS, name, ClaimPhase::Bound, T)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e:#}"))
    }

    pub(crate) async fn object_bucket(&self, claim: &ObjectBucketClaim) -> ObjectBucket {
        let name = claim.spec.object_bucket_name.clone().expect("bound");
        Api::<ObjectBucket>::all(self.admin.clone())
            .get(&name)
            .await
            .expect("ObjectBucket")
    }

    /// An S3 client with the claim's own credentials, and its bucket.
    pub(crate) async fn claim_client(&self, name: &str) -> (aws_sdk_s3::Client, String) {
        let secret = Api::<Secret>::namespaced(self.admin.clone(), NS)
            .get(name)
            .await
            .expect("secret");
        let cm = Api::<ConfigMap>::namespaced(self.admin.clone(), NS)
            .get(name)
            .await
            .expect("configmap");
        let d = cm.data.expect("data");
        let value = |k: &str| {
            String::from_utf8(secret.data.as_ref().expect("data")[k].0.clone()).expect("utf8")
        };
        let sk = value("AWS_SECRET_ACCESS_KEY");
        register_secret(&sk);
        let endpoint = format!("http://{}:{}", d["BUCKET_HOST"], d["BUCKET_PORT"]);
        (
            s3_client_for(&endpoint, &value("AWS_ACCESS_KEY_ID"), &sk),
            d["BUCKET_NAME"].clone(),
        )
    }

    pub(crate) async fn patch_claim(
        &self,
        name: &str,
        patch: serde_json::Value,
    ) -> kube::Result<ObjectBucketClaim> {
        self.claims()
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
    }

    /// None of `buckets` is left in the store, and no ObjectBucket at all.
    pub(crate) async fn assert_nothing_left(&self, buckets: &[String]) {
        let s3 = self.store.root_client();
        for bucket in buckets {
            assert!(
                s3.head_bucket().bucket(bucket).send().await.is_err(),
                "bucket {bucket} is left in the store"
            );
        }
        let obs = Api::<ObjectBucket>::all(self.admin.clone())
            .list(&Default::default())
            .await
            .expect("list");
        assert!(
            obs.items.is_empty(),
            "{} ObjectBuckets left",
            obs.items.len()
        );
    }

    pub(crate) async fn stop(mut self) {
        if let Some(c) = self.controller.take() {
            c.stop().await.expect("controller stops");
        }
        self.store.stop().await;
    }
}

pub(crate) fn condition(
    claim: &ObjectBucketClaim,
    type_: &str,
) -> Option<(String, String, Option<i64>)> {
    claim.status.as_ref().and_then(|s| {
        s.conditions
            .iter()
            .find(|c| c.type_ == type_)
            .map(|c| (c.status.clone(), c.reason.clone(), c.observed_generation))
    })
}

/// How many "Bound" Events the claim got (events.k8s.io only: `events_for`
/// reads both APIs, which show each Event once each).
async fn bound_events(client: &Client, name: &str) -> usize {
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client.clone(), NS);
    events
        .list(&Default::default())
        .await
        .expect("events")
        .items
        .iter()
        .filter(|e| {
            e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
                && e.reason.as_deref() == Some("Bound")
        })
        .map(|e| e.deprecated_count.unwrap_or(1).max(1) as usize)
        .sum()
}

pub(crate) fn observed_generation(claim: &ObjectBucketClaim) -> Option<i64> {
    claim.status.as_ref().and_then(|s| s.observed_generation)
}

/// Waits until the claim's `ConfigApplied` condition has `status` for its
/// current generation.
pub(crate) async fn wait_config(f: &Fixture, name: &str, status: &str) -> ObjectBucketClaim {
    let api = f.claims();
    wait_for(T, format!("{name}: ConfigApplied={status}"), || async {
        let c = api.get(name).await?;
        let ok = condition(&c, CONFIG_APPLIED_CONDITION)
            .is_some_and(|(s, _, g)| s == status && g == c.metadata.generation);
        Ok(ok.then_some(c))
    })
    .await
    .expect("condition")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quota_change_is_applied_and_only_then_observed_and_a_refused_one_says_why() {
    let f = Fixture::start().await;
    let bound = f.bound_claim("quota", &[("maxSize", "1Ki")]).await;
    let first_generation = bound.metadata.generation;
    let (s3, bucket) = f.claim_client("quota").await;
    let over = put_object_when_quota_ready(&s3, &bucket, "big.bin", vec![0u8; 8 * 1024])
        .await
        .expect_err("over the 1Ki quota");
    assert!(is_quota_exceeded(&over), "{over:?}");

    // Raised: applied, recorded, then observed; the claim stays Bound.
    f.patch_claim(
        "quota",
        json!({"spec": {"additionalConfig": {"maxSize": "1Mi"}}}),
    )
    .await
    .expect("edit maxSize");
    let c = wait_config(&f, "quota", "True").await;
    assert_eq!(observed_generation(&c), c.metadata.generation);
    assert_eq!(
        c.status.as_ref().and_then(|s| s.phase),
        Some(ClaimPhase::Bound)
    );
    let ob = f.object_bucket(&c).await;
    assert_eq!(
        ob.metadata.annotations.as_ref().expect("annotations")[APPLIED_CONFIG_ANNOTATION],
        r#"{"maxSize":"1Mi"}"#
    );
    wait_for(T, "a write within the raised quota", || {
        let (s3, bucket) = (s3.clone(), bucket.clone());
        async move {
            let put =
                put_object_when_quota_ready(&s3, &bucket, "big.bin", vec![0u8; 8 * 1024]).await;
            Ok(put.is_ok().then_some(()))
        }
    })
    .await
    .expect("the new quota is in force");
    let events = wait_event(&f.admin, NS, "quota", |r, n| {
        r == "Updated" && n.contains("maxSize")
    })
    .await
    .expect("an Updated Event");
    assert_eq!(
        bound_events(&f.admin, "quota").await,
        1,
        "an update is not a second bind: {events:?}"
    );

    // Refused: the claim stays Bound, says why, and the generation it
    // observed stays at the last applied spec.
    let applied_generation = observed_generation(&c);
    f.patch_claim(
        "quota",
        json!({"spec": {"additionalConfig": {"maxSize": "1Mi", "accessMode": "read-only"}}}),
    )
    .await
    .expect("edit accessMode");
    let c = wait_config(&f, "quota", "False").await;
    let (_, reason, _) = condition(&c, CONFIG_APPLIED_CONDITION).expect("condition");
    assert_eq!(reason, "UpdateRefused");
    assert_eq!(
        c.status.as_ref().and_then(|s| s.phase),
        Some(ClaimPhase::Bound)
    );
    assert_eq!(observed_generation(&c), applied_generation);
    assert!(applied_generation > first_generation);
    wait_event(&f.admin, NS, "quota", |r, n| {
        r == "UpdateRefused" && n.contains("accessMode cannot change")
    })
    .await
    .expect("an UpdateRefused Event");
    // Still usable with its credentials.
    s3.get_object()
        .bucket(&bucket)
        .key("big.bin")
        .send()
        .await
        .expect("the bucket still serves the claim");

    // Reverted: applied again, observed, ConfigApplied back to True.
    f.patch_claim(
        "quota",
        json!({"spec": {"additionalConfig": {"maxSize": "1Mi", "accessMode": null}}}),
    )
    .await
    .expect("revert");
    let c = wait_config(&f, "quota", "True").await;
    assert_eq!(observed_generation(&c), c.metadata.generation);
    f.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn teardown_uses_the_recorded_class_when_the_class_is_gone_or_replaced() {
    let f = Fixture::start().await;
    let gone = f.bound_claim("gone", &[]).await;
    let replaced = f.bound_claim("replaced", &[]).await;
    let mut buckets = Vec::new();
    for c in [&gone, &replaced] {
        let ob = f.object_bucket(c).await;
        let recorded =
            &ob.metadata.annotations.as_ref().expect("annotations")[CLASS_PARAMETERS_ANNOTATION];
        assert!(recorded.contains(&f.endpoint()), "{recorded}");
        buckets.push(ob.bucket_name().expect("bucket").to_owned());
    }
    // The class is deleted, and recreated pointing at nothing: its
    // parameters must not be what teardown uses.
    f.delete_class("s3").await;
    f.claims()
        .delete("gone", &DeleteParams::default())
        .await
        .expect("delete");
    wait_gone(&f.claims(), "gone", T)
        .await
        .unwrap_or_else(|e| panic!("{e:#}: the claim hangs without its class"));
    f.class("s3", "http://127.0.0.1:1").await;
    f.claims()
        .delete("replaced", &DeleteParams::default())
        .await
        .expect("delete");
    wait_gone(&f.claims(), "replaced", T)
        .await
        .unwrap_or_else(|e| panic!("{e:#}: teardown used the replaced class"));
    f.assert_nothing_left(&buckets).await;
    f.stop().await;
}

/// A claim as the provisioner leaves it when it prepares it
/// (`spec.objectBucketName` recorded with the finalizer) and then refuses
/// it: its class and bucket name may still change. Only the status the
/// provisioner writes Bound pins them; `objectBucketName` itself is pinned
/// once set. The claim's class is another provisioner's, so that the
/// controller leaves it (and the status written here) alone.
async fn a_prepared_claim_stays_fixable_until_its_status_says_bound(f: &Fixture) {
    // Both classes exist and are another provisioner's, so the controller
    // never writes this claim: the status this test writes stays as it is
    // (a missing class would have the controller write its own status).
    for name in ["foreign", "foreign-too"] {
        let mut foreign = StorageClass::default();
        foreign.metadata.name = Some(name.into());
        foreign.provisioner = "example.com/another".into();
        Api::<StorageClass>::all(f.admin.clone())
            .create(&PostParams::default(), &foreign)
            .await
            .expect("foreign class");
    }
    let prepared = ObjectBucketClaim::new(
        "prepared",
        ObjectBucketClaimSpec {
            storage_class_name: "foreign".into(),
            bucket_name: Some("prepared-bucket".into()),
            object_bucket_name: Some("obc-apps-prepared".into()),
            ..Default::default()
        },
    );
    f.claims()
        .create(&PostParams::default(), &prepared)
        .await
        .expect("claim");
    for (field, value) in [
        ("bucketName", json!("another-bucket")),
        ("storageClassName", json!("foreign-too")),
        ("generateBucketName", json!("prepared")),
    ] {
        f.patch_claim("prepared", json!({"spec": {field: value}}))
            .await
            .unwrap_or_else(|e| panic!("{field} of a claim not yet bound: {e}"));
    }
    let moved = f
        .patch_claim(
            "prepared",
            json!({"spec": {"objectBucketName": "obc-apps-elsewhere"}}),
        )
        .await
        .expect_err("objectBucketName is pinned once set");
    assert!(
        moved
            .to_string()
            .contains("spec.objectBucketName cannot change once set"),
        "{moved}"
    );
    f.claims()
        .patch_status(
            "prepared",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Bound"}})),
        )
        .await
        .expect("status");
    let refused = f
        .patch_claim("prepared", json!({"spec": {"bucketName": "third-bucket"}}))
        .await
        .expect_err("bucketName of a Bound claim");
    assert!(
        refused
            .to_string()
            .contains("spec.bucketName cannot change after the claim is bound"),
        "{refused}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fields_that_chose_the_bucket_are_refused_by_the_apiserver_once_bound() {
    let f = Fixture::start().await;
    f.bound_claim("fixed", &[]).await;
    for (field, value) in [
        ("storageClassName", json!("another")),
        ("bucketName", json!("another-bucket")),
        ("generateBucketName", json!("other")),
        ("generateBucketName", json!(null)),
        ("objectBucketName", json!("obc-apps-other")),
        ("objectBucketName", json!(null)),
    ] {
        let refused = f
            .patch_claim("fixed", json!({"spec": {field: value}}))
            .await
            .expect_err(field);
        let text = refused.to_string();
        let why = if field == "objectBucketName" {
            "cannot change once set"
        } else {
            "cannot change after the claim is bound"
        };
        assert!(
            text.contains(&format!("spec.{field} {why}")),
            "{field}: {text}"
        );
    }
    // What may change still can.
    f.patch_claim(
        "fixed",
        json!({"spec": {"additionalConfig": {"maxSize": "1Gi"}}}),
    )
    .await
    .expect("additionalConfig is mutable");
    a_prepared_claim_stays_fixable_until_its_status_says_bound(&f).await;
    // Before bind, anything may change: a claim waiting for a class that
    // does not exist can be pointed at one that does.
    let waiting = ObjectBucketClaim::new(
        "waiting",
        ObjectBucketClaimSpec {
            storage_class_name: "missing".into(),
            generate_bucket_name: Some("waiting".into()),
            ..Default::default()
        },
    );
    f.claims()
        .create(&PostParams::default(), &waiting)
        .await
        .expect("claim");
    f.patch_claim("waiting", json!({"spec": {"storageClassName": "s3"}}))
        .await
        .expect("an unbound claim's class can change");
    wait_phase(&f.admin, NS, "waiting", ClaimPhase::Bound, T)
        .await
        .expect("bound once its class exists");
    f.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn colliding_and_overlong_object_bucket_names_get_one_of_their_own() {
    let f = Fixture::start().await;
    let long_ns = "n".repeat(63);
    let long_name = "c".repeat(200);
    for ns in ["a-b", "a", long_ns.as_str()] {
        f.env.ensure_namespace(ns).await.expect("ns");
    }
    // "a-b"/"c" takes obc-a-b-c; "a"/"b-c" would have the same name.
    let spec = || ObjectBucketClaimSpec {
        storage_class_name: "s3".into(),
        generate_bucket_name: Some("shared".into()),
        ..Default::default()
    };
    let mut bound = Vec::new();
    for (ns, name) in [
        ("a-b", "c"),
        ("a", "b-c"),
        (long_ns.as_str(), long_name.as_str()),
    ] {
        Api::<ObjectBucketClaim>::namespaced(f.admin.clone(), ns)
            .create(
                &PostParams::default(),
                &ObjectBucketClaim::new(name, spec()),
            )
            .await
            .expect("claim");
        let c = wait_phase(&f.admin, ns, name, ClaimPhase::Bound, T)
            .await
            .unwrap_or_else(|e| panic!("{ns}/{name}: {e:#}"));
        bound.push(c);
    }
    let names: Vec<String> = bound
        .iter()
        .map(|c| c.spec.object_bucket_name.clone().expect("bound"))
        .collect();
    assert_eq!(names[0], "obc-a-b-c", "the first keeps the default");
    for (c, name) in bound.iter().zip(&names).skip(1) {
        assert_eq!(
            *name,
            format!("obc-{}", c.metadata.uid.as_deref().expect("uid"))
        );
        wait_event(
            &f.admin,
            c.metadata.namespace.as_deref().expect("ns"),
            c.metadata.name.as_deref().expect("name"),
            |r, n| r == "ObjectBucketNamed" && n.contains(name.as_str()),
        )
        .await
        .expect("an ObjectBucketNamed Event");
    }
    let mut buckets = Vec::new();
    for c in &bound {
        let ob = f.object_bucket(c).await;
        let r = ob.spec.claim_ref.clone().expect("claimRef");
        assert_eq!(
            (r.namespace, r.name),
            (c.metadata.namespace.clone(), c.metadata.name.clone())
        );
        buckets.push(ob.bucket_name().expect("bucket").to_owned());
    }
    // Teardown finds each claim's own ObjectBucket.
    for c in &bound {
        let api = Api::<ObjectBucketClaim>::namespaced(
            f.admin.clone(),
            c.metadata.namespace.as_deref().expect("ns"),
        );
        let name = c.metadata.name.as_deref().expect("name");
        api.delete(name, &DeleteParams::default())
            .await
            .expect("delete");
        wait_gone(&api, name, T).await.expect("claim gone");
    }
    f.assert_nothing_left(&buckets).await;
    f.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edited_and_deleted_secrets_and_config_maps_are_repaired() {
    let f = Fixture::start().await;
    f.bound_claim("drift", &[]).await;
    let secrets = Api::<Secret>::namespaced(f.admin.clone(), NS);
    let cms = Api::<ConfigMap>::namespaced(f.admin.clone(), NS);
    let key_of = |s: &Secret| {
        String::from_utf8(
            s.data.as_ref().expect("data")["AWS_ACCESS_KEY_ID"]
                .0
                .clone(),
        )
        .expect("utf8")
    };
    let original = secrets.get("drift").await.expect("secret");
    let version = |m: &kube::api::ObjectMeta| m.resource_version.clone();

    // Secret data edited by hand: restored with working credentials.
    secrets
        .patch(
            "drift",
            &PatchParams::default(),
            &Patch::Merge(json!({"stringData": {"AWS_SECRET_ACCESS_KEY": "tampered"}})),
        )
        .await
        .expect("tamper");
    let repaired = wait_for(T, "the Secret restored", || async {
        let s = secrets.get("drift").await?;
        let v = String::from_utf8(
            s.data.as_ref().expect("data")["AWS_SECRET_ACCESS_KEY"]
                .0
                .clone(),
        )?;
        Ok((v != "tampered").then_some(s))
    })
    .await
    .expect("restored");
    assert_eq!(key_of(&repaired), key_of(&original), "the claim's own user");
    let (s3, bucket) = f.claim_client("drift").await;
    wait_for(T, "the restored credentials work", || {
        let (s3, bucket) = (s3.clone(), bucket.clone());
        async move {
            Ok(s3
                .head_bucket()
                .bucket(bucket)
                .send()
                .await
                .is_ok()
                .then_some(()))
        }
    })
    .await
    .expect("usable");

    // ConfigMap data edited: rewritten from the ObjectBucket.
    cms.patch(
        "drift",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"BUCKET_NAME": "someone-elses"}})),
    )
    .await
    .expect("tamper");
    wait_for(T, "the ConfigMap restored", || async {
        let cm = cms.get("drift").await?;
        Ok((cm.data.as_ref().expect("data")["BUCKET_NAME"] == bucket).then_some(()))
    })
    .await
    .expect("restored");

    // Deleted: never left Terminating, written again.
    for kind in ["Secret", "ConfigMap"] {
        let before = match kind {
            "Secret" => {
                let s = secrets.get("drift").await.expect("secret");
                secrets
                    .delete("drift", &DeleteParams::default())
                    .await
                    .expect("delete");
                s.metadata.uid
            }
            _ => {
                let c = cms.get("drift").await.expect("cm");
                cms.delete("drift", &DeleteParams::default())
                    .await
                    .expect("delete");
                c.metadata.uid
            }
        };
        wait_for(T, format!("the {kind} written again"), || async {
            let meta = match kind {
                "Secret" => secrets.get_opt("drift").await?.map(|s| s.metadata),
                _ => cms.get_opt("drift").await?.map(|c| c.metadata),
            };
            Ok(meta.filter(|m| m.uid != before && m.deletion_timestamp.is_none()))
        })
        .await
        .expect("recreated");
    }
    let (s3, bucket) = f.claim_client("drift").await;
    wait_for(T, "the recreated credentials work", || {
        let (s3, bucket) = (s3.clone(), bucket.clone());
        async move {
            Ok(s3
                .head_bucket()
                .bucket(bucket)
                .send()
                .await
                .is_ok()
                .then_some(()))
        }
    })
    .await
    .expect("usable");
    for reason in ["SecretRepaired", "ConfigMapRepaired"] {
        wait_event(&f.admin, NS, "drift", |r, _| r == reason)
            .await
            .unwrap_or_else(|e| panic!("{reason}: {e:#}"));
    }
    // Settled: nothing rewrites the repaired children.
    let settled = secrets.get("drift").await.expect("secret");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        version(&secrets.get("drift").await.expect("secret").metadata),
        version(&settled.metadata)
    );
    f.stop().await;
}

/// After a restart the controller reads only the children its watched
/// metadata shows another writer changed: an unchanged Secret or ConfigMap
/// costs no GET (the restart over many claims used to read every one), and
/// an edit made while it was down is still repaired.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_reads_only_the_children_someone_else_changed() {
    let mut f = Fixture::start().await;
    for name in ["calm-1", "calm-2", "edited"] {
        f.bound_claim(name, &[]).await;
    }
    if let Some(c) = f.controller.take() {
        c.stop().await.expect("controller stops");
    }
    let secrets = Api::<Secret>::namespaced(f.admin.clone(), NS);
    let cms = Api::<ConfigMap>::namespaced(f.admin.clone(), NS);
    secrets
        .patch(
            "edited",
            &PatchParams::default(),
            &Patch::Merge(json!({"stringData": {"AWS_SECRET_ACCESS_KEY": "tampered"}})),
        )
        .await
        .expect("tamper");
    cms.patch(
        "edited",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"BUCKET_NAME": "someone-elses"}})),
    )
    .await
    .expect("tamper");
    let audit = f.env.audit_log_path();
    let before = std::fs::read_to_string(&audit)
        .expect("audit log")
        .lines()
        .count();

    f.start_controller().await;
    wait_for(T, "both edited children restored", || async {
        let s = secret_value(&secrets.get("edited").await?, "AWS_SECRET_ACCESS_KEY");
        let cm = cms.get("edited").await?;
        let bucket = &cm.data.as_ref().expect("data")["BUCKET_NAME"];
        Ok((s != "tampered" && bucket != "someone-elses").then_some(()))
    })
    .await
    .expect("repaired after the restart");
    // Every claim's pass has run by now (the repaired claim's did); give
    // the others a moment beyond it.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let reads = child_reads(&audit, before);
    for calm in ["calm-1", "calm-2"] {
        let writers = secrets
            .get(calm)
            .await
            .expect("secret")
            .metadata
            .managed_fields;
        assert!(
            !reads.iter().any(|(_, name)| name == calm),
            "unchanged children of {calm} were read after the restart: {reads:?}; its Secret's writers: {writers:?}"
        );
    }
    for kind in ["secrets", "configmaps"] {
        assert!(
            reads.contains(&(kind.to_owned(), "edited".to_owned())),
            "the edited {kind} was read: {reads:?}"
        );
    }
    f.stop().await;
}

/// The GETs of Secrets and ConfigMaps in namespace [`NS`] by the
/// provisioner's ServiceAccount, in the audit log after its first `skip`
/// lines: (resource, name).
fn child_reads(audit: &std::path::Path, skip: usize) -> Vec<(String, String)> {
    let log = std::fs::read_to_string(audit).expect("audit log");
    log.lines()
        .skip(skip)
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|e| {
            e["verb"] == "get"
                && e["objectRef"]["namespace"] == NS
                && e["user"]["username"] == "system:serviceaccount:obc-system:sample-provisioner"
        })
        .filter_map(|e| {
            let resource = e["objectRef"]["resource"].as_str()?.to_owned();
            let name = e["objectRef"]["name"].as_str()?.to_owned();
            ["secrets", "configmaps"]
                .contains(&resource.as_str())
                .then_some((resource, name))
        })
        .collect()
}

fn secret_value(s: &Secret, key: &str) -> String {
    String::from_utf8(s.data.as_ref().expect("data")[key].0.clone()).expect("utf8")
}

/// The claim's users on the store (its own and the one a rotation
/// alternates with).
async fn users_of(f: &Fixture, uid: &str) -> Vec<String> {
    let (ak, sk) = f.store.root_credentials();
    let admin = sample_provisioner::admin::AdminClient::new(
        &f.endpoint(),
        "us-east-1",
        lib_provisioner::Credentials::new(ak, sk),
    )
    .expect("admin client");
    let mine = [
        sample_provisioner::credentials::user_name(uid),
        sample_provisioner::credentials::rotated_user_name(uid),
    ];
    admin
        .list_users()
        .await
        .expect("users")
        .into_keys()
        .filter(|u| mine.contains(u))
        .collect()
}

async fn rotate(f: &Fixture, name: &str, value: &str) {
    f.patch_claim(
        name,
        json!({"metadata": {"annotations": {lib_provisioner::api::ROTATE_ANNOTATION: value}}}),
    )
    .await
    .expect("annotate");
}

/// Waits until the claim's `CredentialsRotated` condition is `status` and
/// its message names `value`.
async fn wait_rotated(f: &Fixture, name: &str, status: &str, value: &str) -> ObjectBucketClaim {
    let api = f.claims();
    wait_for(
        T,
        format!("{name}: CredentialsRotated={status} ({value})"),
        || async {
            let c = api.get(name).await?;
            let ok = c.status.as_ref().is_some_and(|s| {
                s.conditions.iter().any(|k| {
                    k.type_ == lib_provisioner::CREDENTIALS_ROTATED_CONDITION
                        && k.status == status
                        && k.message.contains(value)
                })
            });
            Ok(ok.then_some(c))
        },
    )
    .await
    .expect("rotation")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_rotate_new_then_switch_then_revoke_and_a_shared_key_says_it_cannot() {
    let f = Fixture::start().await;
    let claim = f.bound_claim("rot", &[]).await;
    let uid = claim.metadata.uid.clone().expect("uid");
    let secrets = Api::<Secret>::namespaced(f.admin.clone(), NS);
    let (old_client, bucket) = f.claim_client("rot").await;
    let old_key = secret_value(
        &secrets.get("rot").await.expect("secret"),
        "AWS_ACCESS_KEY_ID",
    );
    for (value, round) in [("2026-12-04T18:00:00Z", 1), ("2026-12-04T19:00:00Z", 2)] {
        rotate(&f, "rot", value).await;
        let c = wait_rotated(&f, "rot", "True", value).await;
        assert_eq!(
            c.status.as_ref().and_then(|s| s.phase),
            Some(ClaimPhase::Bound)
        );
        // The sample says what became of the previous key: removed now,
        // not "handed over without saying".
        let said = c
            .status
            .iter()
            .flat_map(|s| s.conditions.iter())
            .find(|k| k.type_ == lib_provisioner::CREDENTIALS_ROTATED_CONDITION)
            .map(|k| k.message.clone())
            .unwrap_or_default();
        assert!(
            said.contains("was revoked") && !said.contains("without saying"),
            "round {round}: the condition does not say the previous key was revoked: {said}"
        );
        let s = secrets.get("rot").await.expect("secret");
        let key = secret_value(&s, "AWS_ACCESS_KEY_ID");
        // Alternates between the claim's two users; only the current lives.
        assert_eq!(key != old_key, round == 1, "round {round}: {key}");
        assert_eq!(users_of(&f, &uid).await, vec![key.clone()], "round {round}");
        let (client, _) = f.claim_client("rot").await;
        client
            .put_object()
            .bucket(&bucket)
            .key(format!("round-{round}"))
            .body(aws_sdk_s3::primitives::ByteStream::from_static(b"x"))
            .send()
            .await
            .unwrap_or_else(|e| panic!("round {round}: the new key works: {e:?}"));
        let ob = f.object_bucket(&c).await;
        let a = ob.metadata.annotations.clone().unwrap_or_default();
        assert_eq!(
            a.get(lib_provisioner::api::ROTATED_ANNOTATION)
                .map(String::as_str),
            Some(value)
        );
        assert!(!a.contains_key(lib_provisioner::api::ROTATION_PENDING_ANNOTATION));
    }
    // The first key was revoked in round 1 (and its user came back with a
    // fresh secret in round 2): the old secret no longer works.
    assert!(
        old_client
            .head_bucket()
            .bucket(&bucket)
            .send()
            .await
            .is_err(),
        "the first credentials still work"
    );
    wait_event(&f.admin, NS, "rot", |r, _| r == "Rotated")
        .await
        .expect("a Rotated Event");

    // A shared-admin class cannot rotate: it says so, keeps the credentials.
    f.class_with(
        "s3-shared",
        &f.endpoint(),
        &[("credentialsMode", "shared-admin")],
    )
    .await;
    f.bound_claim_of("s3-shared", "shared", &[]).await;
    let before = secrets.get("shared").await.expect("secret");
    rotate(&f, "shared", "now").await;
    let c = wait_rotated(&f, "shared", "False", "now").await;
    let reason = c.status.as_ref().and_then(|s| {
        s.conditions
            .iter()
            .find(|k| k.type_ == lib_provisioner::CREDENTIALS_ROTATED_CONDITION)
            .map(|k| k.reason.clone())
    });
    assert_eq!(reason.as_deref(), Some("RotationNotSupported"));
    assert_eq!(
        secrets.get("shared").await.expect("secret").data,
        before.data,
        "the shared key is kept"
    );

    // Teardown removes whichever users the claim has.
    f.claims()
        .delete("rot", &DeleteParams::default())
        .await
        .expect("delete");
    wait_gone(&f.claims(), "rot", T).await.expect("gone");
    assert!(users_of(&f, &uid).await.is_empty());
    f.stop().await;
}

/// Sets the verbs of the ClusterRole's rule for `resource`.
async fn set_verbs(f: &Fixture, resource: &str, verbs: &[&str]) {
    use k8s_openapi::api::rbac::v1::ClusterRole;
    let api = Api::<ClusterRole>::all(f.admin.clone());
    let mut role = api.get("sample-provisioner").await.expect("role");
    for rule in role.rules.iter_mut().flatten() {
        if rule.resources.iter().flatten().any(|r| r == resource) {
            rule.verbs = verbs.iter().map(|v| (*v).to_owned()).collect();
        }
    }
    api.replace("sample-provisioner", &PostParams::default(), &role)
        .await
        .expect("replace role");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_rbac_verb_is_shown_on_the_claim_then_cleared() {
    let f = Fixture::start().await;
    // The claim's Secret cannot be created.
    set_verbs(
        &f,
        "secrets",
        &["get", "list", "watch", "update", "patch", "delete"],
    )
    .await;
    let spec = ObjectBucketClaimSpec {
        storage_class_name: "s3".into(),
        generate_bucket_name: Some("rbac".into()),
        ..Default::default()
    };
    f.claims()
        .create(
            &PostParams::default(),
            &ObjectBucketClaim::new("rbac", spec),
        )
        .await
        .expect("claim");
    let api = f.claims();
    let shown = wait_for(
        Duration::from_secs(60),
        "the API error on the claim",
        || async {
            let c = api.get("rbac").await?;
            let m = obc_tests::recording::message(&c);
            Ok((m.contains("could not")
                && m.contains("forbidden")
                && m.contains("create")
                && m.contains("secrets")
                && m.contains("RBAC"))
            .then_some(m))
        },
    )
    .await
    .expect("shown");
    assert!(shown.contains("deploy/rbac.yaml"), "{shown}");
    wait_event(&f.admin, NS, "rbac", |r, _| r == "KubernetesAPIError")
        .await
        .expect("a KubernetesAPIError Event");
    // Granted again: the claim binds, and the message is the bound one.
    set_verbs(
        &f,
        "secrets",
        &[
            "get", "list", "watch", "create", "update", "patch", "delete",
        ],
    )
    .await;
    // Nothing watches RBAC: the next retry comes with the claim's backoff
    // (0.5 s doubling: 16-32 s once the error is shown, more on a slow machine).
    let c = wait_phase(
        &f.admin,
        NS,
        "rbac",
        ClaimPhase::Bound,
        Duration::from_secs(150),
    )
    .await
    .expect("bound once granted");
    let m = obc_tests::recording::message(&c);
    assert!(m.contains("is bound"), "{m}");
    f.stop().await;
}
