//! The RustFS store of the test environment, against the real server: it
//! starts on loopback with its own root credentials, serves S3 and keeps
//! bucket tags (what ownership without a marker object will be recorded in).

#![allow(clippy::unwrap_used)] // tests may unwrap; the library may not

use anyhow::Result;
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{Tag, Tagging};
use obc_tests::rustfs::RustFs;
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
