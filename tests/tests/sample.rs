//! The sample provisioner end to end: real apiserver with RBAC, the
//! controller running as the ServiceAccount that `deploy/rbac.yaml` binds
//! (so a missing permission fails the test), and RustFS, a store with the
//! MinIO admin API, so each claim gets its own user (`credentialsMode`
//! per-claim, the default) and isolation between claims is asserted.

use std::time::Duration;

use aws_sdk_s3::primitives::ByteStream;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DeleteParams, PostParams};
use lib_provisioner::ControllerBuilder;
use lib_provisioner::api::{ClaimPhase, ObjectBucket, ObjectBucketClaim, ObjectBucketClaimSpec};
use obc_tests::recording::{RunningController, message, wait_gone, wait_phase};
use obc_tests::reliability::{assert_no_leaks, register_secret};
use obc_tests::rustfs::{RustFs, is_quota_exceeded, put_object_when_quota_ready};
use obc_tests::scoped_tracing;
use obc_tests::setup::{create_admin_secret, install_deploy, repo_file};
use obc_tests::testenv::s3_client_for;
use obc_tests::{TestEnv, wait_for};
use sample_provisioner::S3Provisioner;
use sample_provisioner::admin::AdminClient;
use sample_provisioner::credentials::{policy_name, user_name};

const T: Duration = Duration::from_secs(45);

fn read(path: &str) -> String {
    repo_file(path).expect(path)
}

async fn class(
    client: &kube::Client,
    endpoint: &str,
    file: &str,
    name: &str,
    extra: &[(&str, &str)],
) {
    // The file's first document is the class (a brownfield example also
    // carries a claim).
    let text = read(file);
    let first = text.split("\n---").next().unwrap_or_default();
    let mut class: StorageClass = serde_yaml::from_str(first).expect("class yaml");
    class.metadata.name = Some(name.into());
    let params = class.parameters.get_or_insert_with(Default::default);
    params.insert("endpoint".into(), endpoint.into());
    params.insert("adminSecretName".into(), "s3-admin".into());
    params.insert("adminSecretNamespace".into(), "obc-system".into());
    for (k, v) in extra {
        params.insert((*k).into(), (*v).into());
    }
    Api::<StorageClass>::all(client.clone())
        .create(&PostParams::default(), &class)
        .await
        .expect("class");
}

fn data(secret: &Secret, key: &str) -> String {
    String::from_utf8(secret.data.as_ref().expect("data")[key].0.clone()).expect("utf8")
}

#[test]
fn sample_provisioner_serves_claims_under_its_least_privilege_rbac() {
    let (log_dir, dispatch) = controller_log();
    scoped_tracing::block_on(dispatch, 2, serves_claims(log_dir));
}

async fn serves_claims(log_dir: tempfile::TempDir) {
    let env = TestEnv::start().await.expect("env");
    let store = RustFs::start(env.dir()).await.expect("rustfs");
    let endpoint = store.endpoint();
    let endpoint = endpoint.trim_end_matches('/');
    let admin = env.admin_client();
    install_deploy(&env)
        .await
        .expect("CRDs, deploy/ namespace and RBAC");
    let (ak, sk) = store.root_credentials();
    register_secret(&sk);
    let store_admin = AdminClient::new(
        endpoint,
        "us-east-1",
        lib_provisioner::Credentials::new(ak.clone(), sk.clone()),
    )
    .expect("admin client");
    create_admin_secret(&admin, "obc-system", "s3-admin", &ak, &sk)
        .await
        .expect("admin secret");
    class(
        &admin,
        endpoint,
        "deploy/example-storageclass.yaml",
        "s3-delete",
        &[("forceDelete", "true")],
    )
    .await;
    class(
        &admin,
        endpoint,
        "deploy/example-storageclass.yaml",
        "s3-readonly",
        &[("forceDelete", "true"), ("accessMode", "read-only")],
    )
    .await;
    class(
        &admin,
        endpoint,
        "deploy/example-storageclass.yaml",
        "s3-retain",
        &[],
    )
    .await;
    let mut retain: StorageClass = Api::<StorageClass>::all(admin.clone())
        .get("s3-retain")
        .await
        .expect("class");
    assert_eq!(retain.reclaim_policy.take().as_deref(), Some("Delete"));
    Api::<StorageClass>::all(admin.clone())
        .delete("s3-retain", &DeleteParams::default())
        .await
        .expect("delete");
    wait_gone(&Api::<StorageClass>::all(admin.clone()), "s3-retain", T)
        .await
        .expect("gone");
    retain.metadata = kube::api::ObjectMeta {
        name: Some("s3-retain".into()),
        ..Default::default()
    };
    retain.reclaim_policy = Some("Retain".into());
    Api::<StorageClass>::all(admin.clone())
        .create(&PostParams::default(), &retain)
        .await
        .expect("retain class");
    // Brownfield: a bucket with data that exists before any claim.
    let s3 = store.root_client();
    s3.create_bucket()
        .bucket("existing-data")
        .send()
        .await
        .expect("bucket");
    s3.put_object()
        .bucket("existing-data")
        .key("keep.txt")
        .body(ByteStream::from_static(b"keep me"))
        .send()
        .await
        .expect("put");
    class(
        &admin,
        endpoint,
        "deploy/example-brownfield-storageclass.yaml",
        "s3-existing",
        &[("bucketName", "existing-data")],
    )
    .await;

    // The controller, as system:serviceaccount:obc-system:sample-provisioner.
    let sa = env
        .service_account_client("obc-system", "sample-provisioner")
        .await
        .expect("sa client");
    let name = "objectbucket.io/sample-s3"; // deploy/example-storageclass.yaml's provisioner
    let controller = RunningController::start_with(
        sa.clone(),
        ControllerBuilder::new(name, S3Provisioner::new(sa.clone())).leader_election(
            lib_provisioner::leader::LeaderElection::new(
                "obc-system",
                "objectbucket.io-sample-s3",
                "test",
            ),
        ),
    );

    env.ensure_namespace("apps").await.expect("ns");
    let claims: Api<ObjectBucketClaim> = Api::namespaced(admin.clone(), "apps");
    let mk = |class: &str, prefix: Option<&str>| ObjectBucketClaimSpec {
        storage_class_name: class.into(),
        generate_bucket_name: prefix.map(str::to_owned),
        ..Default::default()
    };
    let mut quota = mk("s3-delete", Some("del"));
    quota.additional_config = Some([("maxSize".to_owned(), "64Ki".to_owned())].into());
    for (n, spec) in [
        ("del", quota),
        ("ret", mk("s3-retain", Some("ret"))),
        ("brown", mk("s3-existing", None)),
        ("ro", mk("s3-readonly", Some("ro"))),
    ] {
        claims
            .create(&PostParams::default(), &ObjectBucketClaim::new(n, spec))
            .await
            .expect("claim");
    }
    let mut uids = std::collections::BTreeMap::new();
    for n in ["del", "ret", "brown", "ro"] {
        let c = wait_phase(&admin, "apps", n, ClaimPhase::Bound, T)
            .await
            .unwrap_or_else(|e| panic!("{n}: {e:#}"));
        assert!(c.spec.object_bucket_name.is_some(), "{n}: {}", message(&c));
        uids.insert(n, c.metadata.uid.clone().expect("uid"));
    }

    // The claim's own Secret and ConfigMap are enough to use the bucket.
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), "apps");
    let cms: Api<ConfigMap> = Api::namespaced(admin.clone(), "apps");
    let use_bucket = |n: &'static str| {
        let (secrets, cms) = (secrets.clone(), cms.clone());
        async move {
            let secret = secrets.get(n).await.expect("secret");
            let cm = cms.get(n).await.expect("configmap");
            let d = cm.data.expect("data");
            let endpoint = format!("http://{}:{}", d["BUCKET_HOST"], d["BUCKET_PORT"]);
            let key = data(&secret, "AWS_ACCESS_KEY_ID");
            let secret = data(&secret, "AWS_SECRET_ACCESS_KEY");
            register_secret(&secret);
            (
                s3_client_for(&endpoint, &key, &secret),
                d["BUCKET_NAME"].clone(),
                key,
            )
        }
    };
    for n in ["del", "ret", "brown"] {
        let (client, bucket, key) = use_bucket(n).await;
        assert_eq!(key, user_name(&uids[n]), "{n} has its own user");
        put_object_when_quota_ready(&client, &bucket, "hello.txt", b"hello".to_vec())
            .await
            .unwrap_or_else(|e| panic!("{n}: put: {e:?}"));
        let got = client
            .get_object()
            .bucket(&bucket)
            .key("hello.txt")
            .send()
            .await
            .expect("get");
        assert_eq!(
            got.body
                .collect()
                .await
                .expect("body")
                .into_bytes()
                .as_ref(),
            b"hello"
        );
    }
    assert_isolated(&use_bucket("del").await, &use_bucket("ret").await.1).await;
    assert_isolated(&use_bucket("brown").await, &use_bucket("del").await.1).await;
    assert_read_only(&use_bucket("ro").await, &s3).await;
    assert_quota_enforced(&use_bucket("del").await).await;
    let users = store_admin.list_users().await.expect("list users");
    for (n, uid) in &uids {
        assert!(users.contains_key(&user_name(uid)), "{n}'s user: {users:?}");
    }
    assert_ownership_is_a_tag(&s3, &admin, &use_bucket("del").await.1, &uids["del"]).await;
    let policies = store_admin.list_canned_policies().await.expect("policies");
    assert!(
        policies.contains(&policy_name(&uids["del"])),
        "{policies:?}"
    );
    let obs: Api<ObjectBucket> = Api::all(admin.clone());
    let bucket_of = |n: &str| {
        let obs = obs.clone();
        let n = n.to_owned();
        async move {
            obs.get(&format!("obc-apps-{n}"))
                .await
                .expect("OB")
                .bucket_name()
                .expect("name")
                .to_owned()
        }
    };
    let (del_bucket, ret_bucket) = (bucket_of("del").await, bucket_of("ret").await);
    let exists = |b: String| {
        let s3 = s3.clone();
        async move { s3.head_bucket().bucket(b).send().await.is_ok() }
    };

    // Delete: the bucket (with data, forceDelete) is gone from the store.
    claims
        .delete("del", &DeleteParams::default())
        .await
        .expect("delete");
    wait_gone(&claims, "del", T).await.expect("gone");
    wait_for(T, "bucket deleted in S3", || {
        let e = exists(del_bucket.clone());
        async move { Ok((!e.await).then_some(())) }
    })
    .await
    .expect("bucket deleted");
    // Retain: the bucket and its data stay.
    claims
        .delete("ret", &DeleteParams::default())
        .await
        .expect("delete");
    wait_gone(&claims, "ret", T).await.expect("gone");
    let kept = s3
        .get_object()
        .bucket(&ret_bucket)
        .key("hello.txt")
        .send()
        .await
        .expect("data kept");
    assert_eq!(
        kept.body
            .collect()
            .await
            .expect("body")
            .into_bytes()
            .as_ref(),
        b"hello"
    );
    // Brownfield: deletion leaves the bucket and all its data.
    claims
        .delete("brown", &DeleteParams::default())
        .await
        .expect("delete");
    wait_gone(&claims, "brown", T).await.expect("gone");
    for key in ["keep.txt", "hello.txt"] {
        s3.get_object()
            .bucket("existing-data")
            .key(key)
            .send()
            .await
            .unwrap_or_else(|e| panic!("{key} lost: {e}"));
    }
    claims
        .delete("ro", &DeleteParams::default())
        .await
        .expect("delete");
    wait_gone(&claims, "ro", T).await.expect("gone");
    // Every claim's user and policy left the store with the claim, under
    // Delete, Retain and brownfield alike.
    let users = store_admin.list_users().await.expect("list users");
    let policies = store_admin.list_canned_policies().await.expect("policies");
    for (n, uid) in &uids {
        assert!(
            !users.contains_key(&user_name(uid)),
            "{n}'s user is left: {users:?}"
        );
        assert!(
            !policies.contains(&policy_name(uid)),
            "{n}'s policy is left"
        );
    }
    controller.stop().await.expect("controller stops");
    store.stop().await;
    // The secret scan: the root secret and every claim's secret, in every
    // log of the run (apiserver, etcd, audit, RustFS, the controller).
    let files = assert_no_leaks(env.dir()).expect("no credential in any log");
    assert!(files >= 3, "scanned {files} logs");
    assert_no_leaks(log_dir.path()).expect("no credential in the controller's log");
    let text = std::fs::read_to_string(log_dir.path().join("controller.log")).expect("log");
    assert!(
        text.contains("issued the claim its own user"),
        "the scanned log is the controller's"
    );
    assert_rbac_is_exactly_what_is_used(&env);
}

/// A subscriber for this test's tracing output (the controller's), at debug
/// level, writing to `controller.log` in a directory of its own, where the
/// secret scan reads it.
fn controller_log() -> (tempfile::TempDir, tracing::Dispatch) {
    let dir = tempfile::tempdir().expect("log dir");
    let file = std::fs::File::create(dir.path().join("controller.log")).expect("log file");
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter("info,lib_provisioner=debug,sample_provisioner=debug")
        .with_writer(std::sync::Mutex::new(file))
        .with_ansi(false)
        .finish();
    (dir, subscriber.into())
}

type ClaimAccess = (aws_sdk_s3::Client, String, String);

/// Ownership is the bucket's tag: no marker object in the user's bucket, no
/// state bucket on the store, no creation intent left once bound.
async fn assert_ownership_is_a_tag(
    root: &aws_sdk_s3::Client,
    kube: &kube::Client,
    bucket: &str,
    uid: &str,
) {
    let tags = root
        .get_bucket_tagging()
        .bucket(bucket)
        .send()
        .await
        .expect("tags")
        .tag_set;
    assert!(
        tags.iter()
            .any(|t| t.key() == sample_provisioner::store::OWNER_TAG && t.value() == uid),
        "{tags:?}"
    );
    let objects = root
        .list_objects_v2()
        .bucket(bucket)
        .send()
        .await
        .expect("list");
    let keys: Vec<_> = objects.contents().iter().filter_map(|o| o.key()).collect();
    assert!(
        !keys.contains(&".obc-owner"),
        "a marker in the user's bucket: {keys:?}"
    );
    let buckets = root.list_buckets().send().await.expect("buckets");
    assert!(
        !buckets
            .buckets()
            .iter()
            .any(|b| b.name() == Some(sample_provisioner::store::DEFAULT_STATE_BUCKET)),
        "a state bucket on a store with tagging"
    );
    let intents = Api::<ConfigMap>::namespaced(kube.clone(), "obc-system")
        .list(&kube::api::ListParams::default().labels(sample_provisioner::intents::INTENT_LABEL))
        .await
        .expect("intents");
    assert!(
        intents.items.is_empty(),
        "creation intents left after binding"
    );
}

fn code<E: aws_sdk_s3::error::ProvideErrorMetadata>(e: &E) -> String {
    e.code().unwrap_or("(no code)").to_owned()
}

/// A claim's credentials reach its bucket and nothing else: another
/// claim's bucket, creating buckets and listing them are refused.
async fn assert_isolated((client, own, key): &ClaimAccess, other: &str) {
    let put = client
        .put_object()
        .bucket(other)
        .key("intruder.txt")
        .body(ByteStream::from_static(b"x"))
        .send()
        .await
        .expect_err("another claim's bucket");
    assert_eq!(code(&put), "AccessDenied", "{key} writing {other}");
    let list = client
        .list_objects_v2()
        .bucket(other)
        .send()
        .await
        .expect_err("another claim's listing");
    assert_eq!(code(&list), "AccessDenied", "{key} listing {other}");
    let create = client
        .create_bucket()
        .bucket(format!("{key}-extra"))
        .send()
        .await
        .expect_err("creating a bucket");
    assert_eq!(code(&create), "AccessDenied", "{key} creating a bucket");
    // ListBuckets: RustFS answers with the buckets the user may reach
    // rather than AccessDenied; either way no other bucket shows.
    match client.list_buckets().send().await {
        Ok(out) => {
            let names: Vec<_> = out.buckets().iter().filter_map(|b| b.name()).collect();
            assert!(names.iter().all(|n| n == own), "{key} sees {names:?}");
        }
        Err(e) => assert_eq!(code(&e), "AccessDenied"),
    }
}

/// Read-only credentials read and list their bucket and cannot write it.
async fn assert_read_only((client, bucket, key): &ClaimAccess, root: &aws_sdk_s3::Client) {
    root.put_object()
        .bucket(bucket)
        .key("seed.txt")
        .body(ByteStream::from_static(b"seed"))
        .send()
        .await
        .expect("seed");
    client
        .get_object()
        .bucket(bucket)
        .key("seed.txt")
        .send()
        .await
        .expect("read-only reads");
    client
        .list_objects_v2()
        .bucket(bucket)
        .send()
        .await
        .expect("read-only lists");
    let put = client
        .put_object()
        .bucket(bucket)
        .key("nope.txt")
        .body(ByteStream::from_static(b"x"))
        .send()
        .await
        .expect_err("read-only writes");
    assert_eq!(code(&put), "AccessDenied", "{key}");
    let delete = client
        .delete_object()
        .bucket(bucket)
        .key("seed.txt")
        .send()
        .await
        .expect_err("read-only deletes");
    assert_eq!(code(&delete), "AccessDenied", "{key}");
}

/// The claim's `maxSize: 64Ki` is a hard quota on its bucket.
async fn assert_quota_enforced((client, bucket, _): &ClaimAccess) {
    let over = put_object_when_quota_ready(client, bucket, "too-big.bin", vec![0u8; 128 * 1024])
        .await
        .expect_err("a write over the quota");
    assert!(is_quota_exceeded(&over), "refused for the quota: {over:?}");
}

/// Compares what `deploy/rbac.yaml` grants with what the controller did, as
/// the apiserver's audit log recorded it (`obc_tests::rbac`).
fn assert_rbac_is_exactly_what_is_used(env: &TestEnv) {
    obc_tests::rbac::check_rbac_is_exactly_what_is_used(
        &env.audit_log_path(),
        &read("deploy/rbac.yaml"),
        "deploy/rbac.yaml",
        ("obc-system", "sample-provisioner"),
        obc_tests::rbac::NEEDED_BUT_NOT_EXERCISED,
    )
    .unwrap_or_else(|e| panic!("{e:#}"));
}
