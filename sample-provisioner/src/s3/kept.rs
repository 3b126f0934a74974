//! A teardown that keeps the bucket (reclaim policy `Retain`, OBC or
//! COSI) records so in the bucket's tags, so that the store sweep never
//! deletes it once its ObjectBucket or Bucket is gone: the policy the tags
//! recorded at creation may since have been changed to `Retain` on the
//! ObjectBucket or Bucket (both are mutable), and that object is what goes.

use lib_provisioner::ProvisionError;
use lib_provisioner::provisioner::TeardownRequest;
use tracing::{debug, warn};

use super::S3Provisioner;
use crate::errors::StoreFailure;
use crate::params::{ClassName, Ownership};

impl S3Provisioner {
    /// Records `Retain` with `req`'s bucket, if its tags name `req`'s
    /// claim. A class that can no longer be read (deleted, or broken) is
    /// logged and not retried: the teardown must not wait on it, and the
    /// sweep lists a store only through classes it can read.
    pub(super) async fn record_kept(&self, req: &TeardownRequest) -> Result<(), ProvisionError> {
        let class = ClassName::Bucket(&req.storage_class_name);
        let r = match self.resolve(class, &req.parameters).await {
            Ok(r) => r,
            Err(e) if e.is_retryable() => return Err(e),
            Err(e) => {
                warn!(bucket = %req.bucket_name, "could not record in the store that the bucket is kept: {}", e.message());
                return Ok(());
            }
        };
        if r.params.ownership != Ownership::Tags {
            return Ok(());
        }
        let ours = r
            .store
            .record_kept(&req.bucket_name, &req.claim.uid)
            .await
            .map_err(StoreFailure::into_provision_error)?;
        if !ours {
            debug!(bucket = %req.bucket_name, "kept bucket is not tagged as this claim's; nothing to record");
        }
        Ok(())
    }
}
