//! The RustFS store of the test environment, against the real server: it
//! starts on loopback with its own root credentials, serves S3 and keeps
//! bucket tags (what ownership without a marker object will be recorded in).

#![allow(clippy::unwrap_used)] // tests may unwrap; the library may not

use anyhow::Result;
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{Tag, Tagging};
use obc_tests::rustfs::{RustFs, is_quota_exceeded, put_object_when_quota_ready};
use obc_tests::testenv::{self, s3_client_for};

#[tokio::test]
async fn rustfs_serves_s3_and_bucket_tags_with_its_own_root_credentials() -> Result<()> {
    testenv::init_tracing();
    let dir = tempfile::tempdir()?;
    let store = RustFs::start(dir.path()).await?;
    println!("rustfs ready in {:.1?}", store.startup());
    let root = store.root_client();

    root.create_bucket().bucket("tagged").send().await?;
    root.put_object()
        .bucket("tagged")
        .key("hello.txt")
        .body(ByteStream::from_static(b"hello"))
        .send()
        .await?;
    let body = root
        .get_object()
        .bucket("tagged")
        .key("hello.txt")
        .send()
        .await?
        .body
        .collect()
        .await?
        .into_bytes();
    assert_eq!(&body[..], b"hello");

    let tag = Tag::builder()
        .key("obc-claim-uid")
        .value("0b1f6c1e-0000-4000-8000-000000000001")
        .build()?;
    root.put_bucket_tagging()
        .bucket("tagged")
        .tagging(Tagging::builder().tag_set(tag.clone()).build()?)
        .send()
        .await?;
    let tags = root
        .get_bucket_tagging()
        .bucket("tagged")
        .send()
        .await?
        .tag_set;
    assert_eq!(tags, vec![tag]);

    // Anyone without the root key is refused: the store is not open.
    let (key, _) = store.root_credentials();
    let stranger = s3_client_for(&store.endpoint(), &key, "not-the-secret-key-at-all");
    let err = stranger.list_buckets().send().await.unwrap_err();
    let code = err.into_service_error().meta().code().map(str::to_owned);
    assert_eq!(code.as_deref(), Some("SignatureDoesNotMatch"), "{code:?}");

    store.stop().await;
    let log = std::fs::read_to_string(store.log_path())?;
    let (_, secret) = store.root_credentials();
    assert!(!log.contains(&secret), "the root secret reached rustfs.log");
    Ok(())
}

/// The sample's MinIO admin client against the real server: users and
/// policies are created, listed (an encrypted response), attached and
/// removed; a user reaches only its policy's bucket; a quota is kept and
/// enforced; removing what is gone reports "was not there".
#[tokio::test]
async fn admin_client_manages_users_policies_and_quotas_on_rustfs() -> Result<()> {
    use sample_provisioner::admin::{AdminClient, BucketQuota};
    testenv::init_tracing();
    let dir = tempfile::tempdir()?;
    let store = RustFs::start(dir.path()).await?;
    let (key, secret) = store.root_credentials();
    let admin = AdminClient::new(
        &store.endpoint(),
        "us-east-1",
        lib_provisioner::Credentials::new(key, secret.clone()),
    )?;
    let root = store.root_client();
    for bucket in ["mine", "theirs"] {
        root.create_bucket().bucket(bucket).send().await?;
    }
    let policy = serde_json::json!({
        "Version": "2012-10-17",
        "Statement": [{
            "Effect": "Allow",
            "Action": ["s3:*"],
            "Resource": ["arn:aws:s3:::mine", "arn:aws:s3:::mine/*"],
        }],
    });
    admin.add_canned_policy("only-mine", &policy).await?;
    admin.add_canned_policy("only-mine", &policy).await?; // an upsert
    assert!(
        admin
            .list_canned_policies()
            .await?
            .contains(&"only-mine".to_owned())
    );
    let user_secret = "user-secret-0123456789abcdef";
    admin
        .add_user("obc-user-1", "first-secret-0123456789")
        .await?;
    admin.add_user("obc-user-1", user_secret).await?; // replaces the secret
    admin.set_user_policy("obc-user-1", "only-mine").await?;
    admin.set_user_policy("obc-user-1", "only-mine").await?;
    let info = admin.user_info("obc-user-1").await?.expect("user exists");
    assert_eq!(info.policies().collect::<Vec<_>>(), ["only-mine"]);
    let users = admin.list_users().await?;
    assert!(users.contains_key("obc-user-1"), "{users:?}");

    let user = s3_client_for(&store.endpoint(), "obc-user-1", user_secret);
    user.put_object()
        .bucket("mine")
        .key("a")
        .body(ByteStream::from_static(b"data"))
        .send()
        .await?;
    let denied = user
        .put_object()
        .bucket("theirs")
        .key("a")
        .body(ByteStream::from_static(b"data"))
        .send()
        .await
        .unwrap_err();
    assert_eq!(
        aws_sdk_s3::error::ProvideErrorMetadata::code(&denied),
        Some("AccessDenied")
    );
    let stale = s3_client_for(&store.endpoint(), "obc-user-1", "first-secret-0123456789");
    assert!(stale.list_objects_v2().bucket("mine").send().await.is_err());

    admin
        .set_bucket_quota("mine", &BucketQuota::hard(64 * 1024))
        .await?;
    assert_eq!(
        admin.bucket_quota("mine").await?,
        BucketQuota::hard(64 * 1024)
    );
    let over = put_object_when_quota_ready(&user, "mine", "big", vec![0u8; 128 * 1024])
        .await
        .expect_err("a write over the quota is refused");
    assert!(is_quota_exceeded(&over), "refused for the quota: {over:?}");
    put_object_when_quota_ready(&user, "mine", "small", vec![0u8; 1024])
        .await
        .expect("a write within the quota is accepted");

    assert!(admin.remove_user("obc-user-1").await?);
    assert!(!admin.remove_user("obc-user-1").await?);
    assert_eq!(admin.user_info("obc-user-1").await?, None);
    assert!(admin.remove_canned_policy("only-mine").await?);
    // Removing it again succeeds (RustFS does not say it was gone).
    admin.remove_canned_policy("only-mine").await?;
    assert!(
        !admin
            .list_canned_policies()
            .await?
            .contains(&"only-mine".to_owned())
    );
    assert!(user.list_objects_v2().bucket("mine").send().await.is_err());

    // A wrong admin secret is refused, not mistaken for "no such user".
    let (key, _) = store.root_credentials();
    let wrong = AdminClient::new(
        &store.endpoint(),
        "us-east-1",
        lib_provisioner::Credentials::new(key, "wrong-secret-wrong-secret"),
    )?;
    let e = wrong.remove_user("obc-user-1").await.unwrap_err();
    assert!(e.is_denied() && !e.is_not_found(), "{e}");
    let log = std::fs::read_to_string(store.log_path())?;
    for s in [secret.as_str(), user_secret] {
        assert!(!log.contains(s), "a secret reached the RustFS log");
    }
    store.stop().await;
    Ok(())
}

/// The sample's store in tag mode, against RustFS and a real apiserver:
/// the owner is a bucket tag, creation intents are ConfigMaps, nothing is
/// written into user buckets and no state bucket is made. Each state an
/// interrupted creation can leave is built by hand and resolved.
#[tokio::test]
async fn tag_ownership_keeps_nothing_in_user_buckets() -> Result<()> {
    use sample_provisioner::intents::KubeIntents;
    use sample_provisioner::store::{
        Basis, Creation, DEFAULT_STATE_BUCKET, Deletion, OWNER_MARKER_KEY, Owner, Store,
    };
    testenv::init_tracing();
    let env = obc_tests::TestEnv::start().await?;
    let store_env = RustFs::start(env.dir()).await?;
    let endpoint = store_env.endpoint().trim_end_matches('/').to_owned();
    let (key, secret) = store_env.root_credentials();
    let intents = KubeIntents::new(env.admin_client(), "default", &endpoint);
    let store = Store::new(
        &sample_provisioner::params::parse_endpoint(&endpoint).map_err(anyhow::Error::msg)?,
        "us-east-1",
        &lib_provisioner::Credentials::new(key, secret),
    )
    .with_tag_ownership(intents.clone());
    let root = store_env.root_client();
    let a = Owner {
        claim_uid: "uid-a",
        claim: "apps/a",
        sweep: None,
    };
    let b = Owner {
        claim_uid: "uid-b",
        claim: "apps/b",
        sweep: None,
    };

    assert_eq!(
        store.create_owned("exact-a", &a, false).await?,
        Creation::Created
    );
    assert_eq!(
        store.create_owned("exact-a", &a, false).await?,
        Creation::Existing
    );
    assert_eq!(
        store.owner_tag("exact-a").await.unwrap().as_deref(),
        Some("uid-a")
    );
    let listed = root.list_objects_v2().bucket("exact-a").send().await?;
    assert!(
        listed.contents().is_empty(),
        "nothing written into the bucket"
    );
    assert_eq!(intents.get("exact-a").await?, None, "intent settled");
    let e = store.create_owned("exact-a", &b, false).await.unwrap_err();
    assert!(!e.is_retryable() && e.to_string().contains("uid-a"), "{e}");

    // Died after CreateBucket, before the tag: the intent tells.
    assert_eq!(intents.record("left", &a).await?, None);
    root.create_bucket().bucket("left").send().await?;
    assert_eq!(
        store.create_owned("left", &a, false).await?,
        Creation::TakenOver(Basis::Intent)
    );
    assert_eq!(
        store.owner_tag("left").await.unwrap().as_deref(),
        Some("uid-a")
    );
    assert_eq!(intents.get("left").await?, None);
    // An empty untagged bucket nothing ties to the claim is someone else's.
    root.create_bucket().bucket("foreign").send().await?;
    let e = store.create_owned("foreign", &a, false).await.unwrap_err();
    assert!(!e.is_retryable(), "{e}");
    // Another claim's unfinished creation: wait for it.
    assert_eq!(intents.record("racing", &b).await?, None);
    let e = store.create_owned("racing", &a, false).await.unwrap_err();
    assert!(
        e.is_retryable() && e.to_string().contains("ConfigMap"),
        "{e}"
    );
    assert!(!store.exists("racing").await.unwrap());
    // A marker written by an older version still counts.
    root.create_bucket().bucket("legacy").send().await?;
    root.put_object()
        .bucket("legacy")
        .key(OWNER_MARKER_KEY)
        .body(ByteStream::from_static(b"uid-a"))
        .send()
        .await?;
    assert_eq!(
        store.create_owned("legacy", &a, false).await?,
        Creation::Existing
    );

    // Deletion goes by the tag too.
    root.put_object()
        .bucket("exact-a")
        .key("data")
        .body(ByteStream::from_static(b"x"))
        .send()
        .await?;
    assert_eq!(
        store.delete_owned("exact-a", "uid-a", true, false).await?,
        Deletion::Deleted { objects: 1 }
    );
    assert!(!store.exists("exact-a").await.unwrap());
    assert!(matches!(
        store.delete_owned("foreign", "uid-a", true, false).await?,
        Deletion::NotOurs(_)
    ));
    assert!(store.exists("foreign").await.unwrap());
    let buckets = root.list_buckets().send().await?;
    assert!(
        !buckets
            .buckets()
            .iter()
            .any(|x| x.name() == Some(DEFAULT_STATE_BUCKET)),
        "no state bucket"
    );
    store_env.stop().await;
    Ok(())
}
