//! Credentials re-issued for a bucket a claim is bound to already
//! ([`BucketRequest::reissue`]): its Secret was deleted or edited.
//!
//! The library sets `reissue` only when the claim's ObjectBucket binds the
//! bucket to the claim. The ObjectBucket is cluster-scoped and written by
//! the library (or by the Go library it took the claim over from), never by
//! the claim's owner, so it is the proof of ownership here: a bucket taken
//! over from the Go library carries no marker and may hold data, which a
//! new claim's provisioning rightly refuses. Nothing is created on this
//! path: a bucket that is gone stays gone, and the claim is told.

use lib_provisioner::{BucketAccess, BucketRequest, ProvisionError};
use tracing::info;

use super::{S3Provisioner, claim_options};
use crate::access::Access;
use crate::credentials::ACCESS_KEY;
use crate::params::ClassName;
use crate::store::reserved;

impl S3Provisioner {
    /// Issues the bound claim's credentials again, for its existing bucket
    /// (`brownfield`: the class's bucket, shared with other claims).
    pub(super) async fn reissue(
        &self,
        req: &BucketRequest,
        brownfield: bool,
    ) -> Result<BucketAccess, ProvisionError> {
        if req.bucket_name == self.state_bucket {
            return Err(reserved(&req.bucket_name));
        }
        let r = self
            .resolve(ClassName::Bucket(&req.storage_class_name), &req.parameters)
            .await?;
        let options = claim_options(&r, req, brownfield)?;
        let claim = format!("{}/{}", req.claim.namespace, req.claim.name);
        match r.store.exists(&req.bucket_name).await {
            Ok(true) => {}
            Ok(false) => {
                return Err(ProvisionError::permanent(format!(
                    "bucket {:?}, to which claim {claim} is bound, is gone from {}: its credentials are not issued again and the bucket is not created again. Restore the bucket, or delete the claim and create a new one",
                    req.bucket_name, r.params.endpoint.url
                )));
            }
            Err(f) => return Err(f.into_provision_error()),
        }
        if !brownfield {
            self.check_not_foreign(&r.store, req, &claim).await?;
        }
        info!(bucket = %req.bucket_name, %claim, "issuing the bound claim's credentials again");
        self.issue(&r, req, reissued_access(req, options.access))
            .await
    }

    /// A bucket carrying another claim's marker was replaced behind the
    /// ObjectBucket's back (deleted, then created for someone else): the
    /// binding no longer describes it. No marker (the Go library's) or this
    /// claim's is fine.
    async fn check_not_foreign(
        &self,
        store: &crate::store::Store,
        req: &BucketRequest,
        claim: &str,
    ) -> Result<(), ProvisionError> {
        match store.owner(&req.bucket_name).await {
            Ok(Some(uid)) if uid != req.claim.uid => Err(ProvisionError::permanent(format!(
                "bucket {:?}, to which claim {claim} is bound, now carries the ownership marker of another claim: it was replaced behind the claim's ObjectBucket, so no credentials for it are issued to this claim. Ask the store's administrator which bucket holds this claim's data",
                req.bucket_name
            ))),
            Ok(_) => Ok(()),
            Err(f) => Err(f.into_provision_error()),
        }
    }
}

/// The access to re-issue: what was recorded at provisioning narrows what
/// the (recorded) config asks for, never widens it.
fn reissued_access(req: &BucketRequest, configured: Access) -> Access {
    match req.additional_state.get(ACCESS_KEY) {
        Some(a) if a == Access::ReadOnly.as_str() => Access::ReadOnly,
        _ => configured,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use lib_provisioner::ClaimIdentity;

    use super::*;

    #[test]
    fn a_read_only_record_is_never_widened() {
        let req = BucketRequest::new(ClaimIdentity::new("ns", "c", "uid"), "b", "s3")
            .reissuing(BTreeMap::from([(ACCESS_KEY.into(), "read-only".into())]));
        assert_eq!(reissued_access(&req, Access::ReadWrite), Access::ReadOnly);
        let taken_over = BucketRequest::new(ClaimIdentity::new("ns", "c", "uid"), "b", "s3")
            .reissuing(BTreeMap::new());
        assert_eq!(
            reissued_access(&taken_over, Access::ReadOnly),
            Access::ReadOnly
        );
        assert_eq!(
            reissued_access(&taken_over, Access::ReadWrite),
            Access::ReadWrite
        );
    }
}
