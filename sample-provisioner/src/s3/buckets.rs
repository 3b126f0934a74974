//! Buckets without credentials ([`Provisioner::create_bucket`]) and
//! buckets an administrator made ([`Provisioner::existing_bucket`]), for
//! APIs where access is separate (Kubernetes COSI).
//!
//! A bucket created here carries the same ownership record as a claim's
//! (the tag or marker naming `req.claim.uid`, behind a creation intent), so
//! [`Provisioner::delete`] with that UID deletes it and nothing else. On the
//! COSI gRPC path the UID is the bucket name the sidecar sends
//! (`bc-<BucketClaim UID>`), which `DriverDeleteBucket` sends back as the
//! bucket id. A bucket found by `existing_bucket` carries no record of ours
//! and is never deleted by this provisioner.
//!
//! [`Provisioner::create_bucket`]: lib_provisioner::Provisioner::create_bucket
//! [`Provisioner::existing_bucket`]: lib_provisioner::Provisioner::existing_bucket
//! [`Provisioner::delete`]: lib_provisioner::Provisioner::delete

use lib_provisioner::provisioner::{BucketInfo, StoreEndpoint};
use lib_provisioner::{BucketRequest, ProvisionError};

use super::{Resolved, S3Provisioner};
use crate::params::ClassName;

impl S3Provisioner {
    /// Creates the bucket for `req.claim`, makes no user.
    pub(super) async fn create_bare_bucket(
        &self,
        req: &BucketRequest,
    ) -> Result<BucketInfo, ProvisionError> {
        if req.claim.uid.is_empty() {
            // Every claim without a UID would share one ownership record.
            return Err(ProvisionError::permanent(format!(
                "bucket {:?} was asked for without the UID of its claim, which its ownership record needs",
                req.bucket_name
            ))
            .with_nothing_created());
        }
        let (r, _) = self.make_bucket(req).await?;
        Ok(BucketInfo::new(store_endpoint(&r)))
    }

    /// The administrator's bucket `req.bucket_name`, if it exists.
    pub(super) async fn find_existing_bucket(
        &self,
        req: &BucketRequest,
    ) -> Result<BucketInfo, ProvisionError> {
        let bucket = &req.bucket_name;
        if *bucket == self.state_bucket {
            return Err(ProvisionError::already_exists(format!(
                "bucket {bucket:?} is the provisioner's state bucket (--state-bucket, OBC_STATE_BUCKET) and is never handed out: name another existing bucket"
            )));
        }
        let r = self
            .resolve(ClassName::Bucket(&req.storage_class_name), &req.parameters)
            .await?;
        match r.store.exists(bucket).await {
            Ok(true) => Ok(BucketInfo::new(store_endpoint(&r))),
            Ok(false) => Err(ProvisionError::not_found(format!(
                "bucket {bucket:?} does not exist on {}: create it there (this provisioner never creates an existing bucket), or name a bucket that exists",
                r.params.endpoint.url
            ))),
            Err(f) => Err(f.into_provision_error()),
        }
    }
}

/// Where the class's store is reached: its URL (scheme included), region,
/// path-style addressing (what the sample's own clients use).
pub(super) fn store_endpoint(r: &Resolved) -> StoreEndpoint {
    let e = &r.params.endpoint;
    StoreEndpoint::new(e.host.clone(), i32::from(e.port))
        .with_url(e.url.clone())
        .with_region(r.params.region.clone())
}
