//! [`Store`]: one S3 store reached with one set of credentials, where it
//! keeps its ownership records, and the bucket requests that need no
//! record. The records are read and written in `records.rs`, the claims'
//! buckets created and deleted in `owned.rs`, both on this type.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use aws_sdk_s3::config::{
    BehaviorVersion, Region, RequestChecksumCalculation, ResponseChecksumValidation,
};
use aws_sdk_s3::types::{
    BucketLocationConstraint, CreateBucketConfiguration, Delete, ObjectIdentifier,
};
use lib_provisioner::{Credentials, ProvisionError};

use crate::errors::StoreFailure;
use crate::intents::KubeIntents;
use crate::ownership::OWNER_MARKER_KEY;
use crate::params::{DEFAULT_REGION, StoreEndpoint};

/// The state bucket used when none is configured (`--state-bucket`).
pub const DEFAULT_STATE_BUCKET: &str = "obc-provisioner-state";

/// An S3 store reached with one set of credentials.
#[derive(Clone, Debug)]
pub struct Store {
    pub(super) client: aws_sdk_s3::Client,
    region: String,
    pub(super) state: Arc<StateBucket>,
    pub(super) records: Records,
}

/// The state bucket of one store, checked once per [`Store`].
#[derive(Debug)]
pub(super) struct StateBucket {
    pub(super) name: String,
    /// Whether it exists and is marked as one (then not checked again).
    pub(super) ready: AtomicBool,
    pub(super) checking: tokio::sync::Mutex<()>,
}

impl StateBucket {
    pub(super) fn new(name: &str) -> Arc<Self> {
        Arc::new(Self {
            name: name.to_owned(),
            ready: AtomicBool::new(false),
            checking: tokio::sync::Mutex::new(()),
        })
    }
}

/// Where a store records ownership and creation intents.
#[derive(Clone, Debug)]
pub(super) enum Records {
    /// A marker object in the bucket, intents in the state bucket.
    Marker,
    /// A bucket tag, intents as ConfigMaps.
    Tags(Box<KubeIntents>),
}

impl Store {
    /// A client for `endpoint`: path-style addressing, static credentials,
    /// checksums only where S3 requires them (for non-AWS stores). Its
    /// state bucket is [`DEFAULT_STATE_BUCKET`] (see
    /// [`with_state_bucket`](Self::with_state_bucket)); buckets are created
    /// in `region`.
    pub fn new(endpoint: &StoreEndpoint, region: &str, credentials: &Credentials) -> Self {
        let credentials = aws_credential_types::Credentials::new(
            &credentials.access_key_id,
            &credentials.secret_access_key,
            None,
            None,
            "storageclass-admin-secret",
        );
        let timeouts = aws_sdk_s3::config::timeout::TimeoutConfig::builder()
            .connect_timeout(Duration::from_secs(10))
            .operation_attempt_timeout(Duration::from_secs(60))
            .build();
        let config = aws_sdk_s3::config::Builder::new()
            .http_client(crate::http::s3_http_client())
            .behavior_version(BehaviorVersion::latest())
            .endpoint_url(&endpoint.url)
            .region(Region::new(region.to_owned()))
            .credentials_provider(credentials)
            .force_path_style(true)
            .request_checksum_calculation(RequestChecksumCalculation::WhenRequired)
            .response_checksum_validation(ResponseChecksumValidation::WhenRequired)
            .timeout_config(timeouts)
            .build();
        Self {
            client: aws_sdk_s3::Client::from_conf(config),
            region: region.to_owned(),
            state: StateBucket::new(DEFAULT_STATE_BUCKET),
            records: Records::Marker,
        }
    }

    /// Records ownership as the bucket tag
    /// [`OWNER_TAG`](crate::ownership::OWNER_TAG) and intents with
    /// `intents`: no marker object and no state bucket.
    pub fn with_tag_ownership(mut self, intents: KubeIntents) -> Self {
        self.records = Records::Tags(Box::new(intents));
        self
    }

    /// Whether ownership is recorded in bucket tags.
    pub fn uses_tags(&self) -> bool {
        matches!(self.records, Records::Tags(_))
    }

    /// Keeps this store's intents in bucket `name` (created on first use).
    pub fn with_state_bucket(mut self, name: &str) -> Self {
        self.state = StateBucket::new(name);
        self
    }

    /// The name of this store's state bucket.
    pub fn state_bucket(&self) -> &str {
        &self.state.name
    }

    /// Whether `bucket` exists (HeadBucket).
    pub async fn exists(&self, bucket: &str) -> Result<bool, StoreFailure> {
        match self.client.head_bucket().bucket(bucket).send().await {
            Ok(_) => Ok(true),
            Err(e) => {
                let f = StoreFailure::from_sdk("HeadBucket", bucket, &e);
                if f.is_not_found() { Ok(false) } else { Err(f) }
            }
        }
    }

    /// The names of every bucket the store's credentials can see
    /// (ListBuckets).
    pub async fn bucket_names(&self) -> Result<Vec<String>, StoreFailure> {
        let out = self
            .client
            .list_buckets()
            .send()
            .await
            .map_err(|e| StoreFailure::from_sdk("ListBuckets", "", &e))?;
        Ok(out
            .buckets()
            .iter()
            .filter_map(|b| b.name().map(str::to_owned))
            .collect())
    }

    /// Whether the bucket holds no object other than the marker.
    pub async fn is_empty(&self, bucket: &str) -> Result<bool, StoreFailure> {
        let page = self
            .client
            .list_objects_v2()
            .bucket(bucket)
            .max_keys(2)
            .send()
            .await
            .map_err(|e| StoreFailure::from_sdk("ListObjectsV2", bucket, &e))?;
        Ok(page
            .contents()
            .iter()
            .all(|o| o.key() == Some(OWNER_MARKER_KEY)))
    }

    /// CreateBucket in this store's region, with object lock enabled if
    /// asked (which only creation can do). `Ok(false)`: it exists already.
    pub(super) async fn create_bucket(
        &self,
        bucket: &str,
        object_lock: bool,
    ) -> Result<bool, ProvisionError> {
        let mut create = self.client.create_bucket().bucket(bucket);
        if object_lock {
            create = create.object_lock_enabled_for_bucket(true);
        }
        if self.region != DEFAULT_REGION {
            create = create.create_bucket_configuration(
                CreateBucketConfiguration::builder()
                    .location_constraint(BucketLocationConstraint::from(self.region.as_str()))
                    .build(),
            );
        }
        match create.send().await {
            Ok(_) => Ok(true),
            Err(e) => {
                let f = StoreFailure::from_sdk("CreateBucket", bucket, &e);
                // BucketAlreadyOwnedByYou: ours (the marker says for whom).
                // BucketAlreadyExists: another account's on AWS; s3s-fs and
                // some other stores answer it for their own buckets too.
                if matches!(
                    f.code(),
                    Some("BucketAlreadyOwnedByYou" | "BucketAlreadyExists")
                ) {
                    Ok(false)
                } else {
                    Err(f.into_provision_error())
                }
            }
        }
    }

    /// One quiet DeleteObjects of `ids` (objects, or versions with their
    /// ids); `Ok(None)` when every one went, else the first that did not
    /// and how many did not, for the caller to word.
    pub(super) async fn delete_batch(
        &self,
        bucket: &str,
        ids: Vec<ObjectIdentifier>,
    ) -> Result<Option<Undeleted>, ProvisionError> {
        let delete = Delete::builder()
            .set_objects(Some(ids))
            .quiet(true)
            .build()
            .map_err(|e| {
                ProvisionError::permanent(format!("could not build a DeleteObjects request: {e}"))
            })?;
        let out = self
            .client
            .delete_objects()
            .bucket(bucket)
            .delete(delete)
            .send()
            .await
            .map_err(|e| {
                StoreFailure::from_sdk("DeleteObjects", bucket, &e).into_provision_error()
            })?;
        Ok(out.errors().first().map(|first| Undeleted {
            count: out.errors().len(),
            key: first.key().unwrap_or_default().to_owned(),
            version: first.version_id().unwrap_or_default().to_owned(),
            code: first.code().unwrap_or("unknown").to_owned(),
            message: first.message().unwrap_or_default().to_owned(),
        }))
    }
}

/// What [`Store::delete_batch`] could not delete: how many, and the first.
pub(super) struct Undeleted {
    pub(super) count: usize,
    pub(super) key: String,
    pub(super) version: String,
    pub(super) code: String,
    pub(super) message: String,
}
