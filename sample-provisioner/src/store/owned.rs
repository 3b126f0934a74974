//! Creating and deleting a claim's bucket on a [`Store`]: the ownership
//! rules' answers ([`provision_step`], [`delete_step`]) carried out.

use aws_sdk_s3::types::ObjectIdentifier;
use lib_provisioner::ProvisionError;
use tracing::{debug, info, warn};

use super::client::Store;
use super::rules::{
    Basis, Creation, DeleteStep, Deletion, Found, ProvisionStep, delete_step, denied, not_empty,
    provision_step, reserved,
};
use crate::errors::StoreFailure;
use crate::ownership::{OWNER_MARKER_KEY, Owner};
use crate::params::FORCE_DELETE;

/// Keys per DeleteObjects call (the S3 maximum) and per listing page.
const PAGE: i32 = 1000;

impl Store {
    /// Creates `bucket` for `owner` (with object lock enabled if asked), or
    /// confirms that it already was.
    ///
    /// Errors: permanent when the bucket is not the claim's ([`Refusal`](super::Refusal))
    /// or is the state bucket; retryable while another claim's creation of
    /// the same name is unfinished; otherwise as classified. Errors raised
    /// before CreateBucket, or by it, say that nothing was created
    /// ([`ProvisionError::nothing_created`]); later ones (the marker) do not.
    pub async fn create_owned(
        &self,
        bucket: &str,
        owner: &Owner<'_>,
        object_lock: bool,
    ) -> Result<Creation, ProvisionError> {
        if !self.uses_tags() {
            if bucket == self.state.name {
                return Err(reserved(bucket).with_nothing_created());
            }
            self.ensure_state_bucket().await?;
        }
        let mut found = self
            .find(bucket, true)
            .await
            .map_err(StoreFailure::into_provision_error)?;
        let intent_ours = if found == Found::Absent {
            self.record_intent(bucket, owner).await?;
            match self.create_bucket(bucket, object_lock).await {
                Ok(true) => {
                    let marked = self.mark(bucket, owner).await.map(|()| Creation::Created);
                    return self.settle_intent(bucket, marked, false).await;
                }
                // An earlier attempt's CreateBucket (or the SDK's retry of
                // this one) created it: decide below, with the intent.
                Ok(false) => {
                    found = self
                        .find(bucket, false)
                        .await
                        .map_err(StoreFailure::into_provision_error)?
                }
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
        let found = self
            .find(bucket, false)
            .await
            .map_err(StoreFailure::into_provision_error)?;
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
                if let Some(first) = self.delete_batch(bucket, keys).await? {
                    let code = first.code;
                    let message = format!(
                        "S3 DeleteObjects on bucket {bucket:?} could not delete {} of {count} objects (first: {:?}: {code} {})",
                        first.count, first.key, first.message
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
    /// interrupted deletion still knows whose bucket it is. A bucket that
    /// kept versions has them (and its delete markers) deleted first with
    /// `force`, and is "not empty" without.
    async fn delete_bucket(&self, bucket: &str, force: bool) -> Result<(), ProvisionError> {
        let (mut marker_removed, mut versions_purged) = (false, false);
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
            if marker_removed && !versions_purged {
                // No current object and no marker, yet not empty: versions
                // or delete markers (ListObjectsV2 shows neither).
                if !force {
                    return Err(not_empty(bucket));
                }
                self.purge_versions(bucket).await?;
                versions_purged = true;
                continue;
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
