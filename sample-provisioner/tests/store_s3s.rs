//! The bucket operations against a real S3 server: s3s-fs, as installed by
//! `scripts/install-testenv` (or named by `OBC_S3_SERVER`). Skipped, with a
//! note, when the binary is not there.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use lib_provisioner::Credentials;
use sample_provisioner::params::{StoreEndpoint, parse_endpoint};
use sample_provisioner::store::{Creation, Deletion, OWNER_MARKER_KEY, Owner, Store};

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

async fn start() -> Option<S3Server> {
    let Some(bin) = s3s_fs_binary() else {
        eprintln!(
            "s3s-fs not installed (run scripts/install-testenv or set OBC_S3_SERVER): skipping"
        );
        return None;
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
    Some(S3Server {
        child,
        endpoint,
        _data: data,
    })
}

fn store(server: &S3Server) -> Store {
    let _ = rustls::crypto::ring::default_provider().install_default();
    Store::new(
        &server.endpoint,
        "us-east-1",
        &Credentials::new(ACCESS_KEY, SECRET_KEY),
    )
}

fn raw_client(server: &S3Server) -> aws_sdk_s3::Client {
    use aws_sdk_s3::config::{BehaviorVersion, Region, RequestChecksumCalculation};
    let config = aws_sdk_s3::config::Builder::new()
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
};
const B: Owner<'static> = Owner {
    claim_uid: "uid-b",
    claim: "ns/b",
};

#[tokio::test]
async fn create_is_idempotent_and_guards_ownership() {
    let Some(server) = start().await else { return };
    let s = store(&server);
    assert_eq!(
        s.create_owned("photos", "us-east-1", &A)
            .await
            .expect("creates"),
        Creation::Owned
    );
    assert_eq!(
        s.owner("photos").await.expect("reads"),
        Some("uid-a".into())
    );
    // Again (a retry after a crash): same result.
    assert_eq!(
        s.create_owned("photos", "us-east-1", &A)
            .await
            .expect("idempotent"),
        Creation::Owned
    );
    // Another claim asking for the same name.
    let e = s
        .create_owned("photos", "us-east-1", &B)
        .await
        .expect_err("not B's");
    assert!(!e.is_retryable());
    assert!(
        e.to_string()
            .contains("exists and was not created for this claim"),
        "{e}"
    );
    // Deleting for B keeps A's bucket.
    let d = s
        .delete_owned("photos", "uid-b", true)
        .await
        .expect("no error");
    assert!(matches!(d, Deletion::NotOurs(_)), "{d:?}");
    assert!(s.exists("photos").await.expect("head"));
}

#[tokio::test]
async fn unmarked_buckets_are_taken_over_only_when_empty() {
    let Some(server) = start().await else { return };
    let (s, raw) = (store(&server), raw_client(&server));
    // Empty and unmarked (an interrupted CreateBucket+marker, or someone
    // else's empty bucket): reported, and taken over only on request.
    raw.create_bucket()
        .bucket("interrupted")
        .send()
        .await
        .expect("create");
    let found = s
        .create_owned("interrupted", "us-east-1", &A)
        .await
        .expect("no error");
    assert_eq!(found, Creation::Unclaimed);
    assert_eq!(
        s.owner("interrupted").await.expect("reads"),
        None,
        "not marked yet"
    );
    s.take_over("interrupted", &A).await.expect("takes over");
    assert_eq!(
        s.owner("interrupted").await.expect("reads"),
        Some("uid-a".into())
    );
    assert_eq!(
        s.create_owned("interrupted", "us-east-1", &A)
            .await
            .expect("ours"),
        Creation::Owned
    );
    // A second claim taking over loses to the first one's marker.
    let e = s
        .take_over("interrupted", &B)
        .await
        .expect_err("marked already");
    assert!(e.to_string().contains("uid-a"), "{e}");
    assert_eq!(
        s.owner("interrupted").await.expect("reads"),
        Some("uid-a".into())
    );

    // Holding data and unmarked: someone else's; never taken nor deleted.
    raw.create_bucket()
        .bucket("foreign")
        .send()
        .await
        .expect("create");
    put(&raw, "foreign", "data.txt").await;
    let e = s
        .create_owned("foreign", "us-east-1", &A)
        .await
        .expect_err("not ours");
    assert!(
        e.to_string().contains("was not created for this claim"),
        "{e}"
    );
    let d = s
        .delete_owned("foreign", "uid-a", true)
        .await
        .expect("no error");
    assert!(matches!(d, Deletion::NotOurs(_)), "{d:?}");
    assert!(s.exists("foreign").await.expect("head"), "kept");
}

#[tokio::test]
async fn delete_refuses_non_empty_buckets_unless_forced() {
    let Some(server) = start().await else { return };
    let (s, raw) = (store(&server), raw_client(&server));
    s.create_owned("logs", "us-east-1", &A)
        .await
        .expect("creates");
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
        .delete_owned("logs", "uid-a", false)
        .await
        .expect_err("not empty");
    assert!(!e.is_retryable());
    assert_eq!(
        e.to_string(),
        "bucket logs is not empty: empty it, or set forceDelete: \"true\" on the StorageClass"
    );
    assert!(s.exists("logs").await.expect("head"));

    let d = s
        .delete_owned("logs", "uid-a", true)
        .await
        .expect("force deletes");
    assert_eq!(d, Deletion::Deleted { objects: 1105 });
    assert!(!s.exists("logs").await.expect("head"));
    // Again: already gone.
    assert_eq!(
        s.delete_owned("logs", "uid-a", true)
            .await
            .expect("idempotent"),
        Deletion::AlreadyGone
    );
}

#[tokio::test]
async fn empty_owned_bucket_is_deleted_with_its_marker() {
    let Some(server) = start().await else { return };
    let (s, raw) = (store(&server), raw_client(&server));
    s.create_owned("tmp-bucket", "us-east-1", &A)
        .await
        .expect("creates");
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
        s.delete_owned("tmp-bucket", "uid-a", false)
            .await
            .expect("deletes"),
        Deletion::Deleted { objects: 0 }
    );
    assert!(!s.exists("tmp-bucket").await.expect("head"));
    assert_eq!(
        s.delete_owned("never-existed", "uid-a", false)
            .await
            .expect("nothing to do"),
        Deletion::AlreadyGone
    );
}

#[tokio::test]
async fn wrong_credentials_are_permanent_and_a_down_store_is_retryable() {
    let Some(server) = start().await else { return };
    let bad = Store::new(
        &server.endpoint,
        "us-east-1",
        &Credentials::new(ACCESS_KEY, "wrong"),
    );
    let e = bad
        .create_owned("bucket-one", "us-east-1", &A)
        .await
        .expect_err("refused");
    assert!(!e.is_retryable(), "{e:?}");
    assert!(e.to_string().contains("admin Secret"), "{e}");

    let down = parse_endpoint(&format!("http://127.0.0.1:{}", free_port())).expect("valid");
    let s = Store::new(
        &down,
        "us-east-1",
        &Credentials::new(ACCESS_KEY, SECRET_KEY),
    );
    let e = s
        .create_owned("bucket-one", "us-east-1", &A)
        .await
        .expect_err("unreachable");
    assert!(e.is_retryable(), "{e:?}");
    let e = s
        .delete_owned("bucket-one", "uid-a", false)
        .await
        .expect_err("unreachable");
    assert!(e.is_retryable(), "{e:?}");
}
