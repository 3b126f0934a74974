//! The sample provisioner's COSI side on RustFS with a real apiserver
//! (the admin Secret and the creation intents live there): buckets made
//! without users and deleted only by their own id; one user per principal
//! whose key reaches each granted bucket in exactly its mode and no other
//! bucket; revocation cuts it off and leaves other principals alone; every
//! call repeats safely. Then the same through the COSI gRPC driver on a
//! unix socket, as the COSI sidecar calls it. A missing RustFS or apiserver
//! fails the tests.

#![allow(clippy::unwrap_used)] // tests may unwrap; the library may not

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use anyhow::Result;
use aws_sdk_s3::error::ProvideErrorMetadata;
use aws_sdk_s3::primitives::ByteStream;
use lib_provisioner::cosi::api::owner_uid_of_id;
use lib_provisioner::cosi::grpc::proto::{
    AccessMode as ProtoMode, AuthenticationType, DriverCreateBucketRequest,
    DriverDeleteBucketRequest, DriverGetInfoRequest, DriverGrantBucketAccessRequest,
    DriverRevokeBucketAccessRequest, ObjectProtocol, access_mode, authentication_type,
    driver_grant_bucket_access_request, driver_revoke_bucket_access_request, object_protocol,
};
use lib_provisioner::provisioner::{
    AccessMode, AccessRequest, AccessRevocation, ClaimIdentity, ErrorReason,
};
use lib_provisioner::{BucketRequest, Credentials, Provisioner, TeardownRequest};
use obc_tests::cosi::{DRIVER_NAME, Driver};
use obc_tests::rustfs::RustFs;
use obc_tests::setup::{create_admin_secret, install_deploy};
use obc_tests::testenv::{self, TestEnv, s3_client_for};
use sample_provisioner::S3Provisioner;
use sample_provisioner::admin::AdminClient;
use sample_provisioner::credentials::per_principal::{
    grant_policy_document, principal_policy_name, principal_user_name,
};
use sample_provisioner::store::OWNER_TAG;

const SYSTEM_NAMESPACE: &str = "obc-system";
const ADMIN_SECRET: &str = "cosi-store-admin";

/// The sample on RustFS, with the parameters a COSI class would carry.
struct Target {
    _env: TestEnv,
    store: RustFs,
    sample: Arc<S3Provisioner>,
    parameters: BTreeMap<String, String>,
    admin: AdminClient,
}

impl Target {
    async fn start() -> Result<Self> {
        testenv::init_tracing();
        let env = TestEnv::start().await?;
        install_deploy(&env).await?;
        let store = RustFs::start(env.dir()).await?;
        let (key, secret) = store.root_credentials();
        let client = env.admin_client();
        create_admin_secret(&client, SYSTEM_NAMESPACE, ADMIN_SECRET, &key, &secret).await?;
        let parameters = BTreeMap::from([
            ("endpoint".to_owned(), store.endpoint()),
            ("adminSecretName".to_owned(), ADMIN_SECRET.to_owned()),
            (
                "adminSecretNamespace".to_owned(),
                SYSTEM_NAMESPACE.to_owned(),
            ),
        ]);
        let admin = AdminClient::new(
            &store.endpoint(),
            "us-east-1",
            Credentials::new(key, secret),
        )?;
        Ok(Self {
            sample: Arc::new(S3Provisioner::new(client)),
            _env: env,
            store,
            parameters,
            admin,
        })
    }

    /// An administrator's bucket holding the object `seed`.
    async fn admin_bucket(&self, name: &str) -> Result<()> {
        let root = self.store.root_client();
        root.create_bucket().bucket(name).send().await?;
        root.put_object()
            .bucket(name)
            .key("seed")
            .body(ByteStream::from_static(b"seed"))
            .send()
            .await?;
        Ok(())
    }

    fn client(&self, c: &Credentials) -> aws_sdk_s3::Client {
        s3_client_for(
            &self.store.endpoint(),
            &c.access_key_id,
            &c.secret_access_key,
        )
    }

    fn access(&self, principal: &ClaimIdentity, buckets: &[(&str, AccessMode)]) -> AccessRequest {
        let mut req = AccessRequest::new(principal.clone(), format!("ba-{}", principal.uid))
            .with_parameters(self.parameters.clone());
        for (bucket, mode) in buckets {
            req = req.with_bucket(*bucket, *mode);
        }
        req
    }

    fn revocation(&self, principal: &ClaimIdentity) -> AccessRevocation {
        AccessRevocation::new(principal.clone(), format!("ba-{}", principal.uid))
            .with_parameters(self.parameters.clone())
    }

    async fn cosi_users(&self) -> Result<Vec<String>> {
        let users = self.admin.list_users().await?;
        Ok(users
            .into_keys()
            .filter(|u| u.starts_with("cosi"))
            .collect())
    }
}

/// What a key may do with one bucket.
#[derive(Debug, PartialEq, Eq)]
struct Can {
    list: bool,
    read: bool,
    write: bool,
}

async fn can(client: &aws_sdk_s3::Client, bucket: &str) -> Can {
    let list = client.list_objects_v2().bucket(bucket).send().await;
    let read = client.get_object().bucket(bucket).key("seed").send().await;
    let write = client
        .put_object()
        .bucket(bucket)
        .key("written")
        .body(ByteStream::from_static(b"w"))
        .send()
        .await;
    for (what, code) in [
        ("list", list.as_ref().err().and_then(|e| e.code())),
        ("read", read.as_ref().err().and_then(|e| e.code())),
        ("write", write.as_ref().err().and_then(|e| e.code())),
    ] {
        // Refusals are refusals, not a store that is down.
        if let Some(code) = code {
            assert!(
                matches!(
                    code,
                    "AccessDenied" | "InvalidAccessKeyId" | "SignatureDoesNotMatch"
                ),
                "{what} on {bucket}: {code}"
            );
        }
    }
    Can {
        list: list.is_ok(),
        read: read.is_ok(),
        write: write.is_ok(),
    }
}

const RW: Can = Can {
    list: true,
    read: true,
    write: true,
};
const RO: Can = Can {
    list: true,
    read: true,
    write: false,
};
const WO: Can = Can {
    list: false,
    read: false,
    write: true,
};
const NONE: Can = Can {
    list: false,
    read: false,
    write: false,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_principals_key_reaches_each_granted_bucket_in_its_mode_and_nothing_else() -> Result<()> {
    let t = Target::start().await?;
    for b in ["rw-bucket", "ro-bucket", "wo-bucket", "other-bucket"] {
        t.admin_bucket(b).await?;
    }
    let a = ClaimIdentity::new("shop", "app", "0b1f6c1e-0000-4000-8000-00000000000a");
    let b = ClaimIdentity::new("shop", "other", "0b1f6c1e-0000-4000-8000-00000000000b");
    let req = t.access(
        &a,
        &[
            ("rw-bucket", AccessMode::ReadWrite),
            ("ro-bucket", AccessMode::ReadOnly),
            ("wo-bucket", AccessMode::WriteOnly),
        ],
    );
    let grant = t.sample.grant_access(&req).await?;
    assert_eq!(grant.account_id, format!("ba-{}", a.uid));
    assert_eq!(grant.credentials.access_key_id, principal_user_name(&a.uid));
    assert_eq!(grant.endpoint.url(), t.store.endpoint());
    assert_eq!(
        t.cosi_users().await?,
        [principal_user_name(&a.uid)],
        "one user for three buckets"
    );

    let key = t.client(&grant.credentials);
    assert_eq!(can(&key, "rw-bucket").await, RW);
    assert_eq!(
        can(&key, "ro-bucket").await,
        RO,
        "a ReadOnly key cannot write"
    );
    assert_eq!(
        can(&key, "wo-bucket").await,
        WO,
        "a WriteOnly key cannot read or list"
    );
    assert_eq!(
        can(&key, "other-bucket").await,
        NONE,
        "a bucket not in the grant"
    );

    // Again (a retry after a crash): the same account and user, a fresh
    // secret that works the same.
    let again = t.sample.grant_access(&req).await?;
    assert_eq!(again.account_id, grant.account_id);
    assert_eq!(
        again.credentials.access_key_id,
        grant.credentials.access_key_id
    );
    let key = t.client(&again.credentials);
    assert_eq!(can(&key, "ro-bucket").await, RO);
    assert_eq!(t.cosi_users().await?.len(), 1);

    // Another principal, then A's revocation: B keeps its access.
    let b_grant = t
        .sample
        .grant_access(&t.access(&b, &[("other-bucket", AccessMode::ReadOnly)]))
        .await?;
    let b_key = t.client(&b_grant.credentials);
    assert_eq!(can(&b_key, "other-bucket").await, RO);
    let revoke_a = t.revocation(&a).with_bucket("rw-bucket");
    t.sample.revoke_access(&revoke_a).await?;
    assert_eq!(can(&key, "rw-bucket").await, NONE, "revoked");
    assert_eq!(
        can(&b_key, "other-bucket").await,
        RO,
        "another principal keeps its key"
    );
    assert_eq!(t.cosi_users().await?, [principal_user_name(&b.uid)]);
    t.sample.revoke_access(&revoke_a).await?; // gone already: fine

    // A bucket that does not exist: retried, nothing made.
    let c = ClaimIdentity::new("shop", "late", "0b1f6c1e-0000-4000-8000-00000000000c");
    let err = t
        .sample
        .grant_access(&t.access(&c, &[("not-yet", AccessMode::ReadWrite)]))
        .await
        .unwrap_err();
    assert_eq!(err.reason(), Some(ErrorReason::NotFound), "{err}");
    assert!(err.is_retryable());
    assert!(
        t.admin
            .user_info(&principal_user_name(&c.uid))
            .await?
            .is_none()
    );

    // A class that cannot give per-principal keys says so.
    let mut shared = t.access(&c, &[("rw-bucket", AccessMode::ReadWrite)]);
    shared
        .parameters
        .insert("credentialsMode".into(), "shared-admin".into());
    let err = t.sample.grant_access(&shared).await.unwrap_err();
    assert!(
        !err.is_retryable() && err.message().contains("credentialsMode"),
        "{err}"
    );
    let mut read_only = t.access(&c, &[("rw-bucket", AccessMode::ReadWrite)]);
    read_only
        .parameters
        .insert("accessMode".into(), "read-only".into());
    let err = t.sample.grant_access(&read_only).await.unwrap_err();
    assert_eq!(
        err.reason(),
        Some(ErrorReason::UnsupportedAccessMode(AccessMode::ReadWrite)),
        "{err}"
    );
    assert!(
        t.admin
            .user_info(&principal_user_name(&c.uid))
            .await?
            .is_none()
    );

    // A grant interrupted after its policy, before its user: the
    // revocation cleans up; one interrupted after the user, before the
    // policy was attached: the retry finishes it.
    let d = ClaimIdentity::new("shop", "crashed", "0b1f6c1e-0000-4000-8000-00000000000d");
    let (d_user, d_policy) = (principal_user_name(&d.uid), principal_policy_name(&d.uid));
    let half_made = grant_policy_document(&[("ro-bucket", AccessMode::ReadOnly)]);
    t.admin.add_canned_policy(&d_policy, &half_made).await?;
    t.sample.revoke_access(&t.revocation(&d)).await?;
    assert!(!t.admin.list_canned_policies().await?.contains(&d_policy));
    t.admin
        .add_user(&d_user, "half-made-secret-0123456789")
        .await?;
    let d_grant = t
        .sample
        .grant_access(&t.access(&d, &[("ro-bucket", AccessMode::ReadOnly)]))
        .await?;
    assert_eq!(can(&t.client(&d_grant.credentials), "ro-bucket").await, RO);
    t.sample.revoke_access(&t.revocation(&d)).await?;

    t.sample.revoke_access(&t.revocation(&b)).await?;
    assert!(t.cosi_users().await?.is_empty());
    let policies = t.admin.list_canned_policies().await?;
    assert!(
        !policies.iter().any(|p| p.starts_with("cosi-access-")),
        "{policies:?}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn buckets_are_made_without_users_and_deleted_only_by_their_own_id() -> Result<()> {
    let t = Target::start().await?;
    let root = t.store.root_client();
    let users_before = t.admin.list_users().await?;
    let id = "bc-0b1f6c1e-0000-4000-8000-000000000001";
    // As the gRPC driver names a bucket's claim: by the id, with the UID
    // the id names (`bc-<uid>`), as the in-process role does.
    let as_cosi = |bucket: &str| ClaimIdentity::new("", bucket, owner_uid_of_id(bucket));
    let create = BucketRequest::new(as_cosi(id), id, "").with_parameters(t.parameters.clone());
    for _ in 0..2 {
        let info = t.sample.create_bucket(&create).await?;
        assert_eq!(info.endpoint.url(), t.store.endpoint());
    }
    let tags = root.get_bucket_tagging().bucket(id).send().await?.tag_set;
    assert!(
        tags.iter()
            .any(|t| t.key == OWNER_TAG && t.value == owner_uid_of_id(id)),
        "{tags:?}"
    );
    assert_eq!(
        t.admin.list_users().await?,
        users_before,
        "no user for a bucket alone"
    );

    // Someone else's bucket of that name: ALREADY_EXISTS, untouched.
    let squatter =
        BucketRequest::new(as_cosi("bc-squatter"), id, "").with_parameters(t.parameters.clone());
    let err = t.sample.create_bucket(&squatter).await.unwrap_err();
    assert_eq!(err.reason(), Some(ErrorReason::AlreadyExists), "{err}");

    // Static buckets: found when they exist, NOT_FOUND (retried) until then.
    let existing =
        BucketRequest::new(as_cosi("admins"), "admins", "").with_parameters(t.parameters.clone());
    let err = t.sample.existing_bucket(&existing).await.unwrap_err();
    assert_eq!(err.reason(), Some(ErrorReason::NotFound), "{err}");
    assert!(err.is_retryable());
    assert!(
        root.head_bucket().bucket("admins").send().await.is_err(),
        "never created"
    );
    t.admin_bucket("admins").await?;
    t.sample.existing_bucket(&existing).await?;

    // Delete by id: its own bucket goes (and again is fine); an
    // administrator's bucket carries no record of ours and stays.
    let delete = |bucket: &str| {
        TeardownRequest::new(as_cosi(bucket), bucket, "").with_parameters(t.parameters.clone())
    };
    for _ in 0..2 {
        t.sample.delete(&delete(id)).await?;
        assert!(
            root.head_bucket().bucket(id).send().await.is_err(),
            "deleted"
        );
    }
    t.sample.delete(&delete("admins")).await?;
    root.head_bucket().bucket("admins").send().await?;
    Ok(())
}

/// Issue 38: a BucketClass's parameters are the settings of every bucket
/// made from it (COSI has no per-claim config), applied when it is made,
/// and a BucketClass asking for one it may not is refused before any.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bucket_class_configures_the_buckets_made_from_it() -> Result<()> {
    let t = Target::start().await?;
    let root = t.store.root_client();
    let id = "bc-0b1f6c1e-0000-4000-8000-000000000038";
    let as_cosi = |bucket: &str| ClaimIdentity::new("", bucket, owner_uid_of_id(bucket));
    let mut parameters = t.parameters.clone();
    parameters.insert("versioning".into(), "Enabled".into());
    parameters.insert(
        "bucketLifecycle".into(),
        r#"{"Rules":[{"ID":"tmp","Status":"Enabled","Filter":{"Prefix":"tmp/"},"Expiration":{"Days":1}}]}"#.into(),
    );
    parameters.insert("objectLockMode".into(), "GOVERNANCE".into());
    parameters.insert("objectLockDays".into(), "2".into());
    let create = BucketRequest::new(as_cosi(id), id, "").with_parameters(parameters.clone());
    for _ in 0..2 {
        t.sample.create_bucket(&create).await?;
    }
    let versioning = root.get_bucket_versioning().bucket(id).send().await?;
    assert_eq!(versioning.status().map(|s| s.as_str()), Some("Enabled"));
    let rules = root
        .get_bucket_lifecycle_configuration()
        .bucket(id)
        .send()
        .await?;
    assert_eq!(rules.rules().len(), 1);
    let lock = root
        .get_object_lock_configuration()
        .bucket(id)
        .send()
        .await?;
    let days = lock
        .object_lock_configuration()
        .and_then(|c| c.rule())
        .and_then(|r| r.default_retention())
        .and_then(|r| r.days());
    assert_eq!(days, Some(2));

    // A bound the class breaks itself: refused, nothing made.
    parameters.insert("lifecycleMaxDays".into(), "0".into());
    let other = "bc-0b1f6c1e-0000-4000-8000-000000000039";
    let refused = BucketRequest::new(as_cosi(other), other, "").with_parameters(parameters);
    let err = t.sample.create_bucket(&refused).await.unwrap_err();
    assert!(
        err.to_string().contains("the BucketClass") && err.to_string().contains("lifecycleMaxDays"),
        "{err}"
    );
    assert!(err.nothing_created(), "{err}");
    assert!(root.head_bucket().bucket(other).send().await.is_err());

    let delete = TeardownRequest::new(as_cosi(id), id, "").with_parameters(t.parameters.clone());
    t.sample.delete(&delete).await?;
    assert!(
        root.head_bucket().bucket(id).send().await.is_err(),
        "deleted"
    );
    Ok(())
}

fn s3() -> Option<ObjectProtocol> {
    Some(ObjectProtocol {
        r#type: object_protocol::Type::S3.into(),
    })
}

fn accessed(
    id: &str,
    mode: access_mode::Mode,
) -> driver_grant_bucket_access_request::AccessedBucket {
    driver_grant_bucket_access_request::AccessedBucket {
        bucket_id: id.to_owned(),
        access_mode: Some(ProtoMode { mode: mode.into() }),
    }
}

/// The sidecar's calls, in its order, against the sample on RustFS.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sample_serves_cosi_over_grpc() -> Result<()> {
    let t = Target::start().await?;
    let dir = tempfile::tempdir()?;
    let driver = Driver::start(t.sample.clone(), dir.path()).await?;
    let info = driver
        .identity()
        .driver_get_info(DriverGetInfoRequest {})
        .await?
        .into_inner();
    assert_eq!(info.name, DRIVER_NAME);
    let mut cosi = driver.provisioner();
    let parameters: HashMap<String, String> = t.parameters.clone().into_iter().collect();

    let (data, shared) = (
        "bc-0b1f6c1e-0000-4000-8000-0000000000d1",
        "bc-0b1f6c1e-0000-4000-8000-0000000000d2",
    );
    for name in [data, shared, data] {
        let created = cosi
            .driver_create_bucket(DriverCreateBucketRequest {
                name: name.to_owned(),
                protocols: vec![s3().unwrap()],
                parameters: parameters.clone(),
            })
            .await?
            .into_inner();
        assert_eq!(created.bucket_id, name);
        let bucket_info = created.protocols.unwrap().s3.unwrap();
        assert_eq!(
            (bucket_info.endpoint.as_str(), bucket_info.region.as_str()),
            (t.store.endpoint().as_str(), "us-east-1")
        );
    }
    let root = t.store.root_client();
    root.put_object()
        .bucket(shared)
        .key("seed")
        .body(ByteStream::from_static(b"seed"))
        .send()
        .await?;

    let account = "ba-0b1f6c1e-0000-4000-8000-0000000000a1";
    let grant = DriverGrantBucketAccessRequest {
        account_name: account.to_owned(),
        protocol: s3(),
        authentication_type: Some(AuthenticationType {
            r#type: authentication_type::Type::Key.into(),
        }),
        parameters: parameters.clone(),
        buckets: vec![
            accessed(data, access_mode::Mode::ReadWrite),
            accessed(shared, access_mode::Mode::ReadOnly),
        ],
        ..Default::default()
    };
    let granted = cosi.driver_grant_bucket_access(grant).await?.into_inner();
    assert_eq!(granted.account_id, account);
    let mut ids: Vec<&str> = granted
        .buckets
        .iter()
        .map(|b| b.bucket_id.as_str())
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, [data, shared]);
    let keys = granted.credentials.unwrap().s3.unwrap();
    let key = t.client(&Credentials::new(
        keys.access_key_id,
        keys.access_secret_key,
    ));
    key.put_object()
        .bucket(data)
        .key("seed")
        .body(ByteStream::from_static(b"mine"))
        .send()
        .await?;
    assert_eq!(can(&key, data).await, RW);
    assert_eq!(can(&key, shared).await, RO);

    for _ in 0..2 {
        let revoke = DriverRevokeBucketAccessRequest {
            account_id: account.to_owned(),
            protocol: s3(),
            parameters: parameters.clone(),
            buckets: [data, shared]
                .iter()
                .map(|b| driver_revoke_bucket_access_request::AccessedBucket {
                    bucket_id: (*b).to_owned(),
                })
                .collect(),
            ..Default::default()
        };
        cosi.driver_revoke_bucket_access(revoke).await?;
    }
    assert_eq!(can(&key, data).await, NONE, "revoked");
    assert!(t.cosi_users().await?.is_empty());

    // Delete needs an empty bucket unless forceDelete: refused for now (the
    // sidecar retries), the bucket kept.
    let keep = DriverDeleteBucketRequest {
        bucket_id: data.to_owned(),
        parameters: parameters.clone(),
    };
    let status = cosi.driver_delete_bucket(keep).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::FailedPrecondition, "{status:?}");
    assert!(status.message().contains("not empty"), "{status:?}");
    root.head_bucket().bucket(data).send().await?;
    let mut forced = parameters.clone();
    forced.insert("forceDelete".into(), "true".into());
    for bucket in [data, shared, data] {
        let delete = DriverDeleteBucketRequest {
            bucket_id: bucket.to_owned(),
            parameters: forced.clone(),
        };
        cosi.driver_delete_bucket(delete).await?;
        assert!(
            root.head_bucket().bucket(bucket).send().await.is_err(),
            "{bucket} deleted"
        );
    }
    driver.stop().await
}
