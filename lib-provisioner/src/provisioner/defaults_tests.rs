//! The defaults of the bucket-only and access methods, against an
//! in-memory provisioner that records what it was asked.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use super::*;

/// Records each call as `method bucket claim-uid`; keeps nothing else.
#[derive(Default)]
struct Recorder {
    calls: Mutex<Vec<String>>,
    params: Mutex<Vec<BTreeMap<String, String>>>,
}

impl Recorder {
    fn record(&self, method: &str, bucket: &str, uid: &str, params: &BTreeMap<String, String>) {
        let mut calls = self.calls.lock().expect("lock");
        calls.push(format!("{method} {bucket} {uid}"));
        self.params.lock().expect("lock").push(params.clone());
    }

    fn calls(&self) -> Vec<String> {
        self.calls.lock().expect("lock").clone()
    }
}

fn access(uid: &str) -> BucketAccess {
    BucketAccess::new(
        "s3.local",
        9000,
        Credentials::new(format!("key-{uid}"), "secret"),
    )
    .with_region("r1")
    .with_state("user", format!("u-{uid}"))
}

#[async_trait]
impl Provisioner for Recorder {
    async fn provision(&self, req: &BucketRequest) -> Result<BucketAccess, ProvisionError> {
        self.record(
            "provision",
            &req.bucket_name,
            &req.claim.uid,
            &req.parameters,
        );
        Ok(access(&req.claim.uid))
    }
    async fn grant(&self, req: &BucketRequest) -> Result<BucketAccess, ProvisionError> {
        self.record("grant", &req.bucket_name, &req.claim.uid, &req.parameters);
        assert_eq!(
            req.storage_class_name, "class-a",
            "the class name is passed on"
        );
        Ok(access(&req.claim.uid))
    }
    async fn delete(&self, req: &TeardownRequest) -> Result<(), ProvisionError> {
        self.record("delete", &req.bucket_name, &req.claim.uid, &req.parameters);
        Ok(())
    }
    async fn revoke(&self, req: &TeardownRequest) -> Result<(), ProvisionError> {
        self.record("revoke", &req.bucket_name, &req.claim.uid, &req.parameters);
        assert_eq!(
            req.additional_state.get("user").map(String::as_str),
            Some("u-ba-1")
        );
        Ok(())
    }
}

fn principal() -> ClaimIdentity {
    ClaimIdentity::new("shop", "reader", "ba-1")
}

fn request() -> AccessRequest {
    AccessRequest::new(principal(), "ba-ba-1")
        .with_class_name("class-a")
        .with_parameter("endpoint", "http://s3.local:9000")
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime")
        .block_on(f)
}

#[test]
fn create_bucket_provisions_and_drops_the_credentials() {
    let p = Recorder::default();
    let req = BucketRequest::new(
        ClaimIdentity::new("shop", "photos", "bc-1"),
        "bc-1",
        "class-a",
    );
    let info = block_on(p.create_bucket(&req)).expect("created");
    assert_eq!(p.calls(), vec!["provision bc-1 bc-1"]);
    assert_eq!(
        info.endpoint,
        StoreEndpoint::new("s3.local", 9000).with_region("r1")
    );
    assert_eq!(
        info.additional_state["user"], "u-bc-1",
        "delete needs it later"
    );
    assert!(!format!("{info:?}").contains("secret"), "{info:?}");
}

#[test]
fn existing_bucket_is_unsupported_and_says_so() {
    let p = Recorder::default();
    let req = BucketRequest::new(principal(), "admins-bucket", "class-a");
    let err = block_on(p.existing_bucket(&req)).expect_err("no static buckets by default");
    assert_eq!(err.kind(), ErrorKind::Unsupported);
    assert!(err.nothing_created());
    assert!(err.message().contains("\"admins-bucket\""), "{err}");
    assert!(p.calls().is_empty(), "{:?}", p.calls());
}

#[test]
fn grant_access_grants_one_read_write_bucket_to_the_principal() {
    let p = Recorder::default();
    let req = request().with_bucket("bc-1", AccessMode::ReadWrite);
    let grant = block_on(p.grant_access(&req)).expect("granted");
    assert_eq!(
        p.calls(),
        vec!["grant bc-1 ba-1"],
        "the principal stands for the claim"
    );
    assert_eq!(
        p.params.lock().expect("lock")[0]["endpoint"],
        "http://s3.local:9000"
    );
    assert_eq!(
        grant.account_id, "ba-ba-1",
        "the account name is the account id"
    );
    assert_eq!(grant.credentials.access_key_id, "key-ba-1");
    assert_eq!(grant.endpoint.url(), "https://s3.local:9000");
    assert_eq!(grant.additional_state["user"], "u-ba-1");
}

#[test]
fn grant_access_refuses_other_modes_before_calling_grant() {
    for mode in [AccessMode::ReadOnly, AccessMode::WriteOnly] {
        let p = Recorder::default();
        let req = request().with_bucket("bc-1", mode);
        let err = block_on(p.grant_access(&req)).expect_err("only ReadWrite by default");
        assert_eq!(err.reason(), Some(ErrorReason::UnsupportedAccessMode(mode)));
        assert_eq!(err.kind(), ErrorKind::Unsupported);
        assert!(err.nothing_created());
        assert!(err.message().contains(mode.as_str()), "{err}");
        assert!(p.calls().is_empty(), "{:?}", p.calls());
    }
}

#[test]
fn grant_access_refuses_several_buckets_before_calling_grant() {
    let p = Recorder::default();
    let req = request()
        .with_bucket("bc-1", AccessMode::ReadWrite)
        .with_bucket("bc-2", AccessMode::ReadWrite);
    let err = block_on(p.grant_access(&req)).expect_err("one bucket by default");
    assert_eq!(err.reason(), Some(ErrorReason::MultiBucketUnsupported));
    assert!(!err.is_retryable());
    assert!(err.message().contains("2 buckets"), "{err}");
    assert!(p.calls().is_empty(), "{:?}", p.calls());
}

#[test]
fn grant_access_refuses_a_request_without_buckets() {
    let p = Recorder::default();
    let err = block_on(p.grant_access(&request())).expect_err("nothing to grant");
    assert_eq!(err.kind(), ErrorKind::Permanent);
    assert!(err.message().contains("shop/reader"), "{err}");
    assert!(p.calls().is_empty());
}

#[test]
fn revoke_access_revokes_each_bucket_for_the_principal() {
    let p = Recorder::default();
    let req = AccessRevocation::new(principal(), "ba-ba-1")
        .with_class_name("class-a")
        .with_bucket("bc-1")
        .with_bucket("bc-2")
        .with_state(BTreeMap::from([("user".into(), "u-ba-1".into())]));
    block_on(p.revoke_access(&req)).expect("revoked");
    assert_eq!(p.calls(), vec!["revoke bc-1 ba-1", "revoke bc-2 ba-1"]);
}

/// Overrides reach callers through `Arc` and `Box<dyn Provisioner>`.
struct Custom;

#[async_trait]
impl Provisioner for Custom {
    async fn provision(&self, _: &BucketRequest) -> Result<BucketAccess, ProvisionError> {
        Err(ProvisionError::permanent("unused"))
    }
    async fn grant(&self, _: &BucketRequest) -> Result<BucketAccess, ProvisionError> {
        Err(ProvisionError::permanent("unused"))
    }
    async fn delete(&self, _: &TeardownRequest) -> Result<(), ProvisionError> {
        Ok(())
    }
    async fn revoke(&self, _: &TeardownRequest) -> Result<(), ProvisionError> {
        Ok(())
    }
    async fn existing_bucket(&self, req: &BucketRequest) -> Result<BucketInfo, ProvisionError> {
        Err(ProvisionError::not_found(format!("no {}", req.bucket_name)))
    }
    async fn grant_access(&self, req: &AccessRequest) -> Result<AccessGrant, ProvisionError> {
        let endpoint = StoreEndpoint::new("h", 1);
        Ok(AccessGrant::new(
            &req.account_name,
            Credentials::new("k", "s"),
            endpoint,
        ))
    }
}

#[test]
fn overrides_are_forwarded_by_arc_and_box() {
    let boxed: Box<dyn Provisioner> = Box::new(Custom);
    let arc = Arc::new(boxed);
    let req = request()
        .with_bucket("bc-1", AccessMode::WriteOnly)
        .with_bucket("bc-2", AccessMode::ReadOnly);
    let grant = block_on(arc.grant_access(&req)).expect("the override, not the default");
    assert_eq!(grant.account_id, "ba-ba-1");
    let missing = BucketRequest::new(principal(), "gone", "class-a");
    let err = block_on(arc.existing_bucket(&missing)).expect_err("not found");
    assert_eq!(err.reason(), Some(ErrorReason::NotFound));
    assert!(err.is_retryable());
}
