//! The COSI gRPC driver over its unix socket, against an in-memory
//! provisioner: each RPC reaches the trait with what the sidecar sent, and
//! each failure comes back with the code COSI's table names (which decides
//! whether the sidecar retries), a readable message, no secret and no
//! details. The store side is tested on RustFS in `cosi_rustfs.rs`.

#![allow(clippy::unwrap_used)] // tests may unwrap; the library may not

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use anyhow::Result;
use async_trait::async_trait;
use lib_provisioner::cosi::grpc::proto::{
    self, AccessMode, AuthenticationType, DriverCreateBucketRequest, DriverDeleteBucketRequest,
    DriverGetBucketRequest, DriverGetExistingBucketRequest, DriverGetInfoRequest,
    DriverGrantBucketAccessRequest, DriverRevokeBucketAccessRequest, ObjectProtocol, access_mode,
    authentication_type, driver_grant_bucket_access_request, driver_revoke_bucket_access_request,
    object_protocol,
};
use lib_provisioner::cosi::grpc::{CosiDriver, DriverError, Protocol};
use lib_provisioner::provisioner::{BucketInfo, StoreEndpoint};
use lib_provisioner::{
    BucketAccess, BucketRequest, Credentials, ProvisionError, Provisioner, TeardownRequest,
};
use obc_tests::cosi::{DRIVER_NAME, Driver};
use tonic::Code;

const SECRET: &str = "in-memory-secret-key-0123456789";

/// Buckets by name with the claim UID that made them; keys by claim UID.
/// `existing_bucket` is overridden; the access methods are the trait's
/// defaults (built from `grant` and `revoke`).
#[derive(Default)]
struct Memory {
    buckets: Mutex<BTreeMap<String, String>>,
    admin_buckets: Mutex<Vec<String>>,
    keys: Mutex<BTreeMap<String, String>>,
    parameters: Mutex<Vec<BTreeMap<String, String>>>,
}

impl Memory {
    fn seen(&self, params: &BTreeMap<String, String>) -> Result<(), ProvisionError> {
        self.parameters.lock().unwrap().push(params.clone());
        match params.get("fail").map(String::as_str) {
            Some("retry") => Err(ProvisionError::retryable(
                "the store did not answer; retrying",
            )),
            Some("bad") => Err(ProvisionError::permanent(
                "parameter endpoint is missing: add it to the class",
            )),
            _ => Ok(()),
        }
    }

    fn access(&self, uid: &str) -> BucketAccess {
        self.keys
            .lock()
            .unwrap()
            .insert(uid.to_owned(), format!("key-{uid}"));
        BucketAccess::new(
            "s3.memory",
            9000,
            Credentials::new(format!("key-{uid}"), SECRET),
        )
    }
}

#[async_trait]
impl Provisioner for Memory {
    async fn provision(&self, req: &BucketRequest) -> Result<BucketAccess, ProvisionError> {
        self.seen(&req.parameters)?;
        let mut buckets = self.buckets.lock().unwrap();
        let owner = buckets
            .entry(req.bucket_name.clone())
            .or_insert_with(|| req.claim.uid.clone());
        if *owner != req.claim.uid {
            return Err(ProvisionError::already_exists(format!(
                "bucket {} belongs to another claim",
                req.bucket_name
            )));
        }
        drop(buckets);
        Ok(self.access(&req.claim.uid))
    }
    async fn grant(&self, req: &BucketRequest) -> Result<BucketAccess, ProvisionError> {
        self.seen(&req.parameters)?;
        if !self.buckets.lock().unwrap().contains_key(&req.bucket_name) {
            return Err(ProvisionError::not_found(format!(
                "bucket {} does not exist",
                req.bucket_name
            )));
        }
        Ok(self.access(&req.claim.uid))
    }
    async fn delete(&self, req: &TeardownRequest) -> Result<(), ProvisionError> {
        self.seen(&req.parameters)?;
        let mut buckets = self.buckets.lock().unwrap();
        if buckets.get(&req.bucket_name) == Some(&req.claim.uid) {
            buckets.remove(&req.bucket_name);
        }
        self.keys.lock().unwrap().remove(&req.claim.uid);
        Ok(())
    }
    async fn revoke(&self, req: &TeardownRequest) -> Result<(), ProvisionError> {
        self.seen(&req.parameters)?;
        self.keys.lock().unwrap().remove(&req.claim.uid);
        Ok(())
    }
    async fn existing_bucket(&self, req: &BucketRequest) -> Result<BucketInfo, ProvisionError> {
        if self
            .admin_buckets
            .lock()
            .unwrap()
            .contains(&req.bucket_name)
        {
            return Ok(BucketInfo::new(
                StoreEndpoint::new("s3.memory", 9000).with_url("http://s3.memory:9000"),
            ));
        }
        Err(ProvisionError::not_found(format!(
            "bucket {} does not exist yet",
            req.bucket_name
        )))
    }
}

fn s3() -> Option<ObjectProtocol> {
    Some(ObjectProtocol {
        r#type: object_protocol::Type::S3.into(),
    })
}

fn key_auth() -> Option<AuthenticationType> {
    Some(AuthenticationType {
        r#type: authentication_type::Type::Key.into(),
    })
}

fn bucket(id: &str, mode: access_mode::Mode) -> driver_grant_bucket_access_request::AccessedBucket {
    driver_grant_bucket_access_request::AccessedBucket {
        bucket_id: id.to_owned(),
        access_mode: Some(AccessMode { mode: mode.into() }),
    }
}

fn grant_request(
    account: &str,
    buckets: Vec<driver_grant_bucket_access_request::AccessedBucket>,
) -> DriverGrantBucketAccessRequest {
    DriverGrantBucketAccessRequest {
        account_name: account.to_owned(),
        protocol: s3(),
        authentication_type: key_auth(),
        parameters: HashMap::from([("endpoint".to_owned(), "http://s3.memory:9000".to_owned())]),
        buckets,
        ..Default::default()
    }
}

/// The code of a refused call; its message has no secret and it has no
/// details.
fn refused<T: std::fmt::Debug>(out: Result<T, tonic::Status>) -> (Code, String) {
    let status = out.expect_err("refused");
    assert!(status.details().is_empty(), "{status:?}");
    assert!(!status.message().contains(SECRET), "{status:?}");
    assert!(!status.message().is_empty());
    (status.code(), status.message().to_owned())
}

#[tokio::test]
async fn get_info_says_the_name_and_s3() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let driver = Driver::start(Memory::default(), dir.path()).await?;
    let info = driver
        .identity()
        .driver_get_info(DriverGetInfoRequest {})
        .await?
        .into_inner();
    assert_eq!(info.name, DRIVER_NAME);
    assert_eq!(info.supported_protocols, vec![s3().unwrap()]);
    driver.stop().await
}

#[tokio::test]
async fn buckets_are_created_found_and_deleted_with_cosis_codes() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let memory = Arc::new(Memory::default());
    let driver = Driver::start(memory.clone(), dir.path()).await?;
    let mut client = driver.provisioner();
    let create = |name: &str, fail: Option<&str>| DriverCreateBucketRequest {
        name: name.to_owned(),
        protocols: vec![s3().unwrap()],
        parameters: fail
            .map(|f| HashMap::from([("fail".to_owned(), f.to_owned())]))
            .unwrap_or_default(),
    };

    // Created, and again (the sidecar repeats it on every reconcile).
    for _ in 0..2 {
        let out = client
            .driver_create_bucket(create("bc-1", None))
            .await?
            .into_inner();
        assert_eq!(out.bucket_id, "bc-1");
        let bucket_info = out.protocols.unwrap().s3.unwrap();
        assert_eq!(
            (
                bucket_info.bucket_id.as_str(),
                bucket_info.endpoint.as_str()
            ),
            ("bc-1", "https://s3.memory:9000")
        );
        assert_eq!(
            bucket_info.region, "us-east-1",
            "COSI needs a region; the store named none"
        );
    }
    // The bucket's claim on the gRPC path is its name, which delete gets back.
    assert_eq!(memory.buckets.lock().unwrap()["bc-1"], "bc-1");
    // Unless the name is `bc-<uid>`: then the claim's UID, the one the
    // in-process driver role hands over for the same bucket.
    let uid = "0b1f6c1e-2a3b-4c5d-8e9f-0123456789ab";
    let named = format!("bc-{uid}");
    client.driver_create_bucket(create(&named, None)).await?;
    assert_eq!(memory.buckets.lock().unwrap()[&named], uid);
    memory.buckets.lock().unwrap().remove(&named);

    memory
        .buckets
        .lock()
        .unwrap()
        .insert("bc-taken".into(), "someone-else".into());
    let (code, message) = refused(client.driver_create_bucket(create("bc-taken", None)).await);
    assert_eq!(code, Code::AlreadyExists, "{message}");
    assert_eq!(
        refused(
            client
                .driver_create_bucket(create("bc-2", Some("retry")))
                .await
        )
        .0,
        Code::Unavailable
    );
    let (code, message) = refused(
        client
            .driver_create_bucket(create("bc-2", Some("bad")))
            .await,
    );
    assert_eq!(code, Code::InvalidArgument);
    assert!(
        message.contains("parameter endpoint is missing"),
        "{message}"
    );
    assert_eq!(
        refused(client.driver_create_bucket(create("", None)).await).0,
        Code::InvalidArgument
    );
    let mut azure = create("bc-3", None);
    azure.protocols = vec![ObjectProtocol {
        r#type: object_protocol::Type::Azure.into(),
    }];
    let (code, message) = refused(client.driver_create_bucket(azure).await);
    assert_eq!(code, Code::InvalidArgument);
    assert!(
        message.contains("AZURE") && message.contains("S3"),
        "{message}"
    );
    assert!(!memory.buckets.lock().unwrap().contains_key("bc-3"));

    // Static: missing is NOT_FOUND (the sidecar retries), then found.
    let existing = DriverGetExistingBucketRequest {
        existing_bucket_id: "admins-bucket".into(),
        protocols: vec![s3().unwrap()],
        ..Default::default()
    };
    assert_eq!(
        refused(client.driver_get_existing_bucket(existing.clone()).await).0,
        Code::NotFound
    );
    memory
        .admin_buckets
        .lock()
        .unwrap()
        .push("admins-bucket".into());
    let found = client
        .driver_get_existing_bucket(existing)
        .await?
        .into_inner();
    assert_eq!(found.bucket_id, "admins-bucket");
    assert_eq!(
        found.protocols.unwrap().s3.unwrap().endpoint,
        "http://s3.memory:9000"
    );

    // A deletion refused for now is retried by the sidecar.
    let refused_delete = DriverDeleteBucketRequest {
        bucket_id: "bc-1".into(),
        parameters: HashMap::from([("fail".to_owned(), "bad".to_owned())]),
    };
    let (code, message) = refused(client.driver_delete_bucket(refused_delete).await);
    assert_eq!(code, Code::FailedPrecondition, "{message}");
    assert!(memory.buckets.lock().unwrap().contains_key("bc-1"));

    // Deleted, and again: gone already is OK.
    for _ in 0..2 {
        let delete = DriverDeleteBucketRequest {
            bucket_id: "bc-1".into(),
            ..Default::default()
        };
        client.driver_delete_bucket(delete).await?;
        assert!(!memory.buckets.lock().unwrap().contains_key("bc-1"));
    }
    let empty = DriverDeleteBucketRequest::default();
    assert_eq!(
        refused(client.driver_delete_bucket(empty).await).0,
        Code::InvalidArgument
    );
    driver.stop().await
}

/// `DriverGetBucket` (upstream's newer name) and `DriverGetExistingBucket`
/// give the same answer to the same question: an id, the protocols asked
/// for and the class parameters.
async fn both_names(
    client: &mut proto::provisioner_client::ProvisionerClient<tonic::transport::Channel>,
    id: &str,
    protocols: Vec<ObjectProtocol>,
) -> (
    Result<(String, Option<proto::ObjectProtocolAndBucketInfo>), (Code, String)>,
    Result<(String, Option<proto::ObjectProtocolAndBucketInfo>), (Code, String)>,
) {
    let old = client
        .driver_get_existing_bucket(DriverGetExistingBucketRequest {
            existing_bucket_id: id.to_owned(),
            protocols: protocols.clone(),
            ..Default::default()
        })
        .await
        .map(|r| r.into_inner())
        .map(|r| (r.bucket_id, r.protocols))
        .map_err(|s| (s.code(), s.message().to_owned()));
    let new = client
        .driver_get_bucket(DriverGetBucketRequest {
            bucket_id: id.to_owned(),
            protocols,
            ..Default::default()
        })
        .await
        .map(|r| r.into_inner())
        .map(|r| (r.bucket_id, r.protocols))
        .map_err(|s| (s.code(), s.message().to_owned()));
    (old, new)
}

#[tokio::test]
async fn get_bucket_answers_as_get_existing_bucket() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let memory = Arc::new(Memory::default());
    let driver = Driver::start(memory.clone(), dir.path()).await?;
    let mut client = driver.provisioner();
    let azure = ObjectProtocol {
        r#type: object_protocol::Type::Azure.into(),
    };

    // Missing: NOT_FOUND under both names (the sidecar retries).
    let (old, new) = both_names(&mut client, "admins-bucket", vec![s3().unwrap()]).await;
    assert_eq!(old.as_ref().unwrap_err().0, Code::NotFound, "{old:?}");
    assert_eq!(new.as_ref().unwrap_err().0, Code::NotFound, "{new:?}");

    // Refused before the provisioner: no id, a protocol not served.
    for (id, protocols) in [("", vec![s3().unwrap()]), ("admins-bucket", vec![azure])] {
        let (old, new) = both_names(&mut client, id, protocols).await;
        assert_eq!(
            old.as_ref().unwrap_err().0,
            Code::InvalidArgument,
            "{old:?}"
        );
        assert_eq!(
            new.as_ref().unwrap_err().0,
            Code::InvalidArgument,
            "{new:?}"
        );
    }
    let (_, new) = both_names(&mut client, "", vec![]).await;
    assert!(
        new.unwrap_err()
            .1
            .starts_with("DriverGetBucket names no bucket"),
        "the refusal names the RPC that was called"
    );

    // Found: the same id and bucket info under both names.
    memory
        .admin_buckets
        .lock()
        .unwrap()
        .push("admins-bucket".into());
    let (old, new) = both_names(&mut client, "admins-bucket", vec![s3().unwrap()]).await;
    let (id, info) = new.expect("found under the new name");
    assert_eq!(id, "admins-bucket");
    let s3_info = info.clone().unwrap().s3.unwrap();
    assert_eq!(
        (s3_info.bucket_id.as_str(), s3_info.endpoint.as_str()),
        ("admins-bucket", "http://s3.memory:9000")
    );
    assert_eq!(old.expect("found under the old name"), (id, info));
    driver.stop().await
}

/// A provisioner with nothing but the required methods refuses static
/// buckets as not implemented (the sidecar gives up and says so).
#[tokio::test]
async fn static_buckets_are_unimplemented_by_default() -> Result<()> {
    struct Minimal;
    #[async_trait]
    impl Provisioner for Minimal {
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
    }
    let dir = tempfile::tempdir()?;
    let driver = Driver::start(Minimal, dir.path()).await?;
    let request = DriverGetExistingBucketRequest {
        existing_bucket_id: "admins-bucket".into(),
        ..Default::default()
    };
    let (code, message) = refused(
        driver
            .provisioner()
            .driver_get_existing_bucket(request)
            .await,
    );
    assert_eq!(code, Code::Unimplemented);
    assert!(message.contains("existing bucket"), "{message}");
    let request = DriverGetBucketRequest {
        bucket_id: "admins-bucket".into(),
        ..Default::default()
    };
    let (code, message) = refused(driver.provisioner().driver_get_bucket(request).await);
    assert_eq!(code, Code::Unimplemented);
    assert!(message.contains("existing bucket"), "{message}");
    driver.stop().await
}

#[tokio::test]
async fn access_is_granted_and_revoked_by_account_with_cosis_codes() -> Result<()> {
    use access_mode::Mode;
    let dir = tempfile::tempdir()?;
    let memory = Arc::new(Memory::default());
    memory
        .buckets
        .lock()
        .unwrap()
        .insert("bc-1".into(), "bc-1".into());
    let driver = Driver::start(memory.clone(), dir.path()).await?;
    let mut client = driver.provisioner();

    let granted = client
        .driver_grant_bucket_access(grant_request("ba-7", vec![bucket("bc-1", Mode::ReadWrite)]))
        .await?
        .into_inner();
    assert_eq!(granted.account_id, "ba-7");
    let keys = granted.credentials.unwrap().s3.unwrap();
    assert_eq!(
        (keys.access_key_id.as_str(), keys.access_secret_key.as_str()),
        ("key-ba-7", SECRET)
    );
    // An account `ba-<uid>` is the BucketAccess with that UID, as in the
    // in-process mode.
    let uid = "0b1f6c1e-2a3b-4c5d-8e9f-0123456789ab";
    let named = client
        .driver_grant_bucket_access(grant_request(
            &format!("ba-{uid}"),
            vec![bucket("bc-1", Mode::ReadWrite)],
        ))
        .await?
        .into_inner();
    assert_eq!(
        named.credentials.unwrap().s3.unwrap().access_key_id,
        format!("key-{uid}")
    );
    memory.keys.lock().unwrap().remove(uid);
    assert_eq!(granted.buckets.len(), 1);
    assert_eq!(granted.buckets[0].bucket_id, "bc-1");
    let info = granted.buckets[0].bucket_info.clone().unwrap().s3.unwrap();
    assert_eq!(
        (info.bucket_id.as_str(), info.region.as_str()),
        ("bc-1", "us-east-1")
    );
    assert_eq!(
        info.addressing_style.unwrap().style,
        i32::from(proto::s3_addressing_style::Style::Path)
    );
    assert_eq!(
        memory.parameters.lock().unwrap().last().unwrap()["endpoint"],
        "http://s3.memory:9000"
    );

    // The default grant_access: one ReadWrite bucket only.
    let two = grant_request(
        "ba-8",
        vec![
            bucket("bc-1", Mode::ReadWrite),
            bucket("bc-2", Mode::ReadWrite),
        ],
    );
    let (code, message) = refused(client.driver_grant_bucket_access(two).await);
    assert_eq!(code, Code::OutOfRange, "{message}");
    for mode in [Mode::ReadOnly, Mode::WriteOnly] {
        let request = grant_request("ba-8", vec![bucket("bc-1", mode)]);
        let (code, message) = refused(client.driver_grant_bucket_access(request).await);
        assert_eq!(code, Code::InvalidArgument, "{message}");
        assert!(message.contains("ReadWrite"), "{message}");
    }
    assert!(
        !memory.keys.lock().unwrap().contains_key("ba-8"),
        "nothing granted"
    );
    // A bucket that is not there yet: retried.
    let missing = grant_request("ba-8", vec![bucket("bc-9", Mode::ReadWrite)]);
    assert_eq!(
        refused(client.driver_grant_bucket_access(missing).await).0,
        Code::NotFound
    );

    // Requests the driver refuses before asking the provisioner.
    let mut service_account = grant_request("ba-8", vec![bucket("bc-1", Mode::ReadWrite)]);
    service_account.authentication_type = Some(AuthenticationType {
        r#type: authentication_type::Type::ServiceAccount.into(),
    });
    let (code, message) = refused(client.driver_grant_bucket_access(service_account).await);
    assert_eq!(code, Code::InvalidArgument);
    assert!(message.contains("authenticationType Key"), "{message}");
    let mut no_protocol = grant_request("ba-8", vec![bucket("bc-1", Mode::ReadWrite)]);
    no_protocol.protocol = None;
    assert_eq!(
        refused(client.driver_grant_bucket_access(no_protocol).await).0,
        Code::InvalidArgument
    );
    let mut no_mode = grant_request("ba-8", vec![bucket("bc-1", Mode::ReadWrite)]);
    no_mode.buckets[0].access_mode = None;
    assert_eq!(
        refused(client.driver_grant_bucket_access(no_mode).await).0,
        Code::InvalidArgument
    );
    let no_buckets = grant_request("ba-8", vec![]);
    assert_eq!(
        refused(client.driver_grant_bucket_access(no_buckets).await).0,
        Code::InvalidArgument
    );
    let no_account = grant_request("", vec![bucket("bc-1", Mode::ReadWrite)]);
    assert_eq!(
        refused(client.driver_grant_bucket_access(no_account).await).0,
        Code::InvalidArgument
    );
    assert_eq!(
        memory.keys.lock().unwrap().len(),
        1,
        "only ba-7 holds a key"
    );

    // Revoked from the account id alone, and again.
    for _ in 0..2 {
        let revoke = DriverRevokeBucketAccessRequest {
            account_id: "ba-7".into(),
            protocol: s3(),
            authentication_type: key_auth(),
            buckets: vec![driver_revoke_bucket_access_request::AccessedBucket {
                bucket_id: "bc-1".into(),
            }],
            ..Default::default()
        };
        client.driver_revoke_bucket_access(revoke).await?;
        assert!(memory.keys.lock().unwrap().is_empty(), "ba-7's key is gone");
    }
    let empty = DriverRevokeBucketAccessRequest::default();
    assert_eq!(
        refused(client.driver_revoke_bucket_access(empty).await).0,
        Code::InvalidArgument
    );
    driver.stop().await
}

#[tokio::test]
async fn the_socket_replaces_a_stale_one_and_is_removed_at_shutdown() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let socket = dir.path().join("cosi.sock");
    // A socket left by an earlier run.
    drop(std::os::unix::net::UnixListener::bind(&socket)?);
    let driver = Driver::start(Memory::default(), dir.path()).await?;
    driver
        .identity()
        .driver_get_info(DriverGetInfoRequest {})
        .await?;
    driver.stop().await?;
    assert!(!socket.exists(), "the socket is removed at shutdown");
    assert_eq!(
        std::fs::read_dir(dir.path())?.count(),
        0,
        "nothing left beside it"
    );

    // Anything else at the path is left alone.
    std::fs::write(&socket, "not a socket")?;
    let driver = CosiDriver::new(Memory::default(), DRIVER_NAME, [Protocol::S3])?;
    let err = driver.serve(&socket).await.expect_err("refused");
    assert!(matches!(err, DriverError::NotASocket(_)), "{err}");
    assert_eq!(std::fs::read_to_string(&socket)?, "not a socket");
    Ok(())
}

#[test]
fn bad_names_and_protocol_lists_are_refused() {
    for name in ["S3.Example", "", "-cosi"] {
        let err = CosiDriver::new(Memory::default(), name, [Protocol::S3])
            .err()
            .expect("refused");
        assert!(matches!(err, DriverError::Name { .. }), "{err}");
    }
    let none: [Protocol; 0] = [];
    assert!(matches!(
        CosiDriver::new(Memory::default(), DRIVER_NAME, none),
        Err(DriverError::Protocols)
    ));
    assert!(matches!(
        CosiDriver::new(Memory::default(), DRIVER_NAME, [Protocol::S3, Protocol::S3]),
        Err(DriverError::Protocols)
    ));
}
