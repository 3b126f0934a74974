//! Claims through Kubernetes' own user-facing roles, tried as a tenant: a
//! user (client certificate, not the admin) bound to the built-in `edit`
//! ClusterRole in one namespace by a RoleBinding, with the ClusterRole
//! aggregation controller running so that `edit` and `view` hold what they
//! hold in a real cluster, and `deploy/tenant-roles.yaml` applied. The
//! sample provisioner runs under `deploy/rbac.yaml` on RustFS, and the
//! apiserver's audit log shows that RBAC has no denied request and no
//! unused grant. Also: the provisioner may delete ConfigMaps only in its own
//! namespace (its creation intents), not in the tenants'.

use std::time::Duration;

use aws_sdk_s3::primitives::ByteStream;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use lib_provisioner::ControllerBuilder;
use lib_provisioner::api::{ClaimPhase, ObjectBucket, ObjectBucketClaim};
use lib_provisioner::leader::LeaderElection;
use obc_tests::rbac::{
    NEEDED_BUT_NOT_EXERCISED, Subject, allowed, check_rbac_is_exactly_what_is_used,
};
use obc_tests::recording::{RunningController, wait_gone, wait_phase};
use obc_tests::reliability::register_secret;
use obc_tests::rustfs::RustFs;
use obc_tests::setup::{create_admin_secret, install_deploy, repo_file};
use obc_tests::testenv::{Store, s3_client_for};
use obc_tests::{TestEnv, wait_for};
use sample_provisioner::S3Provisioner;

const T: Duration = Duration::from_secs(60);
/// The provisioner's namespace and ServiceAccount (`deploy/rbac.yaml`).
const SYSTEM: &str = "obc-system";
const SA: &str = "sample-provisioner";
/// The tenant's namespace, and another tenant's.
const TEAM: &str = "team-a";
const OTHER: &str = "team-b";
/// A user bound to `edit` in [`TEAM`], and one bound to `view` there.
const EDITOR: &str = "alice";
const VIEWER: &str = "victor";
const CLAIMS: &str = "objectbucketclaims";
const GROUP: &str = "objectbucket.io";

fn read(path: &str) -> String {
    repo_file(path).expect(path)
}

/// Whether `result` is the apiserver's 403.
fn is_forbidden<T: std::fmt::Debug>(result: &Result<T, kube::Error>) -> bool {
    matches!(result, Err(kube::Error::Api(s)) if s.code == 403)
}

/// Fails unless `result` is a 403, naming `what` was tried.
fn assert_forbidden<T: std::fmt::Debug>(result: Result<T, kube::Error>, what: &str) {
    assert!(
        is_forbidden(&result),
        "{what}: expected 403 Forbidden, got {result:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_provisioner_deletes_configmaps_in_its_own_namespace_only() {
    let env = TestEnv::start_with(Store::None).await.expect("env");
    install_deploy(&env).await.expect("CRDs, namespace, RBAC");
    env.ensure_namespace(TEAM).await.expect("ns");
    let admin = env.admin_client();
    let sa = Subject::service_account(SYSTEM, SA);
    let may = |verb: &'static str, ns: Option<&'static str>| {
        let (admin, sa) = (admin.clone(), sa.clone());
        async move {
            allowed(&admin, &sa, verb, "", "configmaps", ns)
                .await
                .expect("SubjectAccessReview")
        }
    };
    assert!(
        !may("delete", Some(TEAM)).await,
        "deploy/rbac.yaml lets the provisioner delete ConfigMaps in the tenant namespace {TEAM}: only its own intents in {SYSTEM} need delete"
    );
    assert!(
        !may("delete", None).await,
        "deploy/rbac.yaml lets the provisioner delete ConfigMaps cluster-wide"
    );
    assert!(
        may("delete", Some(SYSTEM)).await,
        "the provisioner may not delete its creation intents in {SYSTEM}"
    );
    // What the library's writes of the claim's ConfigMap need, in any
    // namespace (lib-provisioner/src/obc/writes/children.rs).
    for verb in ["get", "list", "watch", "create", "update", "patch"] {
        assert!(may(verb, Some(TEAM)).await, "{verb} configmaps in {TEAM}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_bound_to_edit_uses_claims_in_its_namespace_and_nothing_more() {
    let env = TestEnv::start_with(Store::None).await.expect("env");
    let store = RustFs::start(env.dir()).await.expect("rustfs");
    let admin = env.admin_client();
    install_deploy(&env).await.expect("CRDs, namespace, RBAC");
    env.apply_yaml(&read("deploy/tenant-roles.yaml"))
        .await
        .expect("deploy/tenant-roles.yaml");
    // After the CRDs: the garbage collector discovers types at its start.
    env.start_controller_manager()
        .await
        .expect("kube-controller-manager");
    let endpoint = store.endpoint().trim_end_matches('/').to_owned();
    let (ak, sk) = store.root_credentials();
    register_secret(&sk);
    create_admin_secret(&admin, SYSTEM, "sample-s3-admin", &ak, &sk)
        .await
        .expect("admin secret");
    example_class(&admin, &endpoint).await;
    for ns in [TEAM, OTHER] {
        env.ensure_namespace(ns).await.expect("ns");
    }
    bind_tenants(&env).await;

    let sa = env
        .service_account_client(SYSTEM, SA)
        .await
        .expect("sa client");
    let controller = RunningController::start_with(
        sa.clone(),
        ControllerBuilder::new("objectbucket.io/sample-s3", S3Provisioner::new(sa.clone()))
            .leader_election(LeaderElection::new(
                SYSTEM,
                "objectbucket.io-sample-s3",
                "test",
            )),
    );

    let alice = env.user_client(EDITOR, TEAM).await.expect("alice");
    let claim = editor_creates_and_uses_a_claim(&alice).await;
    editor_is_refused_the_rest(&alice, &claim).await;
    let victor = env.user_client(VIEWER, TEAM).await.expect("victor");
    viewer_reads_claims_only(&victor, &claim).await;

    // The editor deletes the claim; the provisioner tears it down.
    let claims = Api::<ObjectBucketClaim>::namespaced(alice.clone(), TEAM);
    claims
        .delete(&claim.name_any(), &DeleteParams::default())
        .await
        .expect("alice deletes her claim");
    wait_gone(&claims, &claim.name_any(), T)
        .await
        .expect("the claim goes");
    let secrets = Api::<Secret>::namespaced(alice.clone(), TEAM);
    wait_gone(&secrets, &claim.name_any(), T)
        .await
        .expect("its Secret goes with it (garbage collector)");

    controller.stop().await.expect("controller stops");
    store.stop().await;
    check_rbac_is_exactly_what_is_used(
        &env.audit_log_path(),
        &read("deploy/rbac.yaml"),
        "deploy/rbac.yaml",
        (SYSTEM, SA),
        NEEDED_BUT_NOT_EXERCISED,
    )
    .unwrap_or_else(|e| panic!("{e:#}"));
}

/// `deploy/example-storageclass.yaml` pointed at `endpoint`; deleting a
/// claim deletes its bucket's objects.
async fn example_class(admin: &Client, endpoint: &str) {
    let mut class: StorageClass =
        serde_yaml::from_str(&read("deploy/example-storageclass.yaml")).expect("class");
    let params = class.parameters.get_or_insert_with(Default::default);
    params.insert("endpoint".into(), endpoint.into());
    params.insert("forceDelete".into(), "true".into());
    Api::<StorageClass>::all(admin.clone())
        .create(&PostParams::default(), &class)
        .await
        .expect("class");
}

/// What a cluster administrator does for a namespace's users: a RoleBinding
/// to Kubernetes' own `edit` (and `view`), nothing about claims. Waits
/// until the aggregation controller has added the claims to those roles.
async fn bind_tenants(env: &TestEnv) {
    let binding = |user: &str, role: &str| {
        format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {{name: {user}-{role}, namespace: {TEAM}}}\nroleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {role}}}\nsubjects: [{{apiGroup: rbac.authorization.k8s.io, kind: User, name: {user}}}]\n"
        )
    };
    env.apply_yaml(&format!(
        "{}---\n{}",
        binding(EDITOR, "edit"),
        binding(VIEWER, "view")
    ))
    .await
    .expect("RoleBindings");
    let admin = env.admin_client();
    // `kubectl auth can-i create objectbucketclaims --as alice -n team-a`,
    // and `list` for the viewer.
    for (user, verb, role) in [(EDITOR, "create", "edit"), (VIEWER, "list", "view")] {
        let who = Subject::user(user);
        wait_for(T, format!("{user} ({role}) may {verb} claims"), || async {
            let may = allowed(&admin, &who, verb, GROUP, CLAIMS, Some(TEAM));
            Ok(may.await?.then_some(()))
        })
        .await
        .unwrap_or_else(|e| {
            panic!(
                "{e:#}: the ClusterRoles aggregated to {role} do not reach a user bound to {role}"
            )
        });
    }
}

/// As the editor: creates `deploy/example-claim.yaml` in [`TEAM`], sees it
/// Bound, reads its Secret and ConfigMap and writes to the bucket with them.
async fn editor_creates_and_uses_a_claim(alice: &Client) -> ObjectBucketClaim {
    let mut claim: ObjectBucketClaim =
        serde_yaml::from_str(&read("deploy/example-claim.yaml")).expect("claim");
    claim.metadata.namespace = Some(TEAM.into());
    let name = claim.name_any();
    Api::<ObjectBucketClaim>::namespaced(alice.clone(), TEAM)
        .create(&PostParams::default(), &claim)
        .await
        .unwrap_or_else(|e| panic!("{EDITOR}, bound to edit in {TEAM}, creates a claim: {e}"));
    let bound = wait_phase(alice, TEAM, &name, ClaimPhase::Bound, T)
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    let secret = Api::<Secret>::namespaced(alice.clone(), TEAM)
        .get(&name)
        .await
        .expect("alice reads the claim's Secret");
    let cm = Api::<ConfigMap>::namespaced(alice.clone(), TEAM)
        .get(&name)
        .await
        .expect("alice reads the claim's ConfigMap");
    let data = secret.data.unwrap_or_default();
    let value = |k: &str| String::from_utf8(data[k].0.clone()).expect("utf-8");
    let (key, secret_key) = (value("AWS_ACCESS_KEY_ID"), value("AWS_SECRET_ACCESS_KEY"));
    register_secret(&secret_key);
    let d = cm.data.unwrap_or_default();
    let s3 = s3_client_for(
        &format!("http://{}:{}", d["BUCKET_HOST"], d["BUCKET_PORT"]),
        &key,
        &secret_key,
    );
    s3.put_object()
        .bucket(&d["BUCKET_NAME"])
        .key("hello.txt")
        .body(ByteStream::from_static(b"from a tenant"))
        .send()
        .await
        .expect("alice writes to her bucket with the claim's credentials");
    bound
}

/// As the editor: claims in another namespace, ObjectBuckets (every
/// tenant's) and the claim's status (the provisioner's) are refused.
async fn editor_is_refused_the_rest(alice: &Client, claim: &ObjectBucketClaim) {
    let other = Api::<ObjectBucketClaim>::namespaced(alice.clone(), OTHER);
    let mut elsewhere = claim.clone();
    elsewhere.metadata = kube::api::ObjectMeta {
        name: Some("elsewhere".into()),
        namespace: Some(OTHER.into()),
        ..Default::default()
    };
    elsewhere.status = None;
    elsewhere.spec.object_bucket_name = None;
    assert_forbidden(
        other.create(&PostParams::default(), &elsewhere).await,
        "create a claim in another namespace",
    );
    assert_forbidden(
        other.list(&ListParams::default()).await,
        "list the claims of another namespace",
    );
    assert_forbidden(
        other.get("photos").await,
        "get a claim in another namespace",
    );
    let obs = Api::<ObjectBucket>::all(alice.clone());
    assert_forbidden(obs.list(&ListParams::default()).await, "list ObjectBuckets");
    let ob = claim.spec.object_bucket_name.clone().expect("bound");
    assert_forbidden(obs.get(&ob).await, "get her own claim's ObjectBucket");
    let own = Api::<ObjectBucketClaim>::namespaced(alice.clone(), TEAM);
    let forged = serde_json::json!({"status": {"phase": "Failed", "message": "forged"}});
    assert_forbidden(
        own.patch_status(
            &claim.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&forged),
        )
        .await,
        "patch her claim's status",
    );
    assert_forbidden(
        own.replace_status(&claim.name_any(), &PostParams::default(), claim)
            .await,
        "replace her claim's status",
    );
}

/// As the viewer: lists the claims of [`TEAM`]; may neither read their
/// credentials nor create a claim.
async fn viewer_reads_claims_only(victor: &Client, claim: &ObjectBucketClaim) {
    let claims = Api::<ObjectBucketClaim>::namespaced(victor.clone(), TEAM);
    let listed = claims
        .list(&ListParams::default())
        .await
        .expect("victor (view) lists claims");
    assert!(
        listed
            .items
            .iter()
            .any(|c| c.name_any() == claim.name_any()),
        "{:?}",
        listed
            .items
            .iter()
            .map(ResourceExt::name_any)
            .collect::<Vec<_>>()
    );
    assert_forbidden(
        Api::<Secret>::namespaced(victor.clone(), TEAM)
            .get(&claim.name_any())
            .await,
        "view reads the claim's Secret",
    );
    let mut another = claim.clone();
    another.metadata = kube::api::ObjectMeta {
        name: Some("another".into()),
        ..Default::default()
    };
    another.status = None;
    another.spec.object_bucket_name = None;
    assert_forbidden(
        claims.create(&PostParams::default(), &another).await,
        "view creates a claim",
    );
}
