//! Deleting every object version and delete marker of a bucket that kept
//! versions, before DeleteBucket under reclaim policy `Delete` with
//! `forceDelete`: ListObjectsV2 shows neither, and a store refuses to
//! delete a bucket that still holds them.

use aws_sdk_s3::types::ObjectIdentifier;
use lib_provisioner::ProvisionError;
use tracing::info;

use super::Store;
use crate::errors::StoreFailure;

/// Versions listed and deleted per request (S3's most).
const PAGE: i32 = 1000;

impl Store {
    /// Deletes every version and delete marker, page by page (called once
    /// the ownership marker is gone: nothing is kept); the number deleted. A version under object lock
    /// retention fails the deletion loudly (it is never reported deleted).
    pub(super) async fn purge_versions(&self, bucket: &str) -> Result<u64, ProvisionError> {
        let mut deleted = 0u64;
        let (mut key_marker, mut version_marker) = (None::<String>, None::<String>);
        loop {
            let page = self
                .client
                .list_object_versions()
                .bucket(bucket)
                .max_keys(PAGE)
                .set_key_marker(key_marker.take())
                .set_version_id_marker(version_marker.take())
                .send()
                .await
                .map_err(|e| {
                    StoreFailure::from_sdk("ListObjectVersions", bucket, &e).into_provision_error()
                })?;
            let versions = page.versions().iter().map(|v| (v.key(), v.version_id()));
            let markers = page
                .delete_markers()
                .iter()
                .map(|m| (m.key(), m.version_id()));
            let ids = versions
                .chain(markers)
                .filter_map(|(key, version)| Some((key?, version)))
                .map(|(key, version)| {
                    ObjectIdentifier::builder()
                        .key(key)
                        .set_version_id(version.map(str::to_owned))
                        .build()
                })
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| {
                    ProvisionError::permanent(format!(
                        "could not build a DeleteObjects request: {e}"
                    ))
                })?;
            if !ids.is_empty() {
                deleted += self.delete_versions(bucket, ids).await?;
            }
            if page.is_truncated() != Some(true) {
                break;
            }
            key_marker = page.next_key_marker().map(str::to_owned);
            version_marker = page.next_version_id_marker().map(str::to_owned);
            if key_marker.is_none() {
                break;
            }
        }
        if deleted > 0 {
            info!(
                bucket,
                versions = deleted,
                "deleted the bucket's object versions and delete markers"
            );
        }
        Ok(deleted)
    }

    async fn delete_versions(
        &self,
        bucket: &str,
        ids: Vec<ObjectIdentifier>,
    ) -> Result<u64, ProvisionError> {
        let count = ids.len() as u64;
        let Some(first) = self.delete_batch(bucket, ids).await? else {
            return Ok(count);
        };
        let message = format!(
            "S3 DeleteObjects on bucket {bucket:?} could not delete {} of {count} object versions (first: {:?} version {:?}: {} {})",
            first.count, first.key, first.version, first.code, first.message
        );
        // Retention ends on a date: retrying then succeeds, and until then
        // the claim says why its deletion waits.
        Err(ProvisionError::retryable(format!(
            "{message}; versions under object lock retention cannot be deleted before it ends (the deletion is retried), and a refusal of the admin credentials needs a policy that may delete object versions"
        )))
    }
}
