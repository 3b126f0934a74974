//! The RBAC the COSI controllers need, held against what they did: the
//! library with COSI on (both roles) runs as the sample's ServiceAccount
//! with `deploy/rbac.yaml` plus [`COSI_RBAC`]; a claim, a static Bucket and
//! a BucketAccess go to ready and are deleted. The apiserver's audit log
//! must show no request denied, and every COSI grant used.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, PostParams};
use lib_provisioner::cosi::api::*;
use obc_tests::TestEnv;
use obc_tests::cosi_recording::{DRIVER, install_cosi_crds};
use obc_tests::rbac::{Scope, audited_requests, grants_of};
use obc_tests::setup::{install_deploy, spawn_provisioner};

const BIN: &str = env!("CARGO_BIN_EXE_cosi-crash");
const T: Duration = Duration::from_secs(40);
const SA: (&str, &str) = ("obc-system", "sample-provisioner");

/// What the COSI controllers need beyond the OBC provisioner's RBAC: the
/// manifest users apply.
const COSI_RBAC: &str = include_str!("../../deploy/rbac-cosi.yaml");

/// Grants the scenario cannot show in the audit log.
const NOT_EXERCISED: &[(&str, &str, &str)] = &[
    // An admission-time authorization check, not a request.
    (
        "objectstorage.k8s.io",
        "bucketaccesses/finalizers",
        "update",
    ),
    // Classes come from their caches; a GET only on a cache miss or where
    // they are not watched (lib-provisioner/src/cosi/fresh.rs).
    ("objectstorage.k8s.io", "bucketclasses", "get"),
    ("objectstorage.k8s.io", "bucketaccessclasses", "get"),
    // kube-runtime's `Recorder` PATCHes an Event it publishes a second time
    // (a series): a wait or refusal shown again after it was cleared. Until
    // issue 37 every claim's moment of waiting for its driver was shown, and
    // a deletion's wait repeated one; since `DRIVER_GRACE` this flow repeats
    // an Event only by chance (one run in three).
    ("events.k8s.io", "events", "patch"),
];

async fn wait(what: &str, done: impl AsyncFn() -> bool) {
    let start = Instant::now();
    while !done().await {
        assert!(start.elapsed() < T, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn claim(spec: BucketClaimSpec, name: &str) -> BucketClaim {
    BucketClaim::new(name, spec)
}

#[tokio::test(flavor = "multi_thread")]
async fn cosi_rbac_is_exactly_what_the_controllers_use() {
    let env = TestEnv::start().await.expect("test environment starts");
    install_deploy(&env).await.expect("OBC CRDs and RBAC");
    install_cosi_crds(&env).await.expect("COSI CRDs");
    env.apply_yaml(COSI_RBAC).await.expect("COSI RBAC");
    let client = env.admin_client();
    let ns = "cosi-rbac";
    env.ensure_namespace(ns).await.expect("namespace");
    let kubeconfig = env
        .service_account_kubeconfig(SA.0, SA.1)
        .await
        .expect("kubeconfig");
    let store = env.dir().join("cosi-rbac-store.json");
    let log = env.dir().join("cosi-rbac.log");
    let mut cmd = tokio::process::Command::new(BIN);
    cmd.env_clear().env("COSI_STORE_FILE", &store);
    let mut child =
        spawn_provisioner(&mut cmd, &kubeconfig, "info", &log).expect("cosi-crash starts");

    let pp = PostParams::default();
    Api::<BucketClass>::all(client.clone())
        .create(
            &pp,
            &BucketClass::new(
                "gold",
                BucketClassSpec {
                    driver_name: DRIVER.into(),
                    deletion_policy: BucketDeletionPolicy::Delete,
                    parameters: None,
                },
            ),
        )
        .await
        .expect("class");
    Api::<BucketAccessClass>::all(client.clone())
        .create(
            &pp,
            &BucketAccessClass::new(
                "rw",
                BucketAccessClassSpec {
                    driver_name: DRIVER.into(),
                    authentication_type: AuthenticationType::Key,
                    parameters: None,
                    disallowed_bucket_access_modes: None,
                    multi_bucket_access: None,
                },
            ),
        )
        .await
        .expect("access class");
    let claims = Api::<BucketClaim>::namespaced(client.clone(), ns);
    let accesses = Api::<BucketAccess>::namespaced(client.clone(), ns);
    let secrets = Api::<Secret>::namespaced(client.clone(), ns);
    claims
        .create(
            &pp,
            &claim(
                BucketClaimSpec {
                    bucket_class_name: Some("gold".into()),
                    ..Default::default()
                },
                "data",
            ),
        )
        .await
        .expect("claim");
    // A static Bucket the claim binds: the claim UID is patched into it.
    // (Its store bucket does not exist: the driver's lookup waits; the
    // binding is what is exercised.)
    Api::<Bucket>::all(client.clone())
        .create(
            &pp,
            &Bucket::new(
                "static-rbac",
                BucketSpec {
                    driver_name: DRIVER.into(),
                    deletion_policy: BucketDeletionPolicy::Retain,
                    parameters: None,
                    protocols: None,
                    bucket_claim_ref: BucketClaimReference {
                        name: "old".into(),
                        namespace: ns.into(),
                        uid: None,
                    },
                    existing_bucket_id: Some("missing-in-store".into()),
                },
            ),
        )
        .await
        .expect("static Bucket");
    claims
        .create(
            &pp,
            &claim(
                BucketClaimSpec {
                    existing_bucket_name: Some("static-rbac".into()),
                    ..Default::default()
                },
                "old",
            ),
        )
        .await
        .expect("static claim");
    accesses
        .create(
            &pp,
            &BucketAccess::new(
                "app",
                BucketAccessSpec {
                    bucket_claims: vec![BucketClaimAccess {
                        bucket_claim_name: "data".into(),
                        access_mode: BucketAccessMode::ReadWrite,
                        access_secret_name: "app-data".into(),
                    }],
                    bucket_access_class_name: "rw".into(),
                    protocol: ObjectProtocol::S3,
                    service_account_name: None,
                },
            ),
        )
        .await
        .expect("access");
    wait("the access to be ready", async || {
        accesses
            .get_opt("app")
            .await
            .ok()
            .flatten()
            .and_then(|a| a.status)
            .is_some_and(|s| s.ready_to_use)
    })
    .await;
    wait("the static Bucket to be bound", async || {
        Api::<Bucket>::all(client.clone())
            .get_opt("static-rbac")
            .await
            .ok()
            .flatten()
            .is_some_and(|b| b.spec.bucket_claim_ref.uid.is_some())
    })
    .await;
    accesses
        .delete("app", &DeleteParams::default())
        .await
        .expect("delete access");
    claims
        .delete("data", &DeleteParams::default())
        .await
        .expect("delete claim");
    claims
        .delete("old", &DeleteParams::default())
        .await
        .expect("delete static claim");
    wait("everything to be gone", async || {
        claims.get_opt("data").await.ok().flatten().is_none()
            && claims.get_opt("old").await.ok().flatten().is_none()
            && accesses.get_opt("app").await.ok().flatten().is_none()
            && secrets.get_opt("app-data").await.ok().flatten().is_none()
    })
    .await;
    child.kill().await.expect("kill");

    let user = format!("system:serviceaccount:{}:{}", SA.0, SA.1);
    let (used, denied) = audited_requests(&env.audit_log_path(), &user).expect("audit log");
    assert!(denied.is_empty(), "denied: {denied:?}");
    let grants = grants_of(COSI_RBAC, SA.0, SA.1).expect("grants");
    assert!(!grants.is_empty());
    let unused: Vec<String> = grants
        .iter()
        .filter(|g| g.scope == Scope::Cluster)
        .filter(|g| !used.iter().any(|r| g.covers(r)))
        .filter(|g| {
            !NOT_EXERCISED.contains(&(g.group.as_str(), g.resource.as_str(), g.verb.as_str()))
        })
        .map(ToString::to_string)
        .collect();
    assert!(unused.is_empty(), "COSI grants never used: {unused:?}");
    let cosi_used: Vec<String> = used
        .iter()
        .filter(|r| r.group == "objectstorage.k8s.io" || r.resource == "secrets")
        .map(|r| format!("{} {}/{}", r.verb, r.group, r.resource))
        .collect();
    println!("COSI requests: {cosi_used:?}");
}
