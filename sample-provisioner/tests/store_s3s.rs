//! The bucket operations against a real S3 server: s3s-fs, as installed by
//! `scripts/install-testenv` (or named by `OBC_S3_SERVER`). A missing binary
//! fails every test, saying how to install it: a store test never passes
//! without the store.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use lib_provisioner::Credentials;
use lib_provisioner::ProvisionError;
use sample_provisioner::params::{StoreEndpoint, parse_endpoint};
use sample_provisioner::store::{
    Basis, Creation, DEFAULT_STATE_BUCKET, Deletion, OWNER_MARKER_KEY, Owner, STATE_BUCKET_MARKER,
    Store, intent_key,
};

const ACCESS_KEY: &str = "obc-test-admin";
const SECRET_KEY: &str = "obc-test-secret-key";

struct S3Server {
    child: Child,
    endpoint: StoreEndpoint,
    _data: tempfile::TempDir,
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn s3s_fs_binary() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("OBC_S3_SERVER").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let cache = match std::env::var_os("OBC_TESTENV_CACHE").filter(|p| !p.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(std::env::var_os("HOME")?).join(".cache/obc-testenv"),
    };
    let path = cache.join("s3s-fs-0.14.1/bin/s3s-fs");
    path.is_file().then_some(path)
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

async fn start() -> S3Server {
    let Some(bin) = s3s_fs_binary() else {
        panic!(
            "s3s-fs is not installed: run scripts/install-testenv (or set OBC_S3_SERVER to an s3s-fs binary)"
        );
    };
    let data = tempfile::tempdir().expect("temp dir");
    let port = free_port();
    let child = Command::new(bin)
        .arg("--host=127.0.0.1")
        .arg(format!("--port={port}"))
        .arg(format!("--access-key={ACCESS_KEY}"))
        .arg(format!("--secret-key={SECRET_KEY}"))
        .arg(data.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("s3s-fs starts");
    let endpoint = parse_endpoint(&format!("http://127.0.0.1:{port}")).expect("valid endpoint");
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "s3s-fs did not listen on {port}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    S3Server {
        child,
        endpoint,
        _data: data,
    }
}

fn store(server: &S3Server) -> Store {
    Store::new(
        &server.endpoint,
        "us-east-1",
        &Credentials::new(ACCESS_KEY, SECRET_KEY),
    )
}

fn raw_client(server: &S3Server) -> aws_sdk_s3::Client {
    use aws_sdk_s3::config::{BehaviorVersion, Region, RequestChecksumCalculation};
    let config = aws_sdk_s3::config::Builder::new()
        .http_client(sample_provisioner::http::s3_http_client())
        .behavior_version(BehaviorVersion::latest())
        .endpoint_url(&server.endpoint.url)
        .region(Region::new("us-east-1"))
        .credentials_provider(aws_credential_types::Credentials::new(
            ACCESS_KEY, SECRET_KEY, None, None, "test",
        ))
        .force_path_style(true)
        .request_checksum_calculation(RequestChecksumCalculation::WhenRequired)
        .build();
    aws_sdk_s3::Client::from_conf(config)
}

async fn put(client: &aws_sdk_s3::Client, bucket: &str, key: &str) {
    client
        .put_object()
        .bucket(bucket)
        .key(key)
        .body(aws_sdk_s3::primitives::ByteStream::from_static(b"data"))
        .send()
        .await
        .expect("put object");
}

const A: Owner<'static> = Owner {
    claim_uid: "uid-a",
    claim: "ns/a",
    sweep: None,
};
const B: Owner<'static> = Owner {
    claim_uid: "uid-b",
    claim: "ns/b",
    sweep: None,
};

async fn create(s: &Store, bucket: &str, owner: &Owner<'_>) -> Result<Creation, ProvisionError> {
    s.create_owned(bucket, owner, false).await
}

async fn delete(s: &Store, bucket: &str, uid: &str, force: bool) -> Deletion {
    s.delete_owned(bucket, uid, force, false)
        .await
        .expect("no error")
}

/// Writes the intent an interrupted creation leaves, as the store does.
async fn put_intent(raw: &aws_sdk_s3::Client, bucket: &str, uid: &str) {
    raw.put_object()
        .bucket(DEFAULT_STATE_BUCKET)
        .key(intent_key(bucket))
        .metadata("obc-claim", "ns/a")
        .body(aws_sdk_s3::primitives::ByteStream::from(
            uid.as_bytes().to_vec(),
        ))
        .send()
        .await
        .expect("put intent");
}

async fn keys(raw: &aws_sdk_s3::Client, bucket: &str) -> Vec<String> {
    raw.list_objects_v2()
        .bucket(bucket)
        .send()
        .await
        .expect("lists")
        .contents()
        .iter()
        .filter_map(|o| o.key().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn create_is_idempotent_and_guards_ownership() {
    let server = start().await;
    let (s, raw) = (store(&server), raw_client(&server));
    assert_eq!(
        create(&s, "photos", &A).await.expect("creates"),
        Creation::Created
    );
    assert_eq!(
        s.owner("photos").await.expect("reads"),
        Some("uid-a".into())
    );
    // The state bucket was made on the way, marked, and holds no intent.
    assert_eq!(
        s.owner(DEFAULT_STATE_BUCKET).await.expect("reads"),
        Some(STATE_BUCKET_MARKER.into())
    );
    assert_eq!(keys(&raw, DEFAULT_STATE_BUCKET).await, [OWNER_MARKER_KEY]);
    // Again (a retry after a crash): same bucket.
    assert_eq!(
        create(&s, "photos", &A).await.expect("idempotent"),
        Creation::Existing
    );
    // Another claim asking for the same name.
    let e = create(&s, "photos", &B).await.expect_err("not B's");
    assert!(!e.is_retryable());
    assert!(
        e.to_string()
            .contains("exists and was not created for this claim"),
        "{e}"
    );
    // Deleting for B keeps A's bucket.
    let d = delete(&s, "photos", "uid-b", true).await;
    assert!(matches!(d, Deletion::NotOurs(_)), "{d:?}");
    assert!(s.exists("photos").await.expect("head"));
    assert_eq!(keys(&raw, DEFAULT_STATE_BUCKET).await, [OWNER_MARKER_KEY]);
}

#[tokio::test]
async fn the_state_bucket_is_never_a_claims_bucket() {
    let server = start().await;
    let (s, raw) = (store(&server), raw_client(&server));
    let e = create(&s, DEFAULT_STATE_BUCKET, &A)
        .await
        .expect_err("reserved");
    assert!(!e.is_retryable());
    assert!(e.to_string().contains("state bucket"), "{e}");
    create(&s, "photos", &A).await.expect("creates");
    // Under another name (the flag changed): refused by its marker, kept.
    let other = s.clone().with_state_bucket("other-state");
    let e = create(&other, DEFAULT_STATE_BUCKET, &A)
        .await
        .expect_err("a state bucket");
    assert!(e.to_string().contains("state bucket"), "{e}");
    let d = delete(&other, DEFAULT_STATE_BUCKET, "uid-a", true).await;
    assert!(matches!(d, Deletion::NotOurs(_)), "{d:?}");
    assert!(s.exists(DEFAULT_STATE_BUCKET).await.expect("head"));

    // A state bucket name that is a claim's bucket, or someone's data.
    let e = create(&s.clone().with_state_bucket("photos"), "x-bucket", &B)
        .await
        .expect_err("a claim's bucket");
    assert!(!e.is_retryable());
    assert!(e.to_string().contains("--state-bucket"), "{e}");
    raw.create_bucket()
        .bucket("full-of-data")
        .send()
        .await
        .expect("create");
    put(&raw, "full-of-data", "data.txt").await;
    let e = create(&s.clone().with_state_bucket("full-of-data"), "x-bucket", &B)
        .await
        .expect_err("someone's data");
    assert!(e.to_string().contains("holds objects"), "{e}");
    assert!(
        !s.exists("x-bucket").await.expect("head"),
        "nothing created"
    );
}

#[tokio::test]
async fn an_interrupted_creation_resumes_from_its_intent() {
    let server = start().await;
    let (s, raw) = (store(&server), raw_client(&server));
    create(&s, "warm-up", &A)
        .await
        .expect("creates the state bucket");

    // Died after the intent, before CreateBucket.
    put_intent(&raw, "exact-1", "uid-a").await;
    // Another claim waits (retryable) while the creation is unfinished.
    let e = create(&s, "exact-1", &B).await.expect_err("A's intent");
    assert!(e.is_retryable(), "{e}");
    assert!(
        e.to_string().contains("being created for claim ns/a"),
        "{e}"
    );
    assert_eq!(
        create(&s, "exact-1", &A).await.expect("resumes"),
        Creation::Created
    );

    // Died after CreateBucket, before the marker: only the intent's claim
    // gets it.
    put_intent(&raw, "exact-2", "uid-a").await;
    raw.create_bucket()
        .bucket("exact-2")
        .send()
        .await
        .expect("create");
    let e = create(&s, "exact-2", &B).await.expect_err("not B's");
    assert!(!e.is_retryable(), "{e}");
    assert_eq!(
        create(&s, "exact-2", &A).await.expect("takes over"),
        Creation::TakenOver(Basis::Intent)
    );
    assert_eq!(
        s.owner("exact-2").await.expect("reads"),
        Some("uid-a".into())
    );

    // Died after the marker, before deleting the intent.
    put_intent(&raw, "exact-1", "uid-a").await;
    assert_eq!(
        create(&s, "exact-1", &A).await.expect("ours"),
        Creation::Existing
    );
    assert_eq!(keys(&raw, DEFAULT_STATE_BUCKET).await, [OWNER_MARKER_KEY]);

    // Without an intent, an empty unmarked bucket is never taken: nothing
    // a claim says about the name counts.
    raw.create_bucket()
        .bucket("someones")
        .send()
        .await
        .expect("create");
    let e = create(&s, "someones", &A).await.expect_err("unclaimed");
    assert!(e.to_string().contains("no creation intent"), "{e}");
    assert!(e.nothing_created(), "{e}");
    assert_eq!(s.owner("someones").await.expect("reads"), None);
    assert_eq!(keys(&raw, DEFAULT_STATE_BUCKET).await, [OWNER_MARKER_KEY]);
}

#[tokio::test]
async fn deleting_a_claim_removes_what_its_interrupted_creation_left() {
    let server = start().await;
    let (s, raw) = (store(&server), raw_client(&server));
    create(&s, "warm-up", &A)
        .await
        .expect("creates the state bucket");

    // Intent only (died before CreateBucket).
    put_intent(&raw, "gone-1", "uid-a").await;
    assert_eq!(
        delete(&s, "gone-1", "uid-a", false).await,
        Deletion::AlreadyGone
    );
    // Intent and an empty unmarked bucket; another claim's delete keeps both.
    put_intent(&raw, "left-1", "uid-a").await;
    raw.create_bucket()
        .bucket("left-1")
        .send()
        .await
        .expect("create");
    let d = delete(&s, "left-1", "uid-b", true).await;
    assert!(matches!(d, Deletion::NotOurs(_)), "{d:?}");
    assert_eq!(
        delete(&s, "left-1", "uid-a", false).await,
        Deletion::Deleted { objects: 0 }
    );
    assert!(!s.exists("left-1").await.expect("head"));
    assert_eq!(keys(&raw, DEFAULT_STATE_BUCKET).await, [OWNER_MARKER_KEY]);

    // Unmarked, no intent: never deleted, empty or not.
    for name in ["left-2", "left-3"] {
        raw.create_bucket()
            .bucket(name)
            .send()
            .await
            .expect("create");
    }
    put(&raw, "left-3", "data.txt").await;
    for name in ["left-2", "left-3"] {
        let d = delete(&s, name, "uid-a", true).await;
        assert!(matches!(d, Deletion::NotOurs(_)), "{d:?}");
    }
    assert!(s.exists("left-2").await.expect("head"));
    assert!(s.exists("left-3").await.expect("head"));
}

#[tokio::test]
async fn unmarked_buckets_with_data_are_never_taken_over() {
    let server = start().await;
    let (s, raw) = (store(&server), raw_client(&server));
    // A second claim marking a bucket loses to the first one's marker.
    create(&s, "first", &A).await.expect("creates");
    let e = create(&s, "first", &B).await.expect_err("marked already");
    assert!(e.to_string().contains("uid-a"), "{e}");

    // Holding data and unmarked: someone else's; never taken nor deleted.
    raw.create_bucket()
        .bucket("foreign")
        .send()
        .await
        .expect("create");
    put(&raw, "foreign", "data.txt").await;
    let e = s
        .create_owned("foreign", &A, false)
        .await
        .expect_err("not ours");
    assert!(
        e.to_string().contains("was not created for this claim"),
        "{e}"
    );
    let d = delete(&s, "foreign", "uid-a", true).await;
    assert!(matches!(d, Deletion::NotOurs(_)), "{d:?}");
    assert!(s.exists("foreign").await.expect("head"), "kept");
}

#[tokio::test]
async fn delete_refuses_non_empty_buckets_unless_forced() {
    let server = start().await;
    let (s, raw) = (store(&server), raw_client(&server));
    create(&s, "logs", &A).await.expect("creates");
    assert!(
        s.is_empty("logs").await.expect("lists"),
        "the marker does not count"
    );

    // More than one DeleteObjects batch and one listing page.
    let mut puts = tokio::task::JoinSet::new();
    for i in 0..1105 {
        let raw = raw.clone();
        puts.spawn(async move { put(&raw, "logs", &format!("dir{}/obj-{i:05}", i % 3)).await });
    }
    while let Some(r) = puts.join_next().await {
        r.expect("put task");
    }

    let e = s
        .delete_owned("logs", "uid-a", false, false)
        .await
        .expect_err("not empty");
    assert!(!e.is_retryable());
    assert_eq!(
        e.to_string(),
        "bucket logs is not empty: empty it, or set forceDelete: \"true\" on the StorageClass"
    );
    assert!(s.exists("logs").await.expect("head"));

    let d = delete(&s, "logs", "uid-a", true).await;
    assert_eq!(d, Deletion::Deleted { objects: 1105 });
    assert!(!s.exists("logs").await.expect("head"));
    // Again: already gone.
    assert_eq!(
        delete(&s, "logs", "uid-a", true).await,
        Deletion::AlreadyGone
    );
}

#[tokio::test]
async fn empty_owned_bucket_is_deleted_with_its_marker() {
    let server = start().await;
    let (s, raw) = (store(&server), raw_client(&server));
    create(&s, "tmp-bucket", &A).await.expect("creates");
    let listed = raw
        .list_objects_v2()
        .bucket("tmp-bucket")
        .send()
        .await
        .expect("lists");
    assert_eq!(
        listed
            .contents()
            .iter()
            .filter_map(|o| o.key())
            .collect::<Vec<_>>(),
        [OWNER_MARKER_KEY]
    );
    assert_eq!(
        delete(&s, "tmp-bucket", "uid-a", false).await,
        Deletion::Deleted { objects: 0 }
    );
    assert!(!s.exists("tmp-bucket").await.expect("head"));
    assert_eq!(
        delete(&s, "never-existed", "uid-a", false).await,
        Deletion::AlreadyGone
    );
}

#[tokio::test]
async fn wrong_credentials_are_permanent_and_a_down_store_is_retryable() {
    let server = start().await;
    let bad = Store::new(
        &server.endpoint,
        "us-east-1",
        &Credentials::new(ACCESS_KEY, "wrong"),
    );
    let e = create(&bad, "bucket-one", &A).await.expect_err("refused");
    assert!(!e.is_retryable(), "{e:?}");
    assert!(e.to_string().contains("admin Secret"), "{e}");

    let down = parse_endpoint(&format!("http://127.0.0.1:{}", free_port())).expect("valid");
    let s = Store::new(
        &down,
        "us-east-1",
        &Credentials::new(ACCESS_KEY, SECRET_KEY),
    );
    let e = create(&s, "bucket-one", &A).await.expect_err("unreachable");
    assert!(e.is_retryable(), "{e:?}");
    let e = s
        .delete_owned("bucket-one", "uid-a", false, false)
        .await
        .expect_err("unreachable");
    assert!(e.is_retryable(), "{e:?}");
}
