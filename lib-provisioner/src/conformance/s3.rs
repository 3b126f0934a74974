//! [`S3Probe`]: a ready [`StoreProbe`] for S3 stores (feature
//! `conformance-s3`). It asks the store itself, with real S3 requests and
//! the store's administrator credentials, never the provisioner's records:
//! a provisioner whose delete or revoke never reaches the store fails.
//!
//! Claims' credentials are tried at the endpoint the provisioner returned
//! (`BucketAccess::endpoint`, with the administrator endpoint's scheme):
//! an endpoint that does not reach the store fails the scenario.
//!
//! A bucket's settings are read with GetBucketVersioning,
//! GetBucketLifecycleConfiguration, GetBucketPolicy and
//! GetObjectLockConfiguration; a store answering one of them
//! `NotImplemented` has that setting reported unreadable.
//!
//! What S3 cannot say (users, keys and policies; a bucket's quota) comes
//! from an optional [`PrincipalLister`] and [`ConfigReader`]: without them
//! the report says "not verified".

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use async_trait::async_trait;
use aws_sdk_s3::config::http::HttpResponse;
use aws_sdk_s3::config::{
    BehaviorVersion, Region, RequestChecksumCalculation, ResponseChecksumValidation,
    SharedHttpClient,
};
use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart};

use super::{Answer, BucketSetting, Op, ProbeError, StoreProbe, StoreSettings};
use crate::core::provisioner::{BucketAccess, Credentials, Made};

/// Lists the principals and policies of the store (an admin API's users
/// and policies), for [`StoreProbe::inventory`].
#[async_trait]
pub trait PrincipalLister: Send + Sync + 'static {
    /// Everything that holds credentials or decides what they reach.
    async fn list(&self) -> Result<Vec<Made>, ProbeError>;
}

/// Reads a bucket's configuration back from the store, for
/// [`StoreProbe::config_applied`].
#[async_trait]
pub trait ConfigReader: Send + Sync + 'static {
    /// Whether `config` is applied to `bucket`; `None`: cannot tell.
    async fn applied(
        &self,
        bucket: &str,
        config: &BTreeMap<String, String>,
    ) -> Result<Option<bool>, ProbeError>;
}

/// The kit's probe for an S3 store.
///
/// ```no_run
/// # fn demo(http: aws_sdk_s3::config::SharedHttpClient) {
/// use lib_provisioner::Credentials;
/// use lib_provisioner::conformance::S3Probe;
/// let probe = S3Probe::new("http://127.0.0.1:9000", Credentials::new("root", "secret"), http)
///     .ignore_bucket("provisioner-state");
/// # }
/// ```
#[derive(Clone)]
pub struct S3Probe {
    endpoint: String,
    region: String,
    http: SharedHttpClient,
    admin: aws_sdk_s3::Client,
    ignored: BTreeSet<String>,
    lister: Option<Arc<dyn PrincipalLister>>,
    config: Option<Arc<dyn ConfigReader>>,
}

/// The object the probe writes to try a write, and removes again.
const PROBE_KEY: &str = "kit-probe-object";
/// The object [`S3Probe::put_data`] writes: the claim's data.
const DATA_KEY: &str = "kit-claims-data.txt";

impl S3Probe {
    /// A probe of the store at `endpoint` (`http://host:port`), with its
    /// administrator's `admin` credentials, sending through `http` (the
    /// HTTP client, and so the TLS stack, your provisioner uses: this
    /// crate chooses none).
    pub fn new(endpoint: &str, admin: Credentials, http: SharedHttpClient) -> Self {
        let region = "us-east-1".to_owned();
        let admin = client(&http, endpoint, &region, &admin);
        Self {
            endpoint: endpoint.trim_end_matches('/').to_owned(),
            region,
            http,
            admin,
            ignored: BTreeSet::new(),
            lister: None,
            config: None,
        }
    }

    /// Leaves `bucket` out of listings (the provisioner's own state bucket).
    pub fn ignore_bucket(mut self, bucket: impl Into<String>) -> Self {
        self.ignored.insert(bucket.into());
        self
    }

    /// Lists principals and policies through `lister`: the kit then checks
    /// that nothing the provisioner made outlives its claim.
    pub fn with_lister(mut self, lister: impl PrincipalLister) -> Self {
        self.lister = Some(Arc::new(lister));
        self
    }

    /// Reads bucket configuration back through `reader`: the kit then
    /// checks that an update took effect.
    pub fn with_config_reader(mut self, reader: impl ConfigReader) -> Self {
        self.config = Some(Arc::new(reader));
        self
    }

    /// The client for `access`, at the endpoint the provisioner returned.
    fn claim_client(&self, access: &BucketAccess) -> Result<aws_sdk_s3::Client, ProbeError> {
        let e = &access.endpoint;
        if e.bucket_host.is_empty() {
            return Err(ProbeError::new(
                "the provisioner returned no endpoint host: the claim's applications could not reach the store",
            ));
        }
        let scheme = self.endpoint.split("://").next().unwrap_or("http");
        let url = if e.bucket_port > 0 {
            format!("{scheme}://{}:{}", e.bucket_host, e.bucket_port)
        } else {
            format!("{scheme}://{}", e.bucket_host)
        };
        let region = if e.region.is_empty() {
            &self.region
        } else {
            &e.region
        };
        Ok(client(&self.http, &url, region, &access.credentials))
    }
}

fn client(
    http: &SharedHttpClient,
    endpoint: &str,
    region: &str,
    c: &Credentials,
) -> aws_sdk_s3::Client {
    let credentials = aws_credential_types::Credentials::new(
        &c.access_key_id,
        &c.secret_access_key,
        None,
        None,
        "conformance-kit",
    );
    let config = aws_sdk_s3::config::Builder::new()
        .http_client(http.clone())
        .behavior_version(BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(Region::new(region.to_owned()))
        .credentials_provider(credentials)
        .force_path_style(true)
        .request_checksum_calculation(RequestChecksumCalculation::WhenRequired)
        .response_checksum_validation(ResponseChecksumValidation::WhenRequired)
        .build();
    aws_sdk_s3::Client::from_conf(config)
}

/// The error's S3 code and HTTP status.
fn code<E: ProvideErrorMetadata>(e: &SdkError<E, HttpResponse>) -> (String, u16) {
    let status = e.raw_response().map(|r| r.status().as_u16()).unwrap_or(0);
    (e.code().unwrap_or("no code").to_owned(), status)
}

fn failed<E: std::fmt::Debug>(what: &str, e: E) -> ProbeError {
    ProbeError::new(format!("{what}: {e:?}"))
}

/// How a probe error starts when the store asked to be asked again (503:
/// busy, a quota check not ready): [`S3Probe::try_access`] retries it.
const BUSY: &str = "store busy (503), ";

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
            } else if status == 503 {
                Err(ProbeError::new(format!("{BUSY}{what}: {code}")))
            } else {
                Err(failed(what, e))
            }
        }
    }
}

impl S3Probe {
    /// Writes the probe's object with `c`, and removes it as the
    /// administrator if it was allowed.
    async fn write(&self, c: &aws_sdk_s3::Client, bucket: &str) -> Result<Answer, ProbeError> {
        let put = c
            .put_object()
            .bucket(bucket)
            .key(PROBE_KEY)
            .body(ByteStream::from_static(b"probe"))
            .send()
            .await;
        let answer = answer("PutObject", put, &[])?;
        if answer == Answer::Allowed {
            self.remove_object(bucket, PROBE_KEY).await?;
        }
        Ok(answer)
    }

    /// A whole multipart upload with `c` (create, one part, complete);
    /// the object removed as the administrator.
    async fn multipart(&self, c: &aws_sdk_s3::Client, bucket: &str) -> Result<Answer, ProbeError> {
        let created = c
            .create_multipart_upload()
            .bucket(bucket)
            .key(PROBE_KEY)
            .send()
            .await;
        let upload = match created {
            Ok(out) => out.upload_id().unwrap_or_default().to_owned(),
            Err(e) => return answer("CreateMultipartUpload", Err::<(), _>(e), &[]),
        };
        let part = c
            .upload_part()
            .bucket(bucket)
            .key(PROBE_KEY)
            .upload_id(&upload)
            .part_number(1)
            .body(ByteStream::from_static(b"probe"))
            .send()
            .await;
        let etag = match part {
            Ok(out) => out.e_tag().unwrap_or_default().to_owned(),
            Err(e) => {
                self.abort(bucket, &upload).await;
                return answer("UploadPart", Err::<(), _>(e), &[]);
            }
        };
        let done = CompletedMultipartUpload::builder()
            .parts(CompletedPart::builder().part_number(1).e_tag(etag).build())
            .build();
        let completed = c
            .complete_multipart_upload()
            .bucket(bucket)
            .key(PROBE_KEY)
            .upload_id(&upload)
            .multipart_upload(done)
            .send()
            .await;
        if completed.is_err() {
            self.abort(bucket, &upload).await;
        }
        let answer = answer("CompleteMultipartUpload", completed, &[])?;
        if answer == Answer::Allowed {
            self.remove_object(bucket, PROBE_KEY).await?;
        }
        Ok(answer)
    }

    /// Aborts an upload as the administrator, best effort (the bucket's
    /// removal takes what is left).
    async fn abort(&self, bucket: &str, upload: &str) {
        let _ = self
            .admin
            .abort_multipart_upload()
            .bucket(bucket)
            .key(PROBE_KEY)
            .upload_id(upload)
            .send()
            .await;
    }

    async fn remove_object(&self, bucket: &str, key: &str) -> Result<(), ProbeError> {
        self.admin
            .delete_object()
            .bucket(bucket)
            .key(key)
            .send()
            .await
            .map(|_| ())
            .map_err(|e| failed("DeleteObject", e))
    }

    /// The keys in `bucket`; `None` if it does not exist.
    async fn keys(&self, bucket: &str) -> Result<Option<Vec<String>>, ProbeError> {
        match self.admin.list_objects_v2().bucket(bucket).send().await {
            Ok(l) => Ok(Some(
                l.contents()
                    .iter()
                    .filter_map(|o| o.key().map(str::to_owned))
                    .collect(),
            )),
            Err(e) if code(&e).1 == 404 => Ok(None),
            Err(e) => Err(failed("ListObjectsV2", e)),
        }
    }
}

/// What the store answered to reading one setting of a bucket.
enum Held<T> {
    /// The setting, as the store returned it.
    Answer(T),
    /// The store says the bucket has none of it.
    Nothing,
    /// The store does not implement reading it.
    Unreadable,
}

/// `result` as a [`Held`]: the error codes in `nothing` mean the bucket
/// has none of the setting; `NotImplemented` (or HTTP 501) that the store
/// cannot read it.
fn held<T, E>(
    what: &str,
    result: Result<T, SdkError<E, HttpResponse>>,
    nothing: &[&str],
) -> Result<Held<T>, ProbeError>
where
    E: ProvideErrorMetadata + std::fmt::Debug,
{
    match result {
        Ok(out) => Ok(Held::Answer(out)),
        Err(e) => {
            let (code, status) = code(&e);
            if nothing.contains(&code.as_str()) {
                Ok(Held::Nothing)
            } else if code == "NotImplemented" || status == 501 {
                Ok(Held::Unreadable)
            } else {
                Err(failed(what, e))
            }
        }
    }
}

impl S3Probe {
    /// Reads `bucket`'s settings as the administrator.
    async fn settings(&self, bucket: &str) -> Result<StoreSettings, ProbeError> {
        let mut s = StoreSettings::default();
        let versioning = self
            .admin
            .get_bucket_versioning()
            .bucket(bucket)
            .send()
            .await;
        match held("GetBucketVersioning", versioning, &[])? {
            // A bucket never versioned answers without a status (some
            // stores: an empty one).
            Held::Answer(out) => {
                s.versioning = out
                    .status()
                    .map(|v| v.as_str().to_owned())
                    .filter(|v| !v.is_empty());
            }
            Held::Nothing => {}
            Held::Unreadable => {
                s.unreadable.insert(BucketSetting::Versioning);
            }
        }
        let lifecycle = self
            .admin
            .get_bucket_lifecycle_configuration()
            .bucket(bucket)
            .send()
            .await;
        match held(
            "GetBucketLifecycleConfiguration",
            lifecycle,
            &["NoSuchLifecycleConfiguration"],
        )? {
            Held::Answer(out) => {
                s.lifecycle_rules = out
                    .rules()
                    .iter()
                    .map(|r| r.id().unwrap_or_default().to_owned())
                    .collect();
            }
            Held::Nothing => {}
            Held::Unreadable => {
                s.unreadable.insert(BucketSetting::LifecycleRules);
            }
        }
        let policy = self.admin.get_bucket_policy().bucket(bucket).send().await;
        match held("GetBucketPolicy", policy, &["NoSuchBucketPolicy"])? {
            // An empty document is no policy (a store's answer after a
            // DeleteBucketPolicy).
            Held::Answer(out) => {
                s.policy = out
                    .policy()
                    .filter(|p| !p.trim().is_empty())
                    .map(str::to_owned);
            }
            Held::Nothing => {}
            Held::Unreadable => {
                s.unreadable.insert(BucketSetting::Policy);
            }
        }
        let lock = self
            .admin
            .get_object_lock_configuration()
            .bucket(bucket)
            .send()
            .await;
        // The second code is what some MinIO-compatible stores answer.
        let none = [
            "ObjectLockConfigurationNotFoundError",
            "ObjectLockConfigurationNotFound",
        ];
        match held("GetObjectLockConfiguration", lock, &none)? {
            Held::Answer(out) => {
                let retention = out
                    .object_lock_configuration()
                    .and_then(|c| c.rule())
                    .and_then(|r| r.default_retention());
                s.object_lock = retention.and_then(|r| {
                    let mode = r.mode()?.as_str().to_owned();
                    Some((mode, r.days()?))
                });
            }
            Held::Nothing => {}
            Held::Unreadable => {
                s.unreadable.insert(BucketSetting::ObjectLock);
            }
        }
        Ok(s)
    }
}

impl S3Probe {
    /// One try of `op` on `bucket` with the claim's client `c`.
    async fn try_once(
        &self,
        c: &aws_sdk_s3::Client,
        bucket: &str,
        op: Op,
    ) -> Result<Answer, ProbeError> {
        match op {
            Op::Read => {
                let got = c
                    .get_object()
                    .bucket(bucket)
                    .key("kit-probe-absent")
                    .send()
                    .await;
                answer("GetObject", got, &["NoSuchKey"])
            }
            Op::List => answer(
                "ListObjectsV2",
                c.list_objects_v2().bucket(bucket).send().await,
                &[],
            ),
            Op::Write => self.write(c, bucket).await,
            Op::Delete => answer(
                "DeleteObject",
                c.delete_object()
                    .bucket(bucket)
                    .key("kit-probe-absent")
                    .send()
                    .await,
                &["NoSuchKey"],
            ),
            Op::Multipart => self.multipart(c, bucket).await,
        }
    }
}

#[async_trait]
impl StoreProbe for S3Probe {
    fn name(&self) -> String {
        format!(
            "S3Probe at {} (S3 requests as the store's administrator{})",
            self.endpoint,
            if self.lister.is_some() {
                ", principals listed by the store's admin API"
            } else {
                ""
            }
        )
    }

    async fn bucket_exists(&self, bucket: &str) -> Result<bool, ProbeError> {
        match self.admin.head_bucket().bucket(bucket).send().await {
            Ok(_) => Ok(true),
            Err(e) if code(&e).1 == 404 => Ok(false),
            Err(e) => Err(failed("HeadBucket", e)),
        }
    }

    async fn list_buckets(&self) -> Result<BTreeSet<String>, ProbeError> {
        let out = self
            .admin
            .list_buckets()
            .send()
            .await
            .map_err(|e| failed("ListBuckets", e))?;
        Ok(out
            .buckets()
            .iter()
            .filter_map(|b| b.name().map(str::to_owned))
            .filter(|b| !self.ignored.contains(b))
            .collect())
    }

    async fn create_foreign_bucket(&self, bucket: &str) -> Result<(), ProbeError> {
        self.admin
            .create_bucket()
            .bucket(bucket)
            .send()
            .await
            .map_err(|e| failed("CreateBucket", e))?;
        self.admin
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
        let Some(keys) = self.keys(bucket).await? else {
            return Ok(());
        };
        for key in keys {
            self.remove_object(bucket, &key).await?;
        }
        match self.admin.delete_bucket().bucket(bucket).send().await {
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
        let c = self.claim_client(access)?;
        let mut attempts = 0;
        loop {
            match self.try_once(&c, bucket, op).await {
                Err(e) if e.to_string().starts_with(BUSY) && attempts < 40 => {
                    attempts += 1;
                    tokio::time::sleep(std::time::Duration::from_millis(250)).await;
                }
                other => return other,
            }
        }
    }

    async fn inventory(&self) -> Result<Option<Vec<Made>>, ProbeError> {
        match &self.lister {
            Some(lister) => lister.list().await.map(Some),
            None => Ok(None),
        }
    }

    async fn put_data(&self, bucket: &str) -> Result<bool, ProbeError> {
        self.admin
            .put_object()
            .bucket(bucket)
            .key(DATA_KEY)
            .body(ByteStream::from_static(b"the claim's data"))
            .send()
            .await
            .map_err(|e| failed("PutObject", e))?;
        Ok(true)
    }

    async fn holds_data(&self, bucket: &str) -> Result<Option<bool>, ProbeError> {
        Ok(Some(
            self.keys(bucket)
                .await?
                .is_some_and(|keys| keys.iter().any(|k| k == DATA_KEY)),
        ))
    }

    async fn config_applied(
        &self,
        bucket: &str,
        config: &BTreeMap<String, String>,
    ) -> Result<Option<bool>, ProbeError> {
        match &self.config {
            Some(reader) => reader.applied(bucket, config).await,
            None => Ok(None),
        }
    }

    async fn bucket_settings(&self, bucket: &str) -> Result<Option<StoreSettings>, ProbeError> {
        self.settings(bucket).await.map(Some)
    }
}
