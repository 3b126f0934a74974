//! Bucket operations on an S3 store, with the ownership record and the
//! creation intent that make them safe to repeat and to interrupt.
//!
//! # Ownership record: a bucket tag, or a marker object
//!
//! On stores with bucket tagging (MinIO, RustFS, AWS, Ceph), a bucket
//! created for a claim carries the tag [`OWNER_TAG`] whose value is the
//! claim's UID, and intents are ConfigMaps in the provisioner's namespace
//! ([`crate::intents`]): nothing is written into the user's bucket and no
//! state bucket exists ([`Store::with_tag_ownership`], the StorageClass
//! default `ownership: tags`). A bucket marked by an older version (below)
//! still counts as marked.
//!
//! On stores without tagging (s3s-fs 0.14 implements neither
//! PutBucketTagging nor GetBucketTagging; `ownership: marker`), the bucket
//! holds an object [`OWNER_MARKER_KEY`] whose body is the claim's UID,
//! written with `If-None-Match: *`, so two claims racing for one bucket name
//! cannot both win, and read back before the bucket is used. The rest of
//! this section describes that mode; the tag mode follows the same rules
//! with the tag for the marker and a ConfigMap for the intent object.
//!
//! # Creation intent and the state bucket
//!
//! CreateBucket and the marker are two requests: a process that dies
//! between them leaves an empty bucket without a marker, which looks the
//! same as an empty bucket someone else made. So before CreateBucket the
//! provisioner records an *intent*: an object [`intent_key`]`(bucket)` in
//! its own state bucket ([`DEFAULT_STATE_BUCKET`], one per store, created on
//! first use and marked with [`STATE_BUCKET_MARKER`]), holding the claim's
//! UID. The intent is written only when the bucket does not exist, with
//! `If-None-Match: *`, and deleted once the marker is written (or when the
//! claim goes). An unmarked bucket with an intent for a claim was therefore
//! created for that claim; one without was not made by this provisioner for
//! it. A claim's annotations (the generated-name annotation included) never
//! count: the claim's owner can write them, and naming an empty bucket
//! someone else made would hand it over. An empty bucket left by a version
//! older than the intent is refused with a message that says to delete it.
//!
//! The rules are the pure functions [`provision_step`] and [`delete_step`];
//! [`Store::create_owned`] and [`Store::delete_owned`] gather what they need
//! from the store and carry their answer out. A bucket that holds any object
//! and no marker is never taken over, nor deleted, without an intent.

use std::sync::Arc;
use std::time::Duration;

use aws_sdk_s3::config::{
    BehaviorVersion, Region, RequestChecksumCalculation, ResponseChecksumValidation,
};
use aws_sdk_s3::types::{
    BucketLocationConstraint, CreateBucketConfiguration, Delete, ObjectIdentifier,
};
use lib_provisioner::{Credentials, ProvisionError};
use tracing::{debug, info, warn};

use crate::errors::StoreFailure;
use crate::intents::KubeIntents;
use crate::params::{DEFAULT_REGION, FORCE_DELETE, StoreEndpoint};

/// The bucket tag naming the claim (UID) a bucket was created for.
pub const OWNER_TAG: &str = "objectbucket.io/claim-uid";
/// The bucket tag naming the claim (`namespace/name`), for humans.
pub const CLAIM_TAG: &str = "objectbucket.io/claim";

/// Key of the object recording which claim a bucket was created for.
pub const OWNER_MARKER_KEY: &str = ".obc-owner";
/// User metadata on the marker and on intents naming the claim, for humans.
const OWNER_CLAIM_METADATA: &str = "obc-claim";
/// The state bucket used when none is configured (`--state-bucket`).
pub const DEFAULT_STATE_BUCKET: &str = "obc-provisioner-state";
/// The marker content of a state bucket. No claim UID looks like it, so no
/// claim ever owns, takes over or deletes a state bucket.
pub const STATE_BUCKET_MARKER: &str = "obc-provisioner-state-bucket";
/// Prefix of the intents in the state bucket.
pub const INTENT_PREFIX: &str = "intents/";
/// Keys per DeleteObjects call (the S3 maximum) and per listing page.
const PAGE: i32 = 1000;

/// The key, in the state bucket, of the intent to create `bucket`.
pub fn intent_key(bucket: &str) -> String {
    format!("{INTENT_PREFIX}{bucket}")
}

mod records;
mod rules;

use records::{Records, StateBucket};
pub use rules::*;

/// An S3 store reached with one set of credentials.
#[derive(Clone, Debug)]
pub struct Store {
    client: aws_sdk_s3::Client,
    region: String,
    state: Arc<StateBucket>,
    records: Records,
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

    /// Records ownership as the bucket tag [`OWNER_TAG`] and intents with
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

    /// Creates `bucket` for `owner`, or confirms that it already was.
    ///
    /// Errors: permanent when the bucket is not the claim's ([`Refusal`])
    /// or is the state bucket; retryable while another claim's creation of
    /// the same name is unfinished; otherwise as classified. Errors raised
    /// before CreateBucket, or by it, say that nothing was created
    /// ([`ProvisionError::nothing_created`]); later ones (the marker) do not.
    pub async fn create_owned(
        &self,
        bucket: &str,
        owner: &Owner<'_>,
    ) -> Result<Creation, ProvisionError> {
        if !self.uses_tags() {
            if bucket == self.state.name {
                return Err(reserved(bucket).with_nothing_created());
            }
            self.ensure_state_bucket().await?;
        }
        let mut found = self.find(bucket, true).await.map_err(into_error)?;
        let intent_ours = if found == Found::Absent {
            self.record_intent(bucket, owner).await?;
            match self.create_bucket(bucket).await {
                Ok(true) => {
                    let marked = self.mark(bucket, owner).await.map(|()| Creation::Created);
                    return self.settle_intent(bucket, marked, false).await;
                }
                // An earlier attempt's CreateBucket (or the SDK's retry of
                // this one) created it: decide below, with the intent.
                Ok(false) => found = self.find(bucket, false).await.map_err(into_error)?,
                Err(e) => {
                    return self
                        .settle_intent(bucket, Err(e.with_nothing_created()), false)
                        .await;
                }
            }
            true
        } else {
            self.intent(bucket)
                .await?
                .is_some_and(|r| r.claim_uid == owner.claim_uid)
        };
        let step = provision_step(&found, owner.claim_uid, intent_ours);
        let mut keep_intent = false;
        let result = match step {
            ProvisionStep::Create => Err(ProvisionError::retryable(format!(
                "CreateBucket reported that bucket {bucket:?} exists, then it did not; retrying"
            ))),
            ProvisionStep::Owned => {
                debug!(bucket, "bucket exists and carries this claim's marker");
                Ok(Creation::Existing)
            }
            ProvisionStep::TakeOver(basis) => {
                info!(
                    bucket,
                    claim = owner.claim,
                    "bucket exists, is empty and has no ownership marker, and {basis}: an earlier attempt was interrupted before the marker was written; marking it"
                );
                self.mark(bucket, owner)
                    .await
                    .map(|()| Creation::TakenOver(basis))
            }
            ProvisionStep::Refuse(refusal) => {
                keep_intent = refusal.keeps_intent();
                Err(refusal.into_error(bucket, owner))
            }
        };
        if intent_ours {
            self.settle_intent(bucket, result, keep_intent).await
        } else {
            result
        }
    }

    /// After provisioning with this claim's intent: deletes it once the
    /// outcome is final (success, or a permanent refusal that no later
    /// attempt can turn around), keeps it when a retry is to come.
    async fn settle_intent(
        &self,
        bucket: &str,
        result: Result<Creation, ProvisionError>,
        keep: bool,
    ) -> Result<Creation, ProvisionError> {
        match result {
            Ok(creation) => {
                // Failing here retries the provision, which finds the
                // bucket marked and deletes the intent again.
                self.delete_intent(bucket).await?;
                Ok(creation)
            }
            Err(e) if e.is_retryable() || keep => Err(e),
            Err(e) => {
                if let Err(failed) = self.delete_intent(bucket).await {
                    // The claim's next attempt or its deletion removes it.
                    warn!(
                        bucket,
                        "could not delete this claim's creation intent: {failed}"
                    );
                }
                Err(e)
            }
        }
    }

    /// Deletes `bucket` if it is `claim_uid`'s ([`delete_step`]); with
    /// `force`, deletes its objects first. Deletes the claim's creation
    /// intent, if any, last. `recorded` as for [`delete_step`].
    pub async fn delete_owned(
        &self,
        bucket: &str,
        claim_uid: &str,
        force: bool,
        recorded: bool,
    ) -> Result<Deletion, ProvisionError> {
        let found = self.find(bucket, false).await.map_err(into_error)?;
        let intent_ours = self
            .intent(bucket)
            .await?
            .is_some_and(|r| r.claim_uid == claim_uid);
        let deletion = match delete_step(&found, claim_uid, intent_ours, recorded) {
            DeleteStep::Gone => Deletion::AlreadyGone,
            DeleteStep::Denied => return Err(denied(bucket)),
            DeleteStep::Keep(kept) => Deletion::NotOurs(kept.to_string()),
            DeleteStep::Delete(basis) => {
                let objects = if force {
                    self.purge(bucket).await?
                } else {
                    let known_empty = found == (Found::Unmarked { empty: true });
                    if !known_empty
                        && !self
                            .is_empty(bucket)
                            .await
                            .map_err(StoreFailure::into_provision_error)?
                    {
                        return Err(not_empty(bucket));
                    }
                    0
                };
                self.delete_bucket(bucket, force).await?;
                if basis != Basis::Marker {
                    info!(
                        bucket,
                        "deleted a bucket without an ownership marker, left by an interrupted creation: {basis}"
                    );
                }
                Deletion::Deleted { objects }
            }
        };
        if intent_ours {
            self.delete_intent(bucket).await?;
        }
        Ok(deletion)
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

    /// The claim UID in the bucket's marker, if it has one.
    pub async fn owner(&self, bucket: &str) -> Result<Option<String>, StoreFailure> {
        Ok(self
            .read_record(bucket, OWNER_MARKER_KEY)
            .await?
            .map(|r| r.claim_uid))
    }

    /// The intent recorded in the state bucket for creating `bucket`, if
    /// any (none if there is no state bucket yet).
    pub async fn intent(&self, bucket: &str) -> Result<Option<Record>, ProvisionError> {
        if let Records::Tags(intents) = &self.records {
            return intents.get(bucket).await;
        }
        match self
            .read_record(&self.state.name, &intent_key(bucket))
            .await
        {
            Ok(record) => Ok(record),
            Err(f) if f.is_no_such_bucket() => Ok(None),
            Err(f) => Err(f.into_provision_error()),
        }
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
}

impl Store {
    /// CreateBucket in this store's region. `Ok(false)`: it exists already.
    async fn create_bucket(&self, bucket: &str) -> Result<bool, ProvisionError> {
        let mut create = self.client.create_bucket().bucket(bucket);
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
    /// Deletes every object but the marker, page by page.
    async fn purge(&self, bucket: &str) -> Result<u64, ProvisionError> {
        let mut deleted = 0u64;
        let mut token: Option<String> = None;
        loop {
            let page = self
                .client
                .list_objects_v2()
                .bucket(bucket)
                .max_keys(PAGE)
                .set_continuation_token(token.take())
                .send()
                .await
                .map_err(|e| {
                    StoreFailure::from_sdk("ListObjectsV2", bucket, &e).into_provision_error()
                })?;
            let keys: Vec<ObjectIdentifier> = page
                .contents()
                .iter()
                .filter_map(|o| o.key())
                .filter(|k| *k != OWNER_MARKER_KEY)
                .map(|k| ObjectIdentifier::builder().key(k).build())
                .collect::<Result<_, _>>()
                .map_err(|e| {
                    ProvisionError::permanent(format!(
                        "could not build a DeleteObjects request: {e}"
                    ))
                })?;
            if !keys.is_empty() {
                let count = keys.len() as u64;
                let delete = Delete::builder()
                    .set_objects(Some(keys))
                    .quiet(true)
                    .build()
                    .map_err(|e| {
                        ProvisionError::permanent(format!(
                            "could not build a DeleteObjects request: {e}"
                        ))
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
                if let Some(first) = out.errors().first() {
                    let code = first.code().unwrap_or("unknown");
                    let message = format!(
                        "S3 DeleteObjects on bucket {bucket:?} could not delete {} of {count} objects (first: {:?}: {code} {})",
                        out.errors().len(),
                        first.key().unwrap_or_default(),
                        first.message().unwrap_or_default()
                    );
                    return Err(if code == "AccessDenied" {
                        ProvisionError::permanent(format!(
                            "{message}; check that the admin credentials may delete objects"
                        ))
                    } else {
                        ProvisionError::retryable(message)
                    });
                }
                deleted += count;
            }
            match page.next_continuation_token() {
                Some(next) if page.is_truncated() == Some(true) => token = Some(next.to_owned()),
                _ => break,
            }
        }
        if deleted > 0 {
            info!(
                bucket,
                objects = deleted,
                "deleted the bucket's objects ({FORCE_DELETE})"
            );
        }
        Ok(deleted)
    }

    /// DeleteBucket, removing the marker first if the store insists on an
    /// empty bucket. The marker stays until the last moment, so that an
    /// interrupted deletion still knows whose bucket it is.
    async fn delete_bucket(&self, bucket: &str, force: bool) -> Result<(), ProvisionError> {
        let mut marker_removed = false;
        loop {
            let err = match self.client.delete_bucket().bucket(bucket).send().await {
                Ok(_) => return Ok(()),
                Err(e) => StoreFailure::from_sdk("DeleteBucket", bucket, &e),
            };
            if err.is_not_found() {
                return Ok(());
            }
            if err.code() != Some("BucketNotEmpty") {
                return Err(err.into_provision_error());
            }
            if !self
                .is_empty(bucket)
                .await
                .map_err(StoreFailure::into_provision_error)?
            {
                // Objects appeared after the emptiness check or the purge.
                return Err(if force {
                    ProvisionError::retryable(format!(
                        "objects were written to bucket {bucket:?} while it was being deleted; retrying"
                    ))
                } else {
                    not_empty(bucket)
                });
            }
            if marker_removed {
                warn!(
                    bucket,
                    "bucket still is not empty after its objects and marker were deleted (object versions?)"
                );
                return Err(ProvisionError::permanent(format!(
                    "bucket {bucket:?} still holds data that ListObjectsV2 does not show (object versions or delete markers of a versioned bucket): delete them; the deletion then resumes"
                )));
            }
            self.client
                .delete_object()
                .bucket(bucket)
                .key(OWNER_MARKER_KEY)
                .send()
                .await
                .map_err(|e| {
                    StoreFailure::from_sdk("DeleteObject", bucket, &e).into_provision_error()
                })?;
            marker_removed = true;
        }
    }
}

fn into_error(f: StoreFailure) -> ProvisionError {
    f.into_provision_error()
}
