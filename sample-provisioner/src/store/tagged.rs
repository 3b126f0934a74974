//! What the store sweep does with a bucket's tags (tag ownership), read
//! as a [`Tagged`](super::Tagged) record: a teardown that keeps the bucket
//! records `Retain` ([`Store::record_kept`]); and a bucket the sweep found without a live owner is deleted only when
//! its tags, read again, still name that owner and `Delete`
//! ([`Store::delete_orphan`]).
//!
//! The tags are the store's record because they are the one a tenant
//! cannot write: a claim's key may only read and write objects (its policy
//! has no `s3:PutBucketTagging`), and nothing in the cluster is read.

use aws_sdk_s3::types::Tag;
use lib_provisioner::ProvisionError;
use lib_provisioner::provisioner::ReclaimPolicy;
use tracing::info;

use super::client::Store;
use super::records::{Tagged, reclaim_tag_value, tag};
use super::rules::Deletion;
use crate::errors::StoreFailure;
use crate::ownership::{OWNER_TAG, RECLAIM_TAG};

impl Store {
    /// Records `Retain` with a bucket a teardown keeps, if the bucket is
    /// tagged as `claim_uid`'s (another's bucket, or an untagged one, is
    /// left as it is); returns whether it was. Idempotent: a bucket that
    /// records `Retain` already is not written.
    pub async fn record_kept(&self, bucket: &str, claim_uid: &str) -> Result<bool, StoreFailure> {
        let tags = match self.tags(bucket).await {
            Err(f) if f.is_no_such_bucket() => return Ok(false),
            other => other?,
        };
        let Some(tagged) = Tagged::from_tags(&tags) else {
            return Ok(false);
        };
        if tagged.owner_uid != claim_uid {
            return Ok(false);
        }
        if tagged.reclaim == Some(ReclaimPolicy::Retain) {
            return Ok(true);
        }
        let mut set: Vec<Tag> = tags
            .into_iter()
            .filter(|t| t.key() != RECLAIM_TAG)
            .collect();
        set.push(tag(
            bucket,
            RECLAIM_TAG,
            reclaim_tag_value(ReclaimPolicy::Retain),
        )?);
        self.put_tags(bucket, set).await?;
        info!(
            bucket,
            "recorded in the store that the bucket is kept (reclaim policy Retain)"
        );
        Ok(true)
    }

    /// Deletes a bucket the sweep found without a live owner, after reading
    /// its tags again: they must still name `owner_uid` and `Delete`
    /// (a bucket retagged since, or recorded `Retain`, is kept). Objects go
    /// first only with `force` (the class's `forceDelete`), as for a claim.
    pub async fn delete_orphan(
        &self,
        bucket: &str,
        owner_uid: &str,
        force: bool,
    ) -> Result<Deletion, ProvisionError> {
        let tagged = match self.tagged(bucket).await {
            Err(f) if f.is_no_such_bucket() => return Ok(Deletion::AlreadyGone),
            other => other.map_err(StoreFailure::into_provision_error)?,
        };
        match tagged {
            Some(t) if t.owner_uid == owner_uid && t.reclaim == Some(ReclaimPolicy::Delete) => {
                self.delete_owned(bucket, owner_uid, force, true).await
            }
            Some(t) => Err(ProvisionError::permanent(format!(
                "bucket {bucket} is kept: its tags now record owner {} and reclaim policy {}, not {owner_uid} and Delete",
                t.owner_uid,
                t.reclaim.map_or("(none)", reclaim_tag_value)
            ))),
            None => Err(ProvisionError::permanent(format!(
                "bucket {bucket} is kept: it no longer carries the owner tag {OWNER_TAG}"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ownership::{CLAIM_KIND_TAG, ClaimKind};
    use crate::store::records::reclaim_from_tag;

    fn tags(pairs: &[(&str, &str)]) -> Vec<Tag> {
        pairs
            .iter()
            .map(|(k, v)| tag("b", k, v).expect("a valid tag"))
            .collect()
    }

    #[test]
    fn the_owner_tag_is_required_and_the_policy_read_when_known() {
        assert_eq!(Tagged::from_tags(&tags(&[(RECLAIM_TAG, "Delete")])), None);
        let read = |v: &str| {
            Tagged::from_tags(&tags(&[(OWNER_TAG, "u-1"), (RECLAIM_TAG, v)]))
                .expect("owner tagged")
                .reclaim
        };
        assert_eq!(read("Delete"), Some(ReclaimPolicy::Delete));
        assert_eq!(read("Retain"), Some(ReclaimPolicy::Retain));
        assert_eq!(read("delete"), None, "only the exact value is a record");
        let old = Tagged::from_tags(&tags(&[(OWNER_TAG, "u-1")])).expect("owner tagged");
        assert_eq!(old.reclaim, None, "made before the policy was recorded");
        assert_eq!(old.kind, None);
        let cosi = Tagged::from_tags(&tags(&[
            (OWNER_TAG, "u-1"),
            (CLAIM_KIND_TAG, "BucketClaim"),
        ]));
        assert_eq!(
            cosi.expect("owner tagged").kind,
            Some(ClaimKind::BucketClaim)
        );
    }

    #[test]
    fn each_policy_reads_back_as_written() {
        for p in [ReclaimPolicy::Delete, ReclaimPolicy::Retain] {
            assert_eq!(reclaim_from_tag(reclaim_tag_value(p)), Some(p));
        }
    }
}
