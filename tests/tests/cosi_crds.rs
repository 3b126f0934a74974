//! The COSI CRDs (`crds/cosi/`) on a real kube-apiserver: they install,
//! and their validations reject what upstream's reject (COSI.md, section 1).

use std::collections::BTreeMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use lib_provisioner::cosi::api::{
    AuthenticationType, Bucket, BucketAccess, BucketAccessMode, BucketAccessSpec, BucketClaim,
    BucketClaimAccess, BucketClaimReference, BucketClaimSpec, BucketClaimStatus, BucketClass,
    BucketClassSpec, BucketDeletionPolicy, BucketSpec, ObjectProtocol,
};
use obc_tests::TestEnv;
use obc_tests::setup::repo_file;
use serde_json::json;

const NS: &str = "default";

async fn env_with_cosi_crds() -> (TestEnv, Client) {
    let env = TestEnv::start().await.expect("test environment starts");
    for (name, _) in lib_provisioner::cosi::api::crd_files() {
        let yaml = repo_file(&format!("crds/cosi/{name}")).expect("checked-in CRD");
        env.install_crds(&yaml)
            .await
            .unwrap_or_else(|e| panic!("{name} installs: {e:#}"));
    }
    let client = env.admin_client();
    (env, client)
}

/// The apiserver's refusal of a write, as text; panics if it was accepted.
fn refusal<T: std::fmt::Debug>(result: Result<T, kube::Error>, what: &str) -> String {
    match result {
        Ok(obj) => panic!("{what} was accepted: {obj:?}"),
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 422, "{what}: {status:?}");
            status.message
        }
        Err(e) => panic!("{what}: {e}"),
    }
}

fn assert_refused<T: std::fmt::Debug>(result: Result<T, kube::Error>, what: &str, message: &str) {
    let text = refusal(result, what);
    assert!(
        text.contains(message),
        "{what}: expected {message:?} in {text:?}"
    );
}

fn claim(name: &str, spec: BucketClaimSpec) -> BucketClaim {
    BucketClaim::new(name, spec)
}

#[tokio::test(flavor = "multi_thread")]
async fn cosi_crds_install_and_validate_as_upstream() {
    let (_env, client) = env_with_cosi_crds().await;
    let pp = PostParams::default();

    // listKind is the apiserver's default, as upstream spells it.
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for (plural, list) in [
        ("bucketclasses", "BucketClassList"),
        ("bucketclaims", "BucketClaimList"),
        ("buckets", "BucketList"),
        ("bucketaccessclasses", "BucketAccessClassList"),
        ("bucketaccesses", "BucketAccessList"),
    ] {
        let crd = crds
            .get(&format!("{plural}.objectstorage.k8s.io"))
            .await
            .expect("installed");
        let names = crd.status.expect("status").accepted_names.expect("names");
        assert_eq!(names.list_kind.as_deref(), Some(list));
    }

    // BucketClaim: exactly one of bucketClassName / existingBucketName.
    let claims: Api<BucketClaim> = Api::namespaced(client.clone(), NS);
    let both = BucketClaimSpec {
        bucket_class_name: Some("a".into()),
        existing_bucket_name: Some("b".into()),
        protocols: None,
    };
    assert_refused(
        claims.create(&pp, &claim("both", both)).await,
        "a claim with both names",
        "exactly one of the fields in [bucketClassName existingBucketName] must be set",
    );
    let neither = BucketClaimSpec {
        protocols: Some(vec![ObjectProtocol::S3]),
        ..Default::default()
    };
    assert_refused(
        claims.create(&pp, &claim("neither", neither)).await,
        "a claim with neither name",
        "exactly one of the fields in [bucketClassName existingBucketName] must be set",
    );
    assert_refused(
        claims
            .create(&pp, &claim("empty", BucketClaimSpec::default()))
            .await,
        "a claim with an empty spec",
        "should have at least 1 properties",
    );
    assert_refused(
        claims
            .create(
                &pp,
                &claim(
                    "badname",
                    BucketClaimSpec {
                        bucket_class_name: Some("Not_A_Name".into()),
                        ..Default::default()
                    },
                ),
            )
            .await,
        "a claim naming an invalid class",
        "name must be a valid resource name",
    );

    let good = BucketClaimSpec {
        bucket_class_name: Some("gold".into()),
        protocols: Some(vec![ObjectProtocol::S3]),
        ..Default::default()
    };
    claims
        .create(&pp, &claim("good", good))
        .await
        .expect("a valid claim");
    let merge = |v: serde_json::Value| Patch::Merge(v);
    let ps = PatchParams::default();
    assert_refused(
        claims
            .patch(
                "good",
                &ps,
                &merge(json!({"spec": {"bucketClassName": "silver"}})),
            )
            .await,
        "changing bucketClassName",
        "bucketClassName is immutable",
    );
    assert_refused(
        claims
            .patch("good", &ps, &merge(json!({"spec": {"protocols": null}})))
            .await,
        "removing protocols",
        "protocols list cannot be added or removed after creation",
    );
    assert_refused(
        claims
            .patch(
                "good",
                &ps,
                &merge(json!({"spec": {"bucketClassName": null, "existingBucketName": "x"}})),
            )
            .await,
        "switching to a static claim",
        "cannot be added or removed after creation",
    );
    // Status: readyToUse is required, boundBucketName stays once set.
    assert_refused(
        claims
            .patch_status(
                "good",
                &ps,
                &merge(json!({"status": {"boundBucketName": "bc-1"}})),
            )
            .await,
        "a status without readyToUse",
        "readyToUse: Required value",
    );
    let status = BucketClaimStatus {
        bound_bucket_name: Some("bc-1".into()),
        ready_to_use: false,
        ..Default::default()
    };
    claims
        .patch_status("good", &ps, &merge(json!({ "status": status })))
        .await
        .expect("binding");
    assert_refused(
        claims
            .patch_status(
                "good",
                &ps,
                &merge(json!({"status": {"boundBucketName": "bc-2"}})),
            )
            .await,
        "rebinding",
        "boundBucketName is immutable once set",
    );
    assert_refused(
        claims
            .patch_status(
                "good",
                &ps,
                &merge(json!({"status": {"boundBucketName": null}})),
            )
            .await,
        "unbinding",
        "boundBucketName cannot be removed once set",
    );

    // BucketClass: driver pattern (no '/'), immutable spec.
    let classes: Api<BucketClass> = Api::all(client.clone());
    let class = |driver: &str| {
        BucketClass::new(
            "gold",
            BucketClassSpec {
                driver_name: driver.into(),
                deletion_policy: BucketDeletionPolicy::Delete,
                parameters: Some(BTreeMap::from([("k".into(), "v".into())])),
            },
        )
    };
    let refused = refusal(
        classes.create(&pp, &class("example.com/bucket")).await,
        "a driver name with '/'",
    );
    assert!(refused.contains("driverName"), "{refused}");
    classes
        .create(&pp, &class("cosi.example.com"))
        .await
        .expect("a valid class");
    assert_refused(
        classes
            .patch(
                "gold",
                &ps,
                &merge(json!({"spec": {"deletionPolicy": "Retain"}})),
            )
            .await,
        "editing a BucketClass",
        "BucketClass spec is immutable",
    );
    assert_refused(
        classes
            .create(
                &pp,
                &BucketClass::new(
                    "empty-params",
                    BucketClassSpec {
                        parameters: Some(BTreeMap::new()),
                        ..class("cosi.example.com").spec
                    },
                ),
            )
            .await,
        "an empty parameters map",
        "should have at least 1 properties",
    );

    // Bucket: the claim's uid can be set once, never changed; the
    // deletion policy may change; the driver may not.
    let buckets: Api<Bucket> = Api::all(client.clone());
    let bucket = Bucket::new(
        "static-1",
        BucketSpec {
            driver_name: "cosi.example.com".into(),
            deletion_policy: BucketDeletionPolicy::Retain,
            parameters: None,
            protocols: None,
            bucket_claim_ref: BucketClaimReference {
                name: "c".into(),
                namespace: NS.into(),
                uid: None,
            },
            existing_bucket_id: Some("store/bucket-1".into()),
        },
    );
    buckets.create(&pp, &bucket).await.expect("a static Bucket");
    let uid = "0d8f9bd2-4bd8-4d4c-9b5b-6c7a0f6b2d11";
    buckets
        .patch(
            "static-1",
            &ps,
            &merge(json!({"spec": {"bucketClaimRef": {"uid": uid}}})),
        )
        .await
        .expect("binding a static Bucket");
    assert_refused(
        buckets
            .patch(
                "static-1",
                &ps,
                &merge(json!({"spec": {"bucketClaimRef": {"uid": "1d8f9bd2-4bd8-4d4c-9b5b-6c7a0f6b2d11"}}})),
            )
            .await,
        "rebinding a Bucket",
        "uid is immutable once set",
    );
    assert_refused(
        buckets
            .patch(
                "static-1",
                &ps,
                &merge(json!({"spec": {"bucketClaimRef": {"uid": null}}})),
            )
            .await,
        "unbinding a Bucket",
        "uid cannot be removed once set",
    );
    assert_refused(
        buckets
            .patch(
                "static-1",
                &ps,
                &merge(json!({"spec": {"driverName": "other.example.com"}})),
            )
            .await,
        "changing a Bucket's driver",
        "driverName is immutable",
    );
    assert_refused(
        buckets
            .patch(
                "static-1",
                &ps,
                &merge(json!({"spec": {"existingBucketID": null}})),
            )
            .await,
        "removing existingBucketID",
        "existingBucketID cannot be added or removed after creation",
    );
    buckets
        .patch(
            "static-1",
            &ps,
            &merge(json!({"spec": {"deletionPolicy": "Delete"}})),
        )
        .await
        .expect("the deletion policy of a Bucket may change");
    assert_refused(
        buckets
            .create(
                &pp,
                &Bucket::new(
                    "bad-id",
                    BucketSpec {
                        existing_bucket_id: Some("no spaces allowed".into()),
                        ..bucket.spec.clone()
                    },
                ),
            )
            .await,
        "an id outside the ID pattern",
        "existingBucketID",
    );

    // BucketAccess: its claims and class are fixed at creation.
    let accesses: Api<BucketAccess> = Api::namespaced(client.clone(), NS);
    let access = BucketAccess::new(
        "a",
        BucketAccessSpec {
            bucket_claims: vec![BucketClaimAccess {
                bucket_claim_name: "good".into(),
                access_mode: BucketAccessMode::ReadWrite,
                access_secret_name: "good-creds".into(),
            }],
            bucket_access_class_name: "rw".into(),
            protocol: ObjectProtocol::S3,
            service_account_name: None,
        },
    );
    accesses.create(&pp, &access).await.expect("a valid access");
    assert_refused(
        accesses
            .patch(
                "a",
                &ps,
                &merge(json!({"spec": {"bucketClaims": [{"bucketClaimName": "good", "accessMode": "ReadOnly", "accessSecretName": "good-creds"}]}})),
            )
            .await,
        "changing the access mode",
        "bucketClaims list is immutable",
    );
    assert_refused(
        accesses
            .patch(
                "a",
                &ps,
                &merge(json!({"spec": {"serviceAccountName": "sa"}})),
            )
            .await,
        "adding a serviceAccountName",
        "serviceAccountName cannot be added or removed after creation",
    );
    assert_refused(
        accesses
            .patch("a", &ps, &merge(json!({"spec": {"protocol": "GCS"}})))
            .await,
        "changing the protocol",
        "protocol is immutable",
    );
    let mut two = access.clone();
    two.metadata.name = Some("dup".into());
    two.spec
        .bucket_claims
        .push(two.spec.bucket_claims[0].clone());
    let refused = refusal(accesses.create(&pp, &two).await, "a claim named twice");
    assert!(refused.contains("Duplicate value"), "{refused}");
    accesses
        .patch_status(
            "a",
            &ps,
            &merge(json!({"status": {"readyToUse": false, "driverName": "cosi.example.com", "authenticationType": AuthenticationType::Key, "accountID": "ba-1"}})),
        )
        .await
        .expect("the hand-off");
    assert_refused(
        accesses
            .patch_status("a", &ps, &merge(json!({"status": {"accountID": null}})))
            .await,
        "removing the account id",
        "accountID cannot be removed once set",
    );
    assert_refused(
        accesses
            .patch_status("a", &ps, &merge(json!({"status": {"accountID": "ba-2"}})))
            .await,
        "changing the account id",
        "accountId is immutable once set",
    );
}
