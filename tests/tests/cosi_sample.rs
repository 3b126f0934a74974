//! The sample provisioner serving both APIs at once, end to end on RustFS:
//! an ObjectBucketClaim and a BucketClaim bind side by side; two
//! BucketAccesses (ReadWrite, ReadOnly) on the BucketClaim get store users
//! of their own whose keys (their Secrets' `COSI_S3_*`) do what the mode
//! says and nothing else; deleting a BucketAccess revokes its keys and
//! deletes its Secret; deleting the BucketClaim (`deletionPolicy: Delete`)
//! deletes the bucket. The controller runs as the ServiceAccount
//! `deploy/rbac.yaml` and `deploy/rbac-cosi.yaml` bind, wired as the
//! sample's binary wires it ([`sample_provisioner::serve`]), and the
//! apiserver's audit log shows that those two files grant exactly what it
//! used: no denied request, no unused grant.

use std::time::Duration;

use aws_sdk_s3::primitives::ByteStream;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use kube::{Client, ResourceExt};
use lib_provisioner::ControllerBuilder;
use lib_provisioner::api::{ClaimPhase, ObjectBucketClaim, ObjectBucketClaimSpec};
use obc_tests::cosi_e2e::{
    AccessKeys, COSI_RBAC, DRIVER, Kind, Reach, access_keys, access_of, api, claim_of_class,
    create, install_cosi_crds, reach, status_str, wait_ready,
};
use obc_tests::rbac::check_rbac_is_exactly_what_is_used;
use obc_tests::recording::{RunningController, wait_gone, wait_phase};
use obc_tests::reliability::{assert_no_leaks, claim_bucket, claim_keys, register_secret};
use obc_tests::rustfs::RustFs;
use obc_tests::setup::{create_admin_secret, install_deploy, repo_file};
use obc_tests::testenv::s3_client_for;
use obc_tests::{TestEnv, wait_for};
use sample_provisioner::S3Provisioner;
use sample_provisioner::admin::AdminClient;

const T: Duration = Duration::from_secs(60);
const SYSTEM: &str = "obc-system";
const SA: &str = "sample-provisioner";
const NS: &str = "apps";
const PROBE: &str = "probe.txt";

fn read(path: &str) -> String {
    repo_file(path).expect(path)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sample_serves_object_bucket_claims_and_cosi_side_by_side() {
    let env = TestEnv::start().await.expect("env");
    let store = RustFs::start(env.dir()).await.expect("rustfs");
    let endpoint = store.endpoint().trim_end_matches('/').to_owned();
    let admin = env.admin_client();
    install_deploy(&env)
        .await
        .expect("CRDs, deploy/ namespace, RBAC");
    install_cosi_crds(&env).await.expect("crds/cosi/");
    env.apply_yaml(&read(COSI_RBAC)).await.expect(COSI_RBAC);
    let (ak, sk) = store.root_credentials();
    register_secret(&sk);
    create_admin_secret(&admin, SYSTEM, "s3-admin", &ak, &sk)
        .await
        .expect("admin secret");
    let store_admin = AdminClient::new(
        &endpoint,
        "us-east-1",
        lib_provisioner::Credentials::new(ak.clone(), sk.clone()),
    )
    .expect("admin client");
    storage_class(&admin, &endpoint).await;
    let (bucket_class, access_class) = cosi_classes(&env, &endpoint).await;
    env.ensure_namespace(NS).await.expect("ns");

    let sa = env.service_account_client(SYSTEM, SA).await.expect("sa");
    let controller = start_controller(sa).await;

    // Side by side: an ObjectBucketClaim and a BucketClaim.
    let obc = ObjectBucketClaimSpec {
        storage_class_name: "s3-delete".into(),
        generate_bucket_name: Some("photos".into()),
        ..Default::default()
    };
    Api::<ObjectBucketClaim>::namespaced(admin.clone(), NS)
        .create(
            &PostParams::default(),
            &ObjectBucketClaim::new("photos", obc),
        )
        .await
        .expect("OBC");
    create(
        &admin,
        Kind::BucketClaim,
        NS,
        "pics",
        claim_of_class(&bucket_class),
    )
    .await
    .expect("BucketClaim");
    wait_phase(&admin, NS, "photos", ClaimPhase::Bound, T)
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    let claim = wait_ready(&admin, Kind::BucketClaim, NS, "pics", T)
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    let bucket_name = status_str(&claim, "boundBucketName").expect("boundBucketName");
    let bucket = api(&admin, Kind::Bucket, "")
        .get(&bucket_name)
        .await
        .expect("the bound Bucket");
    let bucket_id = status_str(&bucket, "bucketID").expect("bucketID");
    let root = store.root_client();
    root.head_bucket()
        .bucket(&bucket_id)
        .send()
        .await
        .unwrap_or_else(|e| panic!("bucket {bucket_id} on RustFS: {e}"));
    root.put_object()
        .bucket(&bucket_id)
        .key(PROBE)
        .body(ByteStream::from_static(b"cosi data"))
        .send()
        .await
        .expect("seed");
    let obc_bucket = claim_bucket(&admin, NS, "photos")
        .await
        .expect("OBC bucket");
    assert_ne!(obc_bucket, bucket_id);
    root.put_object()
        .bucket(&obc_bucket)
        .key(PROBE)
        .body(ByteStream::from_static(b"obc data"))
        .send()
        .await
        .expect("seed");

    // Two BucketAccesses, each its own store user, each exactly its mode.
    for (name, mode) in [("rw", "ReadWrite"), ("ro", "ReadOnly")] {
        let secret = format!("{name}-keys");
        create(
            &admin,
            Kind::BucketAccess,
            NS,
            name,
            access_of(&access_class, &[("pics", mode, &secret)]),
        )
        .await
        .expect("BucketAccess");
    }
    let mut keys = Vec::new();
    for name in ["rw", "ro"] {
        wait_ready(&admin, Kind::BucketAccess, NS, name, T)
            .await
            .unwrap_or_else(|e| panic!("{e:#}"));
        let k = access_keys(&admin, NS, &format!("{name}-keys"))
            .await
            .expect("keys");
        assert_eq!(k.bucket, bucket_id, "{name}: COSI_S3_BUCKET_ID");
        assert_eq!(k.addressing_style, "path", "{name}");
        assert_ne!(k.key_id, ak, "{name} got the admin's key");
        keys.push(k);
    }
    let (rw, ro) = (keys[0].clone(), keys[1].clone());
    assert_ne!(rw.key_id, ro.key_id, "one user per BucketAccess");
    let users = store_admin.list_users().await.expect("users");
    for k in [&rw, &ro] {
        assert!(
            users.contains_key(&k.key_id),
            "{} is no store user: {users:?}",
            k.key_id
        );
    }
    let full = Reach {
        list: true,
        read: true,
        write: true,
        delete: true,
    };
    let read_only = Reach {
        list: true,
        read: true,
        ..Reach::default()
    };
    assert_eq!(
        reach(&rw.s3(), &root, &bucket_id, PROBE).await,
        full,
        "ReadWrite"
    );
    assert_eq!(
        reach(&ro.s3(), &root, &bucket_id, PROBE).await,
        read_only,
        "ReadOnly"
    );
    for (who, k) in [("rw", &rw), ("ro", &ro)] {
        let r = reach(&k.s3(), &root, &obc_bucket, PROBE).await;
        assert!(r.none(), "{who} reaches the OBC claim's bucket: {r:?}");
        assert_no_other_buckets(who, k).await;
    }
    let (obc_key, obc_secret) = claim_keys(&admin, NS, "photos").await.expect("OBC keys");
    register_secret(&obc_secret);
    let obc_s3 = s3_client_for(&endpoint, &obc_key, &obc_secret);
    let r = reach(&obc_s3, &root, &bucket_id, PROBE).await;
    assert!(
        r.none(),
        "the OBC claim's keys reach the BucketClaim's bucket: {r:?}"
    );

    // Deleting a BucketAccess revokes its keys and deletes its Secret.
    let accesses = api(&admin, Kind::BucketAccess, NS);
    accesses
        .delete("rw", &DeleteParams::default())
        .await
        .expect("delete rw");
    wait_gone(&accesses, "rw", T).await.expect("rw goes");
    let secrets = Api::<Secret>::namespaced(admin.clone(), NS);
    wait_gone(&secrets, "rw-keys", T)
        .await
        .expect("its Secret goes");
    wait_for(T, "the revoked keys to stop working", || {
        let (s3, root, b) = (rw.s3(), root.clone(), bucket_id.clone());
        async move { Ok(reach(&s3, &root, &b, PROBE).await.none().then_some(())) }
    })
    .await
    .expect("revoked");
    let users = store_admin.list_users().await.expect("users");
    assert!(!users.contains_key(&rw.key_id), "rw's user is left");
    assert_eq!(
        reach(&ro.s3(), &root, &bucket_id, PROBE).await,
        read_only,
        "the other BucketAccess keeps working"
    );
    accesses
        .delete("ro", &DeleteParams::default())
        .await
        .expect("delete ro");
    wait_gone(&accesses, "ro", T).await.expect("ro goes");
    wait_gone(&secrets, "ro-keys", T)
        .await
        .expect("ro's Secret");

    // Deleting the BucketClaim (Delete) deletes the Bucket and the bucket.
    let claims = api(&admin, Kind::BucketClaim, NS);
    claims
        .delete("pics", &DeleteParams::default())
        .await
        .expect("delete claim");
    wait_gone(&claims, "pics", T).await.expect("claim goes");
    wait_gone(&api(&admin, Kind::Bucket, ""), &bucket_name, T)
        .await
        .expect("Bucket goes");
    wait_for(T, "the bucket to be deleted on RustFS", || {
        let (root, b) = (root.clone(), bucket_id.clone());
        async move {
            Ok(root
                .head_bucket()
                .bucket(b)
                .send()
                .await
                .is_err()
                .then_some(()))
        }
    })
    .await
    .expect("bucket deleted");
    let users = store_admin.list_users().await.expect("users");
    assert!(!users.contains_key(&ro.key_id), "ro's user is left");

    // The OBC claim was never touched by any of it.
    root.get_object()
        .bucket(&obc_bucket)
        .key(PROBE)
        .send()
        .await
        .expect("the OBC claim's data");
    let obcs = Api::<ObjectBucketClaim>::namespaced(admin.clone(), NS);
    obcs.delete("photos", &DeleteParams::default())
        .await
        .expect("delete OBC");
    wait_gone(&obcs, "photos", T).await.expect("OBC goes");

    controller.stop().await.expect("controller stops");
    store.stop().await;
    assert_no_leaks(env.dir()).expect("no credential in any log");
    let rbac = format!("{}\n---\n{}", read("deploy/rbac.yaml"), read(COSI_RBAC));
    let needed = obc_tests::cosi_e2e::obc_and_cosi_needed_but_not_exercised();
    check_rbac_is_exactly_what_is_used(
        &env.audit_log_path(),
        &rbac,
        "deploy/rbac.yaml + deploy/rbac-cosi.yaml",
        (SYSTEM, SA),
        &needed,
    )
    .unwrap_or_else(|e| panic!("{e:#}"));
}

/// `deploy/example-storageclass.yaml` on RustFS, named `s3-delete`.
async fn storage_class(admin: &Client, endpoint: &str) {
    let mut class: StorageClass =
        serde_yaml::from_str(&read("deploy/example-storageclass.yaml")).expect("class");
    class.metadata.name = Some("s3-delete".into());
    let params = class.parameters.get_or_insert_with(Default::default);
    params.insert("endpoint".into(), endpoint.into());
    params.insert("adminSecretName".into(), "s3-admin".into());
    params.insert("forceDelete".into(), "true".into());
    Api::<StorageClass>::all(admin.clone())
        .create(&PostParams::default(), &class)
        .await
        .expect("class");
}

/// `deploy/example-cosi-classes.yaml` on RustFS (endpoint, admin Secret,
/// forceDelete); returns the BucketClass's and BucketAccessClass's names.
async fn cosi_classes(env: &TestEnv, endpoint: &str) -> (String, String) {
    let mut names = (String::new(), String::new());
    let mut docs = Vec::new();
    for doc in read("deploy/example-cosi-classes.yaml").split("\n---") {
        let mut o: DynamicObject = serde_yaml::from_str(doc).expect("class yaml");
        match o.types.as_ref().map(|t| t.kind.as_str()) {
            Some("BucketClass") => {
                let p = &mut o.data["spec"]["parameters"];
                p["endpoint"] = endpoint.into();
                p["adminSecretName"] = "s3-admin".into();
                p["forceDelete"] = "true".into();
                names.0 = o.name_any();
            }
            Some("BucketAccessClass") => {
                let p = &mut o.data["spec"]["parameters"];
                p["endpoint"] = endpoint.into();
                p["adminSecretName"] = "s3-admin".into();
                names.1 = o.name_any();
            }
            other => panic!("deploy/example-cosi-classes.yaml holds a {other:?}"),
        }
        assert_eq!(o.data["spec"]["driverName"], DRIVER);
        docs.push(serde_yaml::to_string(&o).expect("yaml"));
    }
    env.apply_yaml(&docs.join("---\n")).await.expect("classes");
    assert!(!names.0.is_empty() && !names.1.is_empty(), "{names:?}");
    names
}

/// COSI keys reach no bucket but their own: creating and listing buckets
/// is refused, or lists only their own.
async fn assert_no_other_buckets(who: &str, k: &AccessKeys) {
    let s3 = k.s3();
    let created = s3
        .create_bucket()
        .bucket(format!("{who}-extra-bucket"))
        .send()
        .await;
    assert!(created.is_err(), "{who} created a bucket");
    if let Ok(out) = s3.list_buckets().send().await {
        let names: Vec<_> = out.buckets().iter().filter_map(|b| b.name()).collect();
        assert!(names.iter().all(|n| *n == k.bucket), "{who} sees {names:?}");
    }
}

/// The sample's controller, as its binary wires it
/// (`sample_provisioner::serve`): ObjectBucketClaims of
/// `objectbucket.io/sample-s3`, and, COSI's CRDs being installed
/// (`--cosi=auto`), COSI for driver [`DRIVER`] with the binding role on;
/// leader election as in `deploy/`.
async fn start_controller(sa: Client) -> RunningController {
    let options = lib_provisioner::cosi::CosiOptions::new(DRIVER).expect("driver name");
    let cosi = sample_provisioner::serve::CosiMode::Auto
        .resolve(&sa, options)
        .await
        .expect("discovery");
    assert!(cosi.is_some(), "--cosi=auto did not see COSI's CRDs");
    let builder =
        ControllerBuilder::new("objectbucket.io/sample-s3", S3Provisioner::new(sa.clone()))
            .leader_election(lib_provisioner::leader::LeaderElection::new(
                SYSTEM,
                "objectbucket.io-sample-s3",
                "test",
            ));
    RunningController::start_with(sa, sample_provisioner::serve::with_cosi(builder, cosi))
}
