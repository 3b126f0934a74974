//! COSI against a tenant (issue 36, items 3 to 5), on a real apiserver:
//! a foreign driver's BucketAccess keeps its finalizer while that driver's
//! Secrets remain, whatever annotation its owner writes; a hand-off that
//! does not match the BucketAccess's class is refused before any grant;
//! and, with the sample on two RustFS stores, keys are made only on the
//! store a Bucket is on, and a read-only bucket is granted nothing wider.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::core::NamespaceResourceScope;
use kube::{Client, Resource, ResourceExt};
use lib_provisioner::ControllerBuilder;
use lib_provisioner::cosi::CosiOptions;
use lib_provisioner::cosi::api::*;
use obc_tests::cosi_recording::{CosiCall, CosiRecorder, DRIVER, install_cosi_crds};
use obc_tests::recording::{PROVISIONER, RunningController, wait_gone};
use obc_tests::rustfs::RustFs;
use obc_tests::setup::{create_admin_secret, install_deploy, start_with_crds};
use obc_tests::{TestEnv, wait_for};
use sample_provisioner::S3Provisioner;
use sample_provisioner::admin::AdminClient;
use serde::Serialize;
use serde::de::DeserializeOwned;

const T: Duration = Duration::from_secs(60);
const FOREIGN: &str = "other.example.com";

fn start(
    client: &Client,
    driver: &str,
    provisioner: impl lib_provisioner::Provisioner,
) -> RunningController {
    let options = CosiOptions::new(driver).expect("driver name");
    RunningController::start_with(
        client.clone(),
        ControllerBuilder::new(PROVISIONER, provisioner).cosi(options),
    )
}

async fn create_all<K>(client: &Client, obj: &K) -> K
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Serialize + std::fmt::Debug,
{
    Api::<K>::all(client.clone())
        .create(&PostParams::default(), obj)
        .await
        .unwrap_or_else(|e| panic!("create {}: {e}", obj.name_any()))
}

async fn create_in<K>(client: &Client, ns: &str, obj: &K) -> K
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + Serialize
        + std::fmt::Debug,
{
    Api::<K>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), obj)
        .await
        .unwrap_or_else(|e| panic!("create {}: {e}", obj.name_any()))
}

fn access_class(
    name: &str,
    driver: &str,
    edit: impl FnOnce(&mut BucketAccessClassSpec),
) -> BucketAccessClass {
    let mut spec = BucketAccessClassSpec {
        driver_name: driver.into(),
        authentication_type: AuthenticationType::Key,
        parameters: None,
        disallowed_bucket_access_modes: None,
        multi_bucket_access: None,
    };
    edit(&mut spec);
    BucketAccessClass::new(name, spec)
}

fn access(name: &str, class: &str, claim: &str, mode: BucketAccessMode) -> BucketAccess {
    BucketAccess::new(
        name,
        BucketAccessSpec {
            bucket_claims: vec![BucketClaimAccess {
                bucket_claim_name: claim.into(),
                access_mode: mode,
                access_secret_name: format!("{name}-{claim}"),
            }],
            bucket_access_class_name: class.into(),
            protocol: ObjectProtocol::S3,
            service_account_name: None,
        },
    )
}

async fn wait_claim_ready(client: &Client, ns: &str, name: &str) -> BucketClaim {
    obc_tests::cosi_recording::wait_claim_ready(client, ns, name, T).await
}

async fn wait_access(
    client: &Client,
    ns: &str,
    name: &str,
    what: &str,
    f: impl Fn(&BucketAccess) -> bool,
) -> BucketAccess {
    let api = Api::<BucketAccess>::namespaced(client.clone(), ns);
    let result = wait_for(T, format!("BucketAccess {ns}/{name}: {what}"), || async {
        Ok(api.get_opt(name).await?.filter(&f))
    })
    .await;
    result.unwrap_or_else(|e| panic!("{e:#}"))
}

fn error_of(a: &BucketAccess) -> String {
    a.status
        .as_ref()
        .and_then(|s| s.error.as_ref())
        .and_then(|e| e.message.clone())
        .unwrap_or_default()
}

fn ready(a: &BucketAccess) -> bool {
    a.status.as_ref().is_some_and(|s| s.ready_to_use)
}

/// Issue 36, item 3: the binding role serves every driver; a deleting
/// BucketAccess of a driver this process does not run, carrying
/// `sidecar-cleanup-finished` (its owner wrote it), keeps its finalizer
/// while the Secret that driver reserved remains, and goes once it is gone.
/// On fa133a2 the finalizer was removed at once.
#[tokio::test(flavor = "multi_thread")]
async fn a_foreign_drivers_cleanup_annotation_is_believed_once_its_secrets_are_gone() {
    let env = start_with_crds().await.expect("env");
    install_cosi_crds(&env).await.expect("COSI CRDs");
    let client = env.admin_client();
    let ns = "cosi-foreign";
    env.ensure_namespace(ns).await.expect("namespace");
    let controller = start(&client, DRIVER, CosiRecorder::new());
    let class = BucketClass::new(
        "foreign",
        BucketClassSpec {
            driver_name: FOREIGN.into(),
            deletion_policy: BucketDeletionPolicy::Retain,
            parameters: None,
        },
    );
    create_all(&client, &class).await;
    create_all(&client, &access_class("foreign-access", FOREIGN, |_| {})).await;
    let claim = BucketClaim::new(
        "photos",
        BucketClaimSpec {
            bucket_class_name: Some("foreign".into()),
            protocols: Some(vec![ObjectProtocol::S3]),
            ..Default::default()
        },
    );
    let claim = create_in(&client, ns, &claim).await;
    // The foreign driver's sidecar provisions the Bucket.
    let bucket = format!("bc-{}", claim.uid().expect("uid"));
    let buckets = Api::<Bucket>::all(client.clone());
    wait_for(T, format!("Bucket {bucket}"), || async {
        Ok(buckets.get_opt(&bucket).await?)
    })
    .await
    .expect("the claim's Bucket");
    let status = serde_json::json!({"status": {
        "readyToUse": true, "bucketID": "foreign-photos", "protocols": ["S3"]
    }});
    buckets
        .patch_status(&bucket, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("the foreign sidecar's Bucket status");
    wait_claim_ready(&client, ns, "photos").await;

    let a = create_in(
        &client,
        ns,
        &access(
            "reader",
            "foreign-access",
            "photos",
            BucketAccessMode::ReadWrite,
        ),
    )
    .await;
    wait_access(&client, ns, "reader", "handed to the foreign driver", |a| {
        a.status.as_ref().and_then(|s| s.driver_name.as_deref()) == Some(FOREIGN)
    })
    .await;
    // The foreign sidecar reserves the access Secret before it grants.
    let secrets = Api::<Secret>::namespaced(client.clone(), ns);
    let reserved = Secret {
        metadata: ObjectMeta {
            name: Some("reader-photos".into()),
            finalizers: Some(vec![FINALIZER.into()]),
            owner_references: Some(vec![OwnerReference {
                api_version: "objectstorage.k8s.io/v1alpha2".into(),
                kind: "BucketAccess".into(),
                name: "reader".into(),
                uid: a.uid().expect("uid"),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..Default::default()
        },
        type_: Some("Opaque".into()),
        ..Default::default()
    };
    secrets
        .create(&PostParams::default(), &reserved)
        .await
        .expect("the foreign sidecar's Secret");

    // The tenant: the annotation, then the deletion.
    let accesses = Api::<BucketAccess>::namespaced(client.clone(), ns);
    let annotate =
        serde_json::json!({"metadata": {"annotations": {SIDECAR_CLEANUP_FINISHED_ANNOTATION: ""}}});
    accesses
        .patch("reader", &PatchParams::default(), &Patch::Merge(&annotate))
        .await
        .expect("annotate");
    accesses
        .delete("reader", &DeleteParams::default())
        .await
        .expect("delete");
    let held = wait_access(
        &client,
        ns,
        "reader",
        "waiting for the foreign driver",
        |a| error_of(a).contains("access Secret reader-photos still exists"),
    )
    .await;
    assert!(held.metadata.deletion_timestamp.is_some());
    tokio::time::sleep(Duration::from_secs(3)).await;
    let still = accesses.get_opt("reader").await.expect("read");
    assert!(
        still.is_some_and(|a| a.finalizers().contains(&FINALIZER.to_owned())),
        "the BucketAccess lost its finalizer before its driver released its Secret"
    );

    // The foreign sidecar's cleanup: its Secret released and deleted.
    let release = serde_json::json!({"metadata": {"finalizers": null}});
    secrets
        .patch(
            "reader-photos",
            &PatchParams::default(),
            &Patch::Merge(&release),
        )
        .await
        .expect("release");
    let _ = secrets
        .delete("reader-photos", &DeleteParams::default())
        .await;
    wait_gone(&accesses, "reader", T)
        .await
        .expect("the BucketAccess goes once its driver's Secret is gone");
    controller.stop().await.expect("controller stops");
}

/// Issue 36, item 4: a hand-off in the status that the BucketAccess's own
/// class would not have given (a hand-off computed for an object since
/// replaced under the same name, here written before the controller runs)
/// is refused by the driver role before it grants: no grant call. On
/// fa133a2 the driver granted ReadWrite through a class that disallows it.
#[tokio::test(flavor = "multi_thread")]
async fn a_hand_off_the_class_would_refuse_is_never_granted() {
    let env = start_with_crds().await.expect("env");
    install_cosi_crds(&env).await.expect("COSI CRDs");
    let client = env.admin_client();
    let ns = "cosi-stale";
    env.ensure_namespace(ns).await.expect("namespace");
    let recorder = CosiRecorder::new();
    let controller = start(&client, DRIVER, recorder.clone());
    let class = BucketClass::new(
        "gold",
        BucketClassSpec {
            driver_name: DRIVER.into(),
            deletion_policy: BucketDeletionPolicy::Delete,
            parameters: None,
        },
    );
    create_all(&client, &class).await;
    let narrow = access_class("narrow", DRIVER, |s| {
        s.disallowed_bucket_access_modes = Some(vec![BucketAccessMode::ReadWrite]);
    });
    create_all(&client, &narrow).await;
    let claim = BucketClaim::new(
        "photos",
        BucketClaimSpec {
            bucket_class_name: Some("gold".into()),
            protocols: Some(vec![ObjectProtocol::S3]),
            ..Default::default()
        },
    );
    let claim = create_in(&client, ns, &claim).await;
    wait_claim_ready(&client, ns, "photos").await;
    controller.stop().await.expect("controller stops");

    let bucket = format!("bc-{}", claim.uid().expect("uid"));
    let a = access("wide", "narrow", "photos", BucketAccessMode::ReadWrite);
    let a = create_in(&client, ns, &a).await;
    let hand_off = serde_json::json!({"status": {
        "readyToUse": false,
        "accessedBuckets": [{"bucketName": bucket, "bucketID": bucket, "bucketClaimName": "photos"}],
        "driverName": DRIVER,
        "authenticationType": "Key",
    }});
    Api::<BucketAccess>::namespaced(client.clone(), ns)
        .patch_status("wide", &PatchParams::default(), &Patch::Merge(&hand_off))
        .await
        .expect("the stale hand-off");
    assert!(a.status.is_none());

    let controller = start(&client, DRIVER, recorder.clone());
    let refused = wait_access(&client, ns, "wide", "refused", |a| {
        error_of(a).contains("does not allow access mode ReadWrite")
    })
    .await;
    assert!(!ready(&refused));
    tokio::time::sleep(Duration::from_secs(2)).await;
    let grants: Vec<_> = recorder
        .calls()
        .into_iter()
        .filter(|c| matches!(c, CosiCall::GrantAccess(..)))
        .collect();
    assert!(grants.is_empty(), "granted: {grants:?}");
    controller.stop().await.expect("controller stops");
}

const SYSTEM: &str = "obc-system";
const SAMPLE_DRIVER: &str = "s3.sample.objectbucket.io";

/// One store: its RustFS, its admin Secret, the parameters naming it.
struct Store {
    rustfs: RustFs,
    params: serde_json::Value,
}

async fn store(env: &TestEnv, client: &Client, name: &str) -> Store {
    let dir = env.dir().join(name);
    std::fs::create_dir_all(&dir).expect("dir");
    let rustfs = RustFs::start(&dir).await.expect("rustfs");
    let (key, secret) = rustfs.root_credentials();
    let secret_name = format!("{name}-admin");
    create_admin_secret(client, SYSTEM, &secret_name, &key, &secret)
        .await
        .expect("admin Secret");
    let params = serde_json::json!({
        "endpoint": rustfs.endpoint().trim_end_matches('/'),
        "adminSecretName": secret_name,
        "adminSecretNamespace": SYSTEM,
    });
    Store { rustfs, params }
}

fn map(params: &serde_json::Value) -> BTreeMap<String, String> {
    serde_json::from_value(params.clone()).expect("parameters")
}

async fn users(store: &Store) -> Vec<String> {
    let (key, secret) = store.rustfs.root_credentials();
    let admin = AdminClient::new(
        store.params["endpoint"].as_str().expect("endpoint"),
        "us-east-1",
        lib_provisioner::Credentials::new(key.clone(), secret),
    )
    .expect("admin client");
    admin
        .list_users()
        .await
        .expect("users")
        .into_keys()
        .filter(|u| *u != key)
        .collect()
}

/// Issue 36, item 5, with the sample on two RustFS stores: a tenant's
/// static claim on store Y's bucket `photos`, asked through an access
/// class for store X (which also has a bucket `photos`, someone else's),
/// is refused and no user is made on X; through store Y's class it works.
/// A bucket whose class says `accessMode: read-only` is refused ReadWrite
/// and granted ReadOnly. On fa133a2 both wrong grants were made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grants_land_on_the_buckets_store_in_no_wider_mode_than_the_bucket_allows() {
    let env = TestEnv::start().await.expect("env");
    install_deploy(&env).await.expect("deploy/");
    install_cosi_crds(&env).await.expect("COSI CRDs");
    let client = env.admin_client();
    let ns = "cosi-stores";
    env.ensure_namespace(ns).await.expect("namespace");
    let x = store(&env, &client, "store-x").await;
    let y = store(&env, &client, "store-y").await;
    for s in [&x, &y] {
        s.rustfs
            .root_client()
            .create_bucket()
            .bucket("photos")
            .send()
            .await
            .expect("bucket photos");
    }
    for (name, s) in [("x-access", &x), ("y-access", &y)] {
        let class = access_class(name, SAMPLE_DRIVER, |c| c.parameters = Some(map(&s.params)));
        create_all(&client, &class).await;
    }
    let mut read_only = y.params.clone();
    read_only["accessMode"] = "read-only".into();
    read_only["forceDelete"] = "true".into();
    let ro_class = BucketClass::new(
        "y-read-only",
        BucketClassSpec {
            driver_name: SAMPLE_DRIVER.into(),
            deletion_policy: BucketDeletionPolicy::Delete,
            parameters: Some(map(&read_only)),
        },
    );
    create_all(&client, &ro_class).await;
    let legacy = Bucket::new(
        "legacy-photos",
        BucketSpec {
            driver_name: SAMPLE_DRIVER.into(),
            deletion_policy: BucketDeletionPolicy::Retain,
            parameters: Some(map(&y.params)),
            protocols: None,
            bucket_claim_ref: BucketClaimReference {
                name: "photos".into(),
                namespace: ns.into(),
                uid: None,
            },
            existing_bucket_id: Some("photos".into()),
        },
    );
    let mut legacy = legacy;
    legacy.metadata.annotations = None;
    create_all(&client, &legacy).await;
    let controller = start(&client, SAMPLE_DRIVER, S3Provisioner::new(client.clone()));
    let claim = BucketClaim::new(
        "photos",
        BucketClaimSpec {
            existing_bucket_name: Some("legacy-photos".into()),
            ..Default::default()
        },
    );
    create_in(&client, ns, &claim).await;
    let ro_claim = BucketClaim::new(
        "archive",
        BucketClaimSpec {
            bucket_class_name: Some("y-read-only".into()),
            protocols: Some(vec![ObjectProtocol::S3]),
            ..Default::default()
        },
    );
    create_in(&client, ns, &ro_claim).await;
    wait_claim_ready(&client, ns, "photos").await;
    wait_claim_ready(&client, ns, "archive").await;

    // Store X's class for store Y's bucket: refused, nothing made on X.
    create_in(
        &client,
        ns,
        &access("cross", "x-access", "photos", BucketAccessMode::ReadWrite),
    )
    .await;
    let refused = wait_access(&client, ns, "cross", "refused", |a| {
        error_of(a).contains("is on another store")
    })
    .await;
    assert!(!ready(&refused));
    assert!(!error_of(&refused).contains(x.params["endpoint"].as_str().unwrap_or("?")));
    // Store Y's class: granted, on Y.
    create_in(
        &client,
        ns,
        &access("same", "y-access", "photos", BucketAccessMode::ReadWrite),
    )
    .await;
    wait_access(&client, ns, "same", "ready", ready).await;
    assert_eq!(users(&x).await, Vec::<String>::new(), "a user on store X");
    assert_eq!(users(&y).await.len(), 1, "one user on store Y");

    // A read-only bucket: ReadWrite refused, ReadOnly granted.
    create_in(
        &client,
        ns,
        &access("rw", "y-access", "archive", BucketAccessMode::ReadWrite),
    )
    .await;
    wait_access(&client, ns, "rw", "refused", |a| {
        error_of(a).contains("is read-only")
    })
    .await;
    create_in(
        &client,
        ns,
        &access("ro", "y-access", "archive", BucketAccessMode::ReadOnly),
    )
    .await;
    wait_access(&client, ns, "ro", "ready", ready).await;
    assert_eq!(
        users(&y).await.len(),
        2,
        "the ReadOnly user and store Y's first"
    );

    controller.stop().await.expect("controller stops");
    x.rustfs.stop().await;
    y.rustfs.stop().await;
}
