//! Namespaced mode end to end: the sample provisioner serving one namespace
//! under `deploy/rbac-namespaced.yaml` (a Role in that namespace, no
//! cluster-wide access to claims, Secrets or ConfigMaps), against the real
//! apiserver's RBAC and RustFS. A claim there binds and is torn down; a
//! claim in another namespace is never touched; and the apiserver's audit
//! log shows no request of the provisioner refused.

use std::time::Duration;

use kube::api::{Api, DeleteParams, PostParams};
use lib_provisioner::ControllerBuilder;
use lib_provisioner::api::{ClaimPhase, ObjectBucketClaim, ObjectBucketClaimSpec};
use lib_provisioner::leader::LeaderElection;
use obc_tests::TestEnv;
use obc_tests::recording::{RunningController, wait_gone, wait_phase};
use obc_tests::reliability::register_secret;
use obc_tests::rustfs::RustFs;
use obc_tests::setup::{create_admin_secret, create_class, install_crds, repo_file};
use sample_provisioner::S3Provisioner;

const T: Duration = Duration::from_secs(45);
const USER: &str = "system:serviceaccount:obc-system:sample-provisioner";

/// The provisioner's requests the audit log shows refused (403), as
/// (API group, resource, verb, namespace), and how many it shows at all.
fn refused(env: &TestEnv) -> (Vec<(String, String, String, String)>, usize) {
    let log = std::fs::read_to_string(env.audit_log_path()).expect("audit log");
    let mut seen = 0;
    let mut refused = Vec::new();
    for line in log.lines() {
        let e: serde_json::Value = serde_json::from_str(line).expect("audit json");
        if e["user"]["username"] != USER {
            continue;
        }
        seen += 1;
        if e["responseStatus"]["code"] == 403 {
            let r = &e["objectRef"];
            let s = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_owned();
            refused.push((
                s(&r["apiGroup"]),
                s(&r["resource"]),
                s(&e["verb"]),
                s(&r["namespace"]),
            ));
        }
    }
    (refused, seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sample_serves_its_namespaces_under_role_only_rbac() {
    let env = TestEnv::start().await.expect("env");
    let store = RustFs::start(env.dir()).await.expect("rustfs");
    let admin = env.admin_client();
    install_crds(&env).await.expect("crds");
    for ns in ["team-a", "team-b"] {
        env.ensure_namespace(ns).await.expect("ns");
    }
    env.apply_yaml(&repo_file("deploy/namespace.yaml").expect("file"))
        .await
        .expect("namespace");
    env.apply_yaml(&repo_file("deploy/rbac-namespaced.yaml").expect("file"))
        .await
        .expect("rbac");
    let (ak, sk) = store.root_credentials();
    register_secret(&sk);
    create_admin_secret(&admin, "obc-system", "s3-admin", &ak, &sk)
        .await
        .expect("admin secret");
    let endpoint = store.endpoint().trim_end_matches('/').to_owned();
    let params = [
        ("endpoint", endpoint.as_str()),
        ("adminSecretName", "s3-admin"),
        ("adminSecretNamespace", "obc-system"),
        ("forceDelete", "true"),
    ];
    create_class(&admin, "s3", "objectbucket.io/sample-s3", "Delete", params)
        .await
        .expect("class");

    let sa = env
        .service_account_client("obc-system", "sample-provisioner")
        .await
        .expect("sa client");
    let controller = RunningController::start_with(
        sa.clone(),
        ControllerBuilder::new("objectbucket.io/sample-s3", S3Provisioner::new(sa))
            // Named twice: one set of watches all the same.
            .namespaces(["team-a", "team-a"])
            .leader_election(LeaderElection::new(
                "obc-system",
                "objectbucket.io-sample-s3",
                "test",
            )),
    );
    let spec = || ObjectBucketClaimSpec {
        storage_class_name: "s3".into(),
        generate_bucket_name: Some("ns".into()),
        ..Default::default()
    };
    for ns in ["team-a", "team-b"] {
        Api::<ObjectBucketClaim>::namespaced(admin.clone(), ns)
            .create(&PostParams::default(), &ObjectBucketClaim::new("c", spec()))
            .await
            .expect("claim");
    }
    wait_phase(&admin, "team-a", "c", ClaimPhase::Bound, T)
        .await
        .expect("team-a's claim binds");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let other = Api::<ObjectBucketClaim>::namespaced(admin.clone(), "team-b")
        .get("c")
        .await
        .expect("claim");
    assert!(
        other.status.is_none(),
        "team-b's claim was touched: {:?}",
        other.status
    );
    assert!(other.metadata.finalizers.is_none());

    let claims = Api::<ObjectBucketClaim>::namespaced(admin.clone(), "team-a");
    claims
        .delete("c", &DeleteParams::default())
        .await
        .expect("delete");
    wait_gone(&claims, "c", T).await.expect("torn down");
    controller.stop().await.expect("controller stops");
    store.stop().await;
    let (refused, seen) = refused(&env);
    assert!(seen > 0, "the audit log recorded nothing for {USER}");
    assert!(
        refused.is_empty(),
        "deploy/rbac-namespaced.yaml lacks what the provisioner needs: {refused:?}"
    );
}
