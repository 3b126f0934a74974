//! The ownership record: who a bucket is for ([`Owner`]), what a marker, a
//! tag or an intent says when read back ([`Record`]), and the names a store
//! keeps them under.
//!
//! Its own module because both the store, which writes the records, and the
//! intent ConfigMaps ([`crate::intents`]), which the store keeps its intents
//! in, need it. The public paths are `crate::store::...`.

use std::fmt;

/// The bucket tag naming the claim (UID) a bucket was created for.
pub const OWNER_TAG: &str = "objectbucket.io/claim-uid";
/// The bucket tag naming the claim (`namespace/name`), for humans.
pub const CLAIM_TAG: &str = "objectbucket.io/claim";

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
