//! Bucket operations on an S3 store, with the ownership marker that makes
//! them safe to repeat.
//!
//! # Ownership marker
//!
//! A bucket created for a claim holds an object [`OWNER_MARKER_KEY`] whose
//! body is the claim's UID. Bucket tagging would be tidier, but the test
//! store (s3s-fs 0.14) implements neither PutBucketTagging nor
//! GetBucketTagging, and an object works on every S3 store. The marker is
//! written with `If-None-Match: *`, so two claims racing for one bucket name
//! cannot both win, and is read back before the bucket is used.
//!
//! The marker is written right after CreateBucket and before any credential
//! is handed out, so a bucket that exists, is empty and has no marker is
//! either left from an interrupted attempt, or an empty bucket someone made
//! with that name. [`Store::create_owned`] reports it as
//! [`Creation::Unclaimed`] and the caller decides (see
//! [`S3Provisioner`](crate::s3::S3Provisioner)). A bucket that holds any
//! other object and no marker is never taken over, nor deleted.

use std::time::Duration;

use aws_sdk_s3::config::{
    BehaviorVersion, Region, RequestChecksumCalculation, ResponseChecksumValidation,
};
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{
    BucketLocationConstraint, CreateBucketConfiguration, Delete, ObjectIdentifier,
};
use lib_provisioner::{Credentials, ProvisionError};
use tracing::{debug, info, warn};

use crate::errors::StoreFailure;
use crate::params::{DEFAULT_REGION, FORCE_DELETE, StoreEndpoint};

/// Key of the object recording which claim a bucket was created for.
pub const OWNER_MARKER_KEY: &str = ".obc-owner";
/// User metadata on the marker naming the claim, for humans.
const OWNER_CLAIM_METADATA: &str = "obc-claim";
/// Keys per DeleteObjects call (the S3 maximum) and per listing page.
const PAGE: i32 = 1000;

/// Who a bucket is (to be) owned by.
#[derive(Clone, Copy, Debug)]
pub struct Owner<'a> {
    /// The claim's UID: the marker's content.
    pub claim_uid: &'a str,
    /// `namespace/name` of the claim, stored as metadata for humans.
    pub claim: &'a str,
}

/// What [`Store::create_owned`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Creation {
    /// The bucket exists and carries the owner's marker.
    Owned,
    /// The bucket existed already, is empty and carries no marker: left
    /// from an interrupted attempt, or made by someone else.
    Unclaimed,
}

/// What a deletion did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Deletion {
    /// The bucket was deleted, with this many objects (forceDelete).
    Deleted {
        /// Objects deleted before the bucket.
        objects: u64,
    },
    /// There was no bucket.
    AlreadyGone,
    /// The bucket was not created for this claim and was kept.
    NotOurs(String),
}

/// An S3 store reached with one set of credentials.
#[derive(Clone, Debug)]
pub struct Store {
    client: aws_sdk_s3::Client,
}

impl Store {
    /// A client for `endpoint`: path-style addressing, static credentials,
    /// checksums only where S3 requires them (for non-AWS stores).
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
        }
    }

    /// Creates `bucket` for `owner`, or confirms that it already was.
    ///
    /// Returns [`Creation::Unclaimed`] for a bucket that existed before this
    /// call, is empty and has no marker: the caller decides whether to
    /// [`take_over`](Self::take_over) it. Errors: permanent "exists and was
    /// not created for this claim" when the bucket carries another claim's
    /// marker, holds objects and no marker, or belongs to another account;
    /// otherwise as classified.
    pub async fn create_owned(
        &self,
        bucket: &str,
        region: &str,
        owner: &Owner<'_>,
    ) -> Result<Creation, ProvisionError> {
        let mut create = self.client.create_bucket().bucket(bucket);
        if region != DEFAULT_REGION {
            create = create.create_bucket_configuration(
                CreateBucketConfiguration::builder()
                    .location_constraint(BucketLocationConstraint::from(region))
                    .build(),
            );
        }
        let created = match create.send().await {
            Ok(_) => true,
            Err(e) => {
                let f = StoreFailure::from_sdk("CreateBucket", bucket, &e);
                // BucketAlreadyOwnedByYou: ours (the marker says for whom).
                // BucketAlreadyExists: another account's on AWS; s3s-fs and
                // some other stores answer it for their own buckets too.
                if !matches!(
                    f.code(),
                    Some("BucketAlreadyOwnedByYou" | "BucketAlreadyExists")
                ) {
                    return Err(f.into_provision_error());
                }
                false
            }
        };
        match self.owner(bucket).await {
            Ok(Some(uid)) if uid == owner.claim_uid => {
                debug!(bucket, "bucket exists and carries this claim's marker");
                Ok(Creation::Owned)
            }
            Ok(Some(other)) => Err(not_ours(bucket, Some(&other))),
            Ok(None) => {
                if !self
                    .is_empty(bucket)
                    .await
                    .map_err(StoreFailure::into_provision_error)?
                {
                    return Err(not_ours(bucket, None));
                }
                if !created {
                    return Ok(Creation::Unclaimed);
                }
                self.put_marker(bucket, owner).await?;
                Ok(Creation::Owned)
            }
            // Another account's bucket: we may not even read it.
            Err(f) if f.is_access_denied() && !created => Err(not_ours(bucket, None)),
            Err(f) => Err(f.into_provision_error()),
        }
    }

    /// Marks an existing, empty, unmarked bucket as `owner`'s (after
    /// [`Creation::Unclaimed`]). Loses cleanly to a concurrent marker.
    pub async fn take_over(&self, bucket: &str, owner: &Owner<'_>) -> Result<(), ProvisionError> {
        info!(
            bucket,
            claim = owner.claim,
            "bucket exists, is empty and has no ownership marker: taking it over (an earlier attempt for this claim was interrupted)"
        );
        self.put_marker(bucket, owner).await
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
        let out = match self
            .client
            .get_object()
            .bucket(bucket)
            .key(OWNER_MARKER_KEY)
            .send()
            .await
        {
            Ok(out) => out,
            Err(e) => {
                let f = StoreFailure::from_sdk("GetObject", bucket, &e);
                return if f.is_not_found() && !f.is_no_such_bucket() {
                    Ok(None)
                } else {
                    Err(f)
                };
            }
        };
        let body = out.body.collect().await.map_err(|e| StoreFailure {
            operation: "GetObject",
            bucket: bucket.to_owned(),
            kind: crate::errors::FailureKind::Transport(format!("reading {OWNER_MARKER_KEY}: {e}")),
        })?;
        Ok(Some(
            String::from_utf8_lossy(&body.into_bytes())
                .trim()
                .to_owned(),
        ))
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

    /// Writes the marker unless one exists, then reads it back.
    async fn put_marker(&self, bucket: &str, owner: &Owner<'_>) -> Result<(), ProvisionError> {
        let put = |conditional: bool| {
            let mut req = self
                .client
                .put_object()
                .bucket(bucket)
                .key(OWNER_MARKER_KEY)
                .content_type("text/plain")
                .metadata(OWNER_CLAIM_METADATA, owner.claim)
                .body(ByteStream::from(owner.claim_uid.as_bytes().to_vec()));
            if conditional {
                req = req.if_none_match("*");
            }
            req.send()
        };
        match put(true).await {
            Ok(_) => {}
            Err(e) => {
                let f = StoreFailure::from_sdk("PutObject", bucket, &e);
                match f.status() {
                    // Someone wrote a marker first: the read below says whose.
                    Some(412) => {}
                    // Stores without conditional writes.
                    Some(501) => {
                        put(false).await.map_err(|e| {
                            StoreFailure::from_sdk("PutObject", bucket, &e).into_provision_error()
                        })?;
                    }
                    _ => return Err(f.into_provision_error()),
                }
            }
        }
        match self
            .owner(bucket)
            .await
            .map_err(StoreFailure::into_provision_error)?
        {
            Some(uid) if uid == owner.claim_uid => Ok(()),
            Some(other) => Err(not_ours(bucket, Some(&other))),
            None => Err(ProvisionError::retryable(format!(
                "the ownership marker {OWNER_MARKER_KEY} written to bucket {bucket:?} cannot be read back yet; retrying"
            ))),
        }
    }

    /// Deletes `bucket` if it carries `claim_uid`'s marker; with `force`,
    /// deletes its objects first.
    pub async fn delete_owned(
        &self,
        bucket: &str,
        claim_uid: &str,
        force: bool,
    ) -> Result<Deletion, ProvisionError> {
        if !self
            .exists(bucket)
            .await
            .map_err(StoreFailure::into_provision_error)?
        {
            return Ok(Deletion::AlreadyGone);
        }
        match self.owner(bucket).await {
            Ok(Some(uid)) if uid == claim_uid => {}
            Ok(Some(other)) => {
                return Ok(Deletion::NotOurs(format!(
                    "its ownership marker names claim UID {other}, not {claim_uid}"
                )));
            }
            Ok(None) => {
                return Ok(Deletion::NotOurs(format!(
                    "it has no ownership marker ({OWNER_MARKER_KEY}), so it was not created for this claim"
                )));
            }
            Err(f) if f.is_no_such_bucket() => return Ok(Deletion::AlreadyGone),
            Err(f) => return Err(f.into_provision_error()),
        }
        let objects = if force {
            self.purge(bucket).await?
        } else {
            if !self
                .is_empty(bucket)
                .await
                .map_err(StoreFailure::into_provision_error)?
            {
                return Err(not_empty(bucket));
            }
            0
        };
        self.delete_bucket(bucket, force).await?;
        Ok(Deletion::Deleted { objects })
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

/// The permanent error for a bucket that exists and is not this claim's.
pub fn not_ours(bucket: &str, other_claim_uid: Option<&str>) -> ProvisionError {
    let whose = match other_claim_uid {
        Some(uid) => format!(" (it was created for the claim with UID {uid})"),
        None => String::new(),
    };
    ProvisionError::permanent(format!(
        "bucket {bucket:?} exists and was not created for this claim{whose}: use generateBucketName, or another bucketName; to share an existing bucket, use a StorageClass with the bucketName parameter"
    ))
}

/// The permanent error for deleting a bucket that still holds objects.
pub fn not_empty(bucket: &str) -> ProvisionError {
    ProvisionError::permanent(format!(
        "bucket {bucket} is not empty: empty it, or set {FORCE_DELETE}: \"true\" on the StorageClass"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn teardown_messages_say_how_to_fix_them() {
        let e = not_empty("photos-1");
        assert!(!e.is_retryable());
        assert_eq!(
            e.to_string(),
            "bucket photos-1 is not empty: empty it, or set forceDelete: \"true\" on the StorageClass"
        );
        let e = not_ours("photos-1", Some("uid-2"));
        assert!(!e.is_retryable());
        assert!(
            e.to_string()
                .contains("exists and was not created for this claim"),
            "{e}"
        );
        assert!(e.to_string().contains("uid-2"), "{e}");
    }
}
