//! The ownership record: who a bucket is for ([`Owner`]), what a marker, a
//! tag or an intent says when read back ([`Record`]), and the names a store
//! keeps them under.
//!
//! Its own module because both the store, which writes the records, and the
//! intent ConfigMaps ([`crate::intents`]), which the store keeps its intents
//! in, need it. The public paths are `crate::store::...`.

use std::fmt;

use lib_provisioner::provisioner::ReclaimPolicy;

/// The bucket tag naming the claim (UID) a bucket was created for.
pub const OWNER_TAG: &str = "objectbucket.io/claim-uid";
/// The bucket tag naming the claim (`namespace/name`), for humans.
pub const CLAIM_TAG: &str = "objectbucket.io/claim";
/// The bucket tag recording the reclaim (deletion) policy the bucket was
/// created under, and `Retain` once a teardown kept it: the store sweep
/// deletes a bucket without a live owner only when this says `Delete`.
pub const RECLAIM_TAG: &str = "objectbucket.io/reclaim-policy";
/// The bucket tag naming the API of the claim the bucket was made for: a
/// class lists for the sweep only its own API's buckets (a process that
/// does not watch BucketClaims cannot tell whether one lives).
pub const CLAIM_KIND_TAG: &str = "objectbucket.io/claim-kind";

/// The API a claim came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClaimKind {
    /// `objectbucket.io`'s ObjectBucketClaim.
    ObjectBucketClaim,
    /// COSI's BucketClaim.
    BucketClaim,
}

impl ClaimKind {
    /// Its [`CLAIM_KIND_TAG`] value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ObjectBucketClaim => "ObjectBucketClaim",
            Self::BucketClaim => "BucketClaim",
        }
    }

    /// Reads a [`CLAIM_KIND_TAG`] value.
    pub fn parse(value: &str) -> Option<Self> {
        [Self::ObjectBucketClaim, Self::BucketClaim]
            .into_iter()
            .find(|k| k.as_str() == value)
    }
}

/// What a claim's bucket records for the store sweep ([`CLAIM_KIND_TAG`],
/// [`RECLAIM_TAG`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SweepRecord {
    /// The claim's API.
    pub kind: ClaimKind,
    /// The policy the bucket is made under.
    pub reclaim: ReclaimPolicy,
}

/// Key of the object recording which claim a bucket was created for.
pub const OWNER_MARKER_KEY: &str = ".obc-owner";
/// The marker content of a state bucket. No claim UID looks like it, so no
/// claim ever owns, takes over or deletes a state bucket.
pub const STATE_BUCKET_MARKER: &str = "obc-provisioner-state-bucket";
/// Prefix of the intents in the state bucket.
pub const INTENT_PREFIX: &str = "intents/";

/// The key, in the state bucket, of the intent to create `bucket`.
pub fn intent_key(bucket: &str) -> String {
    format!("{INTENT_PREFIX}{bucket}")
}

/// Who a bucket is (to be) owned by.
#[derive(Clone, Copy, Debug)]
pub struct Owner<'a> {
    /// The claim's UID: the marker's (and the intent's) content.
    pub claim_uid: &'a str,
    /// `namespace/name` of the claim, stored as metadata for humans.
    pub claim: &'a str,
    /// What to record with the bucket for the store sweep (tag ownership
    /// only), if the bucket is a claim's known to the cluster.
    pub sweep: Option<SweepRecord>,
}

/// A marker or an intent, as read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// The UID it holds.
    pub claim_uid: String,
    /// `namespace/name` from its metadata, if any.
    pub claim: Option<String>,
}

impl fmt::Display for Record {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.claim {
            Some(claim) => write!(f, "claim {claim} (UID {})", self.claim_uid),
            None => write!(f, "the claim with UID {}", self.claim_uid),
        }
    }
}
