//! [`S3Probe`]: the kit's view of an S3 store (s3s-fs, RustFS), with the
//! store's root credentials, never the provisioner's code.

use std::collections::BTreeSet;

use async_trait::async_trait;
use aws_sdk_s3::config::http::HttpResponse;
use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_s3::primitives::ByteStream;
use lib_provisioner::BucketAccess;
use lib_provisioner::conformance::{Answer, Op, ProbeError, StoreProbe};
use obc_tests::testenv::s3_client_for;

/// Probes the store at `endpoint` with its root key.
#[derive(Clone)]
pub struct S3Probe {
    endpoint: String,
    root: aws_sdk_s3::Client,
    /// The provisioner's own bucket (its state bucket), left out of listings.
    own: String,
}

impl S3Probe {
    pub fn new(endpoint: &str, key: &str, secret: &str, own: &str) -> Self {
        Self {
            endpoint: endpoint.to_owned(),
            root: s3_client_for(endpoint, key, secret),
            own: own.to_owned(),
        }
    }
}

/// The error's S3 code and HTTP status.
fn code<E: ProvideErrorMetadata>(e: &SdkError<E, HttpResponse>) -> (String, u16) {
    let status = e.raw_response().map(|r| r.status().as_u16()).unwrap_or(0);
    (e.code().unwrap_or("no code").to_owned(), status)
}

fn failed<E: std::fmt::Debug>(what: &str, e: E) -> ProbeError {
    ProbeError::new(format!("{what}: {e:?}"))
}

/// Allowed, denied (403: refused credentials) or a probe error.
fn answer<T, E>(
    what: &str,
    result: Result<T, SdkError<E, HttpResponse>>,
    also_allowed: &[&str],
) -> Result<Answer, ProbeError>
where
    E: ProvideErrorMetadata + std::fmt::Debug,
{
    match result {
        Ok(_) => Ok(Answer::Allowed),
        Err(e) => {
            let (code, status) = code(&e);
            if also_allowed.contains(&code.as_str()) {
                Ok(Answer::Allowed)
            } else if status == 403 {
                Ok(Answer::Denied(code))
            } else {
                Err(failed(what, e))
            }
        }
    }
}

#[async_trait]
impl StoreProbe for S3Probe {
    async fn bucket_exists(&self, bucket: &str) -> Result<bool, ProbeError> {
        match self.root.head_bucket().bucket(bucket).send().await {
            Ok(_) => Ok(true),
            Err(e) if code(&e).1 == 404 => Ok(false),
            Err(e) => Err(failed("HeadBucket", e)),
        }
    }

    async fn list_buckets(&self) -> Result<BTreeSet<String>, ProbeError> {
        let out = self
            .root
            .list_buckets()
            .send()
            .await
            .map_err(|e| failed("ListBuckets", e))?;
        Ok(out
            .buckets()
            .iter()
            .filter_map(|b| b.name().map(str::to_owned))
            .filter(|b| *b != self.own)
            .collect())
    }

    async fn create_foreign_bucket(&self, bucket: &str) -> Result<(), ProbeError> {
        self.root
            .create_bucket()
            .bucket(bucket)
            .send()
            .await
            .map_err(|e| failed("CreateBucket", e))?;
        self.root
            .put_object()
            .bucket(bucket)
            .key("owners-data.txt")
            .body(ByteStream::from_static(b"not the provisioner's"))
            .send()
            .await
            .map_err(|e| failed("PutObject", e))?;
        Ok(())
    }

    async fn remove_bucket(&self, bucket: &str) -> Result<(), ProbeError> {
        let listed = match self.root.list_objects_v2().bucket(bucket).send().await {
            Ok(l) => l,
            Err(e) if code(&e).1 == 404 => return Ok(()),
            Err(e) => return Err(failed("ListObjectsV2", e)),
        };
        for key in listed.contents().iter().filter_map(|o| o.key()) {
            self.root
                .delete_object()
                .bucket(bucket)
                .key(key)
                .send()
                .await
                .map_err(|e| failed("DeleteObject", e))?;
        }
        match self.root.delete_bucket().bucket(bucket).send().await {
            Ok(_) => Ok(()),
            Err(e) if code(&e).1 == 404 => Ok(()),
            Err(e) => Err(failed("DeleteBucket", e)),
        }
    }

    async fn try_access(
        &self,
        access: &BucketAccess,
        bucket: &str,
        op: Op,
    ) -> Result<Answer, ProbeError> {
        let c = &access.credentials;
        let client = s3_client_for(&self.endpoint, &c.access_key_id, &c.secret_access_key);
        match op {
            Op::Read => {
                let got = client
                    .get_object()
                    .bucket(bucket)
                    .key("kit-probe-absent")
                    .send()
                    .await;
                answer("GetObject", got, &["NoSuchKey"])
            }
            Op::List => answer(
                "ListObjectsV2",
                client.list_objects_v2().bucket(bucket).send().await,
                &[],
            ),
            Op::Write => {
                let key = "kit-probe-write";
                let put = client
                    .put_object()
                    .bucket(bucket)
                    .key(key)
                    .body(ByteStream::from_static(b"probe"))
                    .send()
                    .await;
                let answer = answer("PutObject", put, &[])?;
                if answer == Answer::Allowed {
                    // As it was: an empty bucket stays empty for a delete.
                    self.root
                        .delete_object()
                        .bucket(bucket)
                        .key(key)
                        .send()
                        .await
                        .map_err(|e| failed("DeleteObject", e))?;
                }
                Ok(answer)
            }
        }
    }
}
