//! The ownership records of a [`Store`]: reads and writes of the bucket tag
//! or marker object and of the intent (ConfigMap or state-bucket object),
//! the state bucket's upkeep, and what a bucket is to the rules.

use std::sync::atomic::Ordering;

use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{Tag, Tagging};
use lib_provisioner::ProvisionError;
use lib_provisioner::provisioner::ReclaimPolicy;
use tracing::{debug, info};

use super::client::{Records, Store};
use super::rules::{Found, claim_uid_in_record, not_ours};
use crate::errors::{FailureKind, StoreFailure};
use crate::ownership::{
    CLAIM_KIND_TAG, CLAIM_TAG, ClaimKind, OWNER_MARKER_KEY, OWNER_TAG, Owner, RECLAIM_TAG, Record,
    STATE_BUCKET_MARKER, intent_key,
};

/// User metadata on the marker and on intents naming the claim, for humans.
const OWNER_CLAIM_METADATA: &str = "obc-claim";

impl Store {
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
        let in_record = |r: Option<Record>| {
            r.map(|r| Record {
                claim_uid: claim_uid_in_record(r.claim_uid, bucket),
                ..r
            })
        };
        if let Records::Tags(intents) = &self.records {
            return intents.get(bucket).await.map(in_record);
        }
        match self
            .read_record(&self.state.name, &intent_key(bucket))
            .await
        {
            Ok(record) => Ok(in_record(record)),
            Err(f) if f.is_no_such_bucket() => Ok(None),
            Err(f) => Err(f.into_provision_error()),
        }
    }

    /// What `bucket` is to the rules. `head_first`: start with HeadBucket
    /// (cheapest when the bucket usually does not exist); else with the
    /// marker (cheapest when it usually does). Some stores (s3s-fs) answer
    /// NoSuchKey rather than NoSuchBucket for an object of a missing
    /// bucket; the listing then tells.
    pub(super) async fn find(&self, bucket: &str, head_first: bool) -> Result<Found, StoreFailure> {
        let denied = |f: &StoreFailure| f.is_access_denied() && !f.is_bad_credentials();
        if head_first {
            match self.exists(bucket).await {
                Ok(true) => {}
                Ok(false) => return Ok(Found::Absent),
                Err(f) if denied(&f) => return Ok(Found::Foreign),
                Err(f) => return Err(f),
            }
        }
        if self.uses_tags() {
            match self.owner_tag(bucket).await {
                Ok(Some(uid)) => return Ok(Found::Marked(claim_uid_in_record(uid, bucket))),
                // No tag: a marker of an older version still counts.
                Ok(None) => {}
                Err(f) if f.is_no_such_bucket() => return Ok(Found::Absent),
                Err(f) if denied(&f) => return Ok(Found::Foreign),
                Err(f) => return Err(f),
            }
        }
        match self.read_record(bucket, OWNER_MARKER_KEY).await {
            Ok(Some(marker)) => {
                return Ok(Found::Marked(claim_uid_in_record(marker.claim_uid, bucket)));
            }
            Ok(None) => {}
            Err(f) if f.is_no_such_bucket() => return Ok(Found::Absent),
            Err(f) if denied(&f) => return Ok(Found::Foreign),
            Err(f) => return Err(f),
        }
        match self.is_empty(bucket).await {
            Ok(empty) => Ok(Found::Unmarked { empty }),
            Err(f) if f.is_no_such_bucket() => Ok(Found::Absent),
            Err(f) => Err(f),
        }
    }

    /// The marker or intent at `key`; `None` if there is none. NoSuchBucket
    /// is an error, for the caller to judge.
    pub(super) async fn read_record(
        &self,
        bucket: &str,
        key: &str,
    ) -> Result<Option<Record>, StoreFailure> {
        let out = match self
            .client
            .get_object()
            .bucket(bucket)
            .key(key)
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
        let claim = out
            .metadata()
            .and_then(|m| m.get(OWNER_CLAIM_METADATA))
            .cloned();
        let body = out.body.collect().await.map_err(|e| StoreFailure {
            operation: "GetObject",
            bucket: bucket.to_owned(),
            kind: FailureKind::Transport(format!("reading {key}: {e}")),
        })?;
        Ok(Some(Record {
            claim_uid: String::from_utf8_lossy(&body.into_bytes())
                .trim()
                .to_owned(),
            claim,
        }))
    }

    /// Writes `owner` at `key` unless an object is there (`If-None-Match:
    /// *`; a plain PUT on stores without conditional writes). Returns
    /// whether it was written.
    pub(super) async fn put_record(
        &self,
        bucket: &str,
        key: &str,
        owner: &Owner<'_>,
    ) -> Result<bool, StoreFailure> {
        let put = |conditional: bool| {
            let mut req = self
                .client
                .put_object()
                .bucket(bucket)
                .key(key)
                .content_type("text/plain")
                .metadata(OWNER_CLAIM_METADATA, owner.claim)
                .body(ByteStream::from(owner.claim_uid.as_bytes().to_vec()));
            if conditional {
                req = req.if_none_match("*");
            }
            req.send()
        };
        let f = match put(true).await {
            Ok(_) => return Ok(true),
            Err(e) => StoreFailure::from_sdk("PutObject", bucket, &e),
        };
        match f.status() {
            // Someone wrote one first.
            Some(412) => Ok(false),
            // Stores without conditional writes.
            Some(501) => put(false)
                .await
                .map(|_| true)
                .map_err(|e| StoreFailure::from_sdk("PutObject", bucket, &e)),
            _ => Err(f),
        }
    }

    /// Marks `bucket` as `owner`'s unless it is marked, then reads the
    /// marker back: another claim's marker is the permanent "not ours".
    pub(super) async fn mark(&self, bucket: &str, owner: &Owner<'_>) -> Result<(), ProvisionError> {
        let written = if self.uses_tags() {
            self.put_owner_tag(bucket, owner).await
        } else {
            self.put_record(bucket, OWNER_MARKER_KEY, owner)
                .await
                .map(drop)
        };
        written.map_err(StoreFailure::into_provision_error)?;
        let read = if self.uses_tags() {
            self.owner_tag(bucket).await
        } else {
            self.owner(bucket).await
        };
        match read.map_err(StoreFailure::into_provision_error)? {
            Some(uid) if uid == owner.claim_uid => Ok(()),
            Some(other) => Err(not_ours(bucket, Some(&other))),
            None => Err(ProvisionError::retryable(format!(
                "the ownership record written to bucket {bucket:?} cannot be read back yet; retrying"
            ))),
        }
    }

    /// The claim UID in the bucket's [`OWNER_TAG`], if it has one.
    pub async fn owner_tag(&self, bucket: &str) -> Result<Option<String>, StoreFailure> {
        Ok(self.tagged(bucket).await?.map(|t| t.owner_uid))
    }

    /// The bucket's ownership tags, if it has an owner tag.
    pub async fn tagged(&self, bucket: &str) -> Result<Option<Tagged>, StoreFailure> {
        Ok(Tagged::from_tags(&self.tags(bucket).await?))
    }

    /// The bucket's tags (none: empty).
    pub(super) async fn tags(&self, bucket: &str) -> Result<Vec<Tag>, StoreFailure> {
        match self.client.get_bucket_tagging().bucket(bucket).send().await {
            Ok(out) => Ok(out.tag_set),
            Err(e) => {
                let f = StoreFailure::from_sdk("GetBucketTagging", bucket, &e);
                if f.code() == Some("NoSuchTagSet") || (f.is_not_found() && !f.is_no_such_bucket())
                {
                    Ok(Vec::new())
                } else {
                    Err(f)
                }
            }
        }
    }

    /// Replaces the bucket's tag set.
    pub(super) async fn put_tags(&self, bucket: &str, set: Vec<Tag>) -> Result<(), StoreFailure> {
        let tagging = Tagging::builder()
            .set_tag_set(Some(set))
            .build()
            .map_err(|e| request_failure(bucket, e.to_string()))?;
        self.client
            .put_bucket_tagging()
            .bucket(bucket)
            .tagging(tagging)
            .send()
            .await
            .map(drop)
            .map_err(|e| StoreFailure::from_sdk("PutBucketTagging", bucket, &e))
    }

    /// Tags the bucket as `owner`'s (with its reclaim policy, if given),
    /// keeping its other tags. Not conditional: the intent already decided
    /// that the bucket is this claim's, and the tag is read back.
    pub(super) async fn put_owner_tag(
        &self,
        bucket: &str,
        owner: &Owner<'_>,
    ) -> Result<(), StoreFailure> {
        let mut set: Vec<Tag> = self
            .tags(bucket)
            .await?
            .into_iter()
            .filter(|t| {
                let recorded = [RECLAIM_TAG, CLAIM_KIND_TAG].contains(&t.key());
                t.key() != OWNER_TAG && t.key() != CLAIM_TAG && (owner.sweep.is_none() || !recorded)
            })
            .collect();
        set.push(tag(bucket, OWNER_TAG, owner.claim_uid)?);
        set.push(tag(bucket, CLAIM_TAG, owner.claim)?);
        if let Some(record) = owner.sweep {
            set.push(tag(bucket, CLAIM_KIND_TAG, record.kind.as_str())?);
            set.push(tag(bucket, RECLAIM_TAG, reclaim_tag_value(record.reclaim))?);
        }
        self.put_tags(bucket, set).await
    }

    /// Records `owner`'s intent to create `bucket`, unless it is recorded
    /// already. Another claim's intent is a retryable error: its creation
    /// is unfinished (it then owns the bucket, or gives the name up).
    pub(super) async fn record_intent(
        &self,
        bucket: &str,
        owner: &Owner<'_>,
    ) -> Result<(), ProvisionError> {
        if let Records::Tags(intents) = &self.records {
            return match intents.record(bucket, owner).await? {
                None => Ok(()),
                Some(other) => Err(ProvisionError::retryable(format!(
                    "bucket {bucket:?} is being created for {other} (its intent is {}); retrying. If that claim no longer exists, delete that ConfigMap",
                    intents.describe(bucket)
                ))),
            };
        }
        let state = &self.state.name;
        let key = intent_key(bucket);
        let written = match self.put_record(state, &key, owner).await {
            Ok(written) => written,
            Err(f) if f.is_no_such_bucket() => {
                // Deleted while we ran: create it again on the next attempt.
                self.state.ready.store(false, Ordering::Release);
                return Err(ProvisionError::retryable(format!(
                    "the state bucket {state:?} is gone; creating it again"
                )));
            }
            Err(f) => return Err(f.into_provision_error()),
        };
        if written {
            debug!(bucket, claim = owner.claim, "recorded the creation intent");
            return Ok(());
        }
        match self.intent(bucket).await? {
            Some(r) if r.claim_uid == owner.claim_uid => Ok(()),
            Some(other) => Err(ProvisionError::retryable(format!(
                "bucket {bucket:?} is being created for {other} (its intent is object {key:?} in the state bucket {state:?}); retrying. If that claim no longer exists, delete that object"
            ))),
            None => Err(ProvisionError::retryable(format!(
                "the creation intent {key:?} for bucket {bucket:?} changed while it was written; retrying"
            ))),
        }
    }

    /// Deletes the intent for `bucket` (call only once it is known to be
    /// this claim's: intents are only replaced by their own claim).
    pub(super) async fn delete_intent(&self, bucket: &str) -> Result<(), ProvisionError> {
        if let Records::Tags(intents) = &self.records {
            return intents.delete(bucket).await;
        }
        let state = &self.state.name;
        match self
            .client
            .delete_object()
            .bucket(state)
            .key(intent_key(bucket))
            .send()
            .await
        {
            Ok(_) => Ok(()),
            Err(e) => {
                let f = StoreFailure::from_sdk("DeleteObject", state, &e);
                if f.is_not_found() {
                    Ok(())
                } else {
                    Err(f.into_provision_error())
                }
            }
        }
    }

    /// Makes sure the state bucket exists and is marked as one: once per
    /// [`Store`] (again after it disappeared).
    pub(super) async fn ensure_state_bucket(&self) -> Result<(), ProvisionError> {
        if self.state.ready.load(Ordering::Acquire) {
            return Ok(());
        }
        let _one_at_a_time = self.state.checking.lock().await;
        if self.state.ready.load(Ordering::Acquire) {
            return Ok(());
        }
        let name = self.state.name.as_str();
        let us = Owner {
            claim_uid: STATE_BUCKET_MARKER,
            claim: "sample-provisioner state bucket",
            sweep: None,
        };
        let unusable = |why: String| {
            ProvisionError::permanent(format!(
                "bucket {name:?} cannot be the provisioner's state bucket: {why}. Choose another name with --state-bucket (OBC_STATE_BUCKET)"
            ))
        };
        match self
            .find(name, false)
            .await
            .map_err(StoreFailure::into_provision_error)?
        {
            Found::Marked(m) if m == STATE_BUCKET_MARKER => {}
            Found::Marked(uid) => {
                return Err(unusable(format!(
                    "its ownership marker names claim UID {uid}, so it is a claim's bucket"
                )));
            }
            Found::Foreign => {
                return Err(unusable(
                    "access is denied: it belongs to another account, or the admin credentials may not read it (check the admin Secret named by the class: the StorageClass, or COSI's BucketClass)".into(),
                ));
            }
            Found::Unmarked { empty: false } => {
                return Err(unusable(format!(
                    "it exists, holds objects and has no marker {OWNER_MARKER_KEY}. If it is this provisioner's state bucket and lost its marker, write an object {OWNER_MARKER_KEY} holding {STATE_BUCKET_MARKER} into it instead"
                )));
            }
            found @ (Found::Absent | Found::Unmarked { empty: true }) => {
                if found == Found::Absent {
                    self.create_bucket(name, false).await?;
                }
                self.put_record(name, OWNER_MARKER_KEY, &us)
                    .await
                    .map_err(StoreFailure::into_provision_error)?;
                match self
                    .owner(name)
                    .await
                    .map_err(StoreFailure::into_provision_error)?
                {
                    Some(m) if m == STATE_BUCKET_MARKER => {}
                    Some(uid) => {
                        return Err(unusable(format!(
                            "a claim's ownership marker (UID {uid}) was written into it first"
                        )));
                    }
                    None => {
                        return Err(ProvisionError::retryable(format!(
                            "the marker written to the state bucket {name:?} cannot be read back yet; retrying"
                        )));
                    }
                }
                info!(bucket = name, "created the provisioner's state bucket");
            }
        }
        self.state.ready.store(true, Ordering::Release);
        Ok(())
    }
}

/// A bucket's ownership tags.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tagged {
    /// The owner's UID ([`OWNER_TAG`]).
    pub owner_uid: String,
    /// The recorded reclaim policy ([`RECLAIM_TAG`]); none on buckets made
    /// before it was recorded, or with a value this version cannot read.
    pub reclaim: Option<ReclaimPolicy>,
    /// The recorded claim API ([`CLAIM_KIND_TAG`]); none as above.
    pub kind: Option<ClaimKind>,
}

impl Tagged {
    /// Reads the tags; none without an owner tag.
    pub fn from_tags(tags: &[Tag]) -> Option<Self> {
        let value = |key: &str| tags.iter().find(|t| t.key() == key).map(Tag::value);
        Some(Self {
            owner_uid: value(OWNER_TAG)?.to_owned(),
            reclaim: value(RECLAIM_TAG).and_then(reclaim_from_tag),
            kind: value(CLAIM_KIND_TAG).and_then(ClaimKind::parse),
        })
    }
}

/// The [`RECLAIM_TAG`] value of a policy.
pub(super) fn reclaim_tag_value(policy: ReclaimPolicy) -> &'static str {
    match policy {
        ReclaimPolicy::Delete => "Delete",
        ReclaimPolicy::Retain => "Retain",
    }
}

/// A [`RECLAIM_TAG`] value; anything else is no record.
pub(super) fn reclaim_from_tag(value: &str) -> Option<ReclaimPolicy> {
    match value {
        "Delete" => Some(ReclaimPolicy::Delete),
        "Retain" => Some(ReclaimPolicy::Retain),
        _ => None,
    }
}

/// One tag of `bucket`'s set.
pub(super) fn tag(bucket: &str, key: &str, value: &str) -> Result<Tag, StoreFailure> {
    Tag::builder()
        .key(key)
        .value(value)
        .build()
        .map_err(|e| request_failure(bucket, e.to_string()))
}

fn request_failure(bucket: &str, why: String) -> StoreFailure {
    StoreFailure {
        operation: "PutBucketTagging",
        bucket: bucket.to_owned(),
        kind: FailureKind::Request(why),
    }
}
