//! Namespaced mode end to end: the sample provisioner serving two namespaces
//! under `deploy/rbac-namespaced.yaml` (a Role in each, no cluster-wide
//! access to claims, Secrets or ConfigMaps), against the real apiserver's
//! RBAC and RustFS. Claims there bind and are torn down; a claim in a third
//! namespace is never touched; and the apiserver's audit log shows no
//! request of the provisioner refused. And one controller serves every
//! listed namespace: one concurrency limit over them all.

use std::time::Duration;

use kube::api::{Api, DeleteParams, PostParams};
use lib_provisioner::ControllerBuilder;
use lib_provisioner::api::{ClaimPhase, ObjectBucketClaim, ObjectBucketClaimSpec};
use lib_provisioner::leader::LeaderElection;
use obc_tests::TestEnv;
use obc_tests::recording::{
    PROVISIONER, Recorder, RunningController, create_claim, create_class_for, wait_gone, wait_phase,
};
use obc_tests::reliability::register_secret;
use obc_tests::rustfs::RustFs;
use obc_tests::setup::{
    create_admin_secret, create_class, install_crds, repo_file, start_with_crds,
};
use obc_tests::wait_for;
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
    for ns in ["team-a", "team-b", "team-c"] {
        env.ensure_namespace(ns).await.expect("ns");
    }
    env.apply_yaml(&repo_file("deploy/namespace.yaml").expect("file"))
        .await
        .expect("namespace");
    let rbac = repo_file("deploy/rbac-namespaced.yaml").expect("file");
    env.apply_yaml(&rbac).await.expect("rbac");
    env.apply_yaml(&second_namespace(&rbac, "team-b"))
        .await
        .expect("rbac for team-b");
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
            .namespaces(["team-a", "team-b", "team-a"])
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
    for ns in ["team-a", "team-b", "team-c"] {
        Api::<ObjectBucketClaim>::namespaced(admin.clone(), ns)
            .create(&PostParams::default(), &ObjectBucketClaim::new("c", spec()))
            .await
            .expect("claim");
    }
    for ns in ["team-a", "team-b"] {
        wait_phase(&admin, ns, "c", ClaimPhase::Bound, T)
            .await
            .unwrap_or_else(|e| panic!("{ns}'s claim binds: {e:#}"));
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let other = Api::<ObjectBucketClaim>::namespaced(admin.clone(), "team-c")
        .get("c")
        .await
        .expect("claim");
    assert!(
        other.status.is_none(),
        "team-c's claim was touched: {:?}",
        other.status
    );
    assert!(other.metadata.finalizers.is_none());

    for ns in ["team-a", "team-b"] {
        let claims = Api::<ObjectBucketClaim>::namespaced(admin.clone(), ns);
        claims
            .delete("c", &DeleteParams::default())
            .await
            .expect("delete");
        wait_gone(&claims, "c", T).await.expect("torn down");
    }
    controller.stop().await.expect("controller stops");
    store.stop().await;
    let (refused, seen) = refused(&env);
    assert!(seen > 0, "the audit log recorded nothing for {USER}");
    assert!(
        refused.is_empty(),
        "deploy/rbac-namespaced.yaml lacks what the provisioner needs: {refused:?}"
    );
}

/// The Role and RoleBinding `deploy/rbac-namespaced.yaml` gives team-a,
/// for namespace `ns`: what an operator adds per served namespace.
fn second_namespace(rbac: &str, ns: &str) -> String {
    rbac.split("\n---")
        .filter(|doc| doc.contains("namespace: team-a") && doc.contains("kind: Role"))
        .map(|doc| doc.replace("namespace: team-a", &format!("namespace: {ns}")))
        .collect::<Vec<_>>()
        .join("\n---\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_concurrency_limit_covers_every_listed_namespace() {
    let env = start_with_crds().await.expect("env");
    let client = env.admin_client();
    for ns in ["one", "two", "three"] {
        env.ensure_namespace(ns).await.expect("ns");
    }
    create_class_for(&client, "c", PROVISIONER, "Delete", &[])
        .await
        .expect("class");
    let rec = Recorder::default();
    rec.hang();
    let controller = RunningController::start_with(
        client.clone(),
        ControllerBuilder::new(PROVISIONER, rec.clone())
            .namespaces(["one", "two", "three"])
            .concurrency(1)
            .provisioner_timeout(Duration::from_secs(60)),
    );
    for ns in ["one", "two", "three"] {
        let spec = ObjectBucketClaimSpec {
            storage_class_name: "c".into(),
            generate_bucket_name: Some(ns.into()),
            ..Default::default()
        };
        create_claim(&client, ns, "c", spec).await.expect("claim");
    }
    wait_for(T, "a provision call", || async {
        Ok((rec.hung() >= 1).then_some(()))
    })
    .await
    .expect("one call starts");
    // Three namespaces, three waiting claims, one call at a time.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(rec.hung(), 1, "more calls than the one limit allows");
    rec.answer();
    for ns in ["one", "two", "three"] {
        wait_phase(&client, ns, "c", ClaimPhase::Bound, T)
            .await
            .unwrap_or_else(|e| panic!("{ns}'s claim binds: {e:#}"));
    }
    assert_eq!(rec.buckets().len(), 3, "{:?}", rec.buckets());
    controller.stop().await.expect("stops");
}
