//! The ownership rules, as pure functions: what a provision or a delete
//! does given what the store holds ([`provision_step`], [`delete_step`]),
//! and the messages of the refusals. Unit-tested exhaustively here;
//! [`Store`](super::client::Store) gathers the inputs and carries the
//! answers out.

use std::fmt;

use lib_provisioner::ProvisionError;
use lib_provisioner::cosi::api::owner_uid_of_id;
use lib_provisioner::provisioner::ErrorReason;

use crate::ownership::{OWNER_MARKER_KEY, Owner, STATE_BUCKET_MARKER};
use crate::params::FORCE_DELETE;

// ---------------------------------------------------------------------------
// The rules, without I/O
// ---------------------------------------------------------------------------

/// A bucket name as the ownership rules see it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Found {
    /// There is no bucket of that name.
    Absent,
    /// The bucket exists but may not be read: another account's (or the
    /// credentials may not read it).
    Foreign,
    /// The bucket carries a marker with this content (a claim UID, or
    /// [`STATE_BUCKET_MARKER`]).
    Marked(String),
    /// The bucket carries no marker; `empty`: it holds no object at all.
    Unmarked {
        /// Whether it holds no object.
        empty: bool,
    },
}

/// The claim UID a tag, marker or intent on `bucket` names. Records hold
/// the claim's UID, except those the COSI gRPC path of earlier versions
/// wrote: it keyed a dynamic bucket `bc-<uid>` by its whole name (the id
/// the sidecar sends), so a record equal to the bucket's own name names the
/// claim `<uid>`, the UID both driver modes hand over now. Only this
/// provisioner writes records: nothing here is a tenant's.
pub fn claim_uid_in_record(record: String, bucket: &str) -> String {
    if record == bucket {
        owner_uid_of_id(bucket).to_owned()
    } else {
        record
    }
}

/// Why a bucket without a marker belongs to a claim. Only what this
/// provisioner recorded counts: its marker or tag, its creation intent, or
/// the library's bound ObjectBucket. Nothing a claim's owner can write (the
/// claim's annotations, its spec) is ever a reason: a claim naming an
/// empty bucket someone else made would get it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Basis {
    /// It carries the claim's marker.
    Marker,
    /// The state bucket holds this claim's intent to create it.
    Intent,
    /// The claim's bound greenfield ObjectBucket records the bucket as
    /// created for it, by a provisioner that writes no marker (the Go
    /// `lib-bucket-provisioner`'s), and the claim was taken over.
    ObjectBucket,
}

impl fmt::Display for Basis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Marker => "it carries the claim's ownership marker",
            Self::Intent => "the state bucket records the claim's intent to create it",
            Self::ObjectBucket => {
                "the claim's bound ObjectBucket records it as created for the claim (by a provisioner that writes no marker)"
            }
        })
    }
}

/// Why provision refuses a bucket that exists.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// It carries another claim's marker (this UID).
    OtherClaim(String),
    /// It is a state bucket of this provisioner.
    StateBucket,
    /// It may not be read: another account's.
    Foreign,
    /// No marker, objects in it, and no intent of this claim.
    UnmarkedWithData,
    /// No marker, empty, and nothing this provisioner recorded says it was
    /// made for this claim: it may be someone else's.
    Unclaimed,
    /// This claim's intent says it was created for the claim, but objects
    /// were written to it before it got its marker.
    WrittenBeforeMarked,
}

impl Refusal {
    /// The permanent error the claim shows. Every refusal but
    /// [`WrittenBeforeMarked`](Self::WrittenBeforeMarked) (a bucket created
    /// for this claim) says that provision created nothing.
    pub fn into_error(self, bucket: &str, owner: &Owner<'_>) -> ProvisionError {
        let made_for_claim = self == Self::WrittenBeforeMarked;
        let error = self.describe(bucket, owner);
        if made_for_claim {
            error
        } else {
            // Someone else's bucket (COSI answers ALREADY_EXISTS).
            error
                .with_nothing_created()
                .with_reason(ErrorReason::AlreadyExists)
        }
    }

    fn describe(self, bucket: &str, owner: &Owner<'_>) -> ProvisionError {
        match self {
            Self::OtherClaim(uid) => not_ours(bucket, Some(&uid)),
            Self::StateBucket => reserved(bucket),
            Self::Foreign | Self::UnmarkedWithData => not_ours(bucket, None),
            Self::Unclaimed => unclaimed(bucket),
            Self::WrittenBeforeMarked => ProvisionError::permanent(format!(
                "bucket {bucket:?} was created for this claim, but the attempt was interrupted before its ownership marker {OWNER_MARKER_KEY} was written, and objects were written to it since: check them, then delete them, or write an object {OWNER_MARKER_KEY} holding {} into the bucket to let the claim have it as it is; the claim is retried",
                owner.claim_uid
            )),
        }
    }

    /// Whether the claim's intent stays: only while the bucket may still
    /// become the claim's (someone empties it).
    pub(super) fn keeps_intent(&self) -> bool {
        *self == Self::WrittenBeforeMarked
    }
}

/// What provision does with a bucket name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProvisionStep {
    /// It does not exist: record the intent, CreateBucket, write the
    /// marker, delete the intent.
    Create,
    /// It carries this claim's marker: an earlier attempt created it.
    Owned,
    /// It is this claim's but has no marker: write it.
    TakeOver(Basis),
    /// It is not this claim's.
    Refuse(Refusal),
}

/// The provision rule. `intent_ours`: the state bucket (or the intent
/// ConfigMap) holds this claim's intent for the bucket. An empty bucket
/// without marker or intent is refused, whatever the claim says about its
/// name: it may be someone else's.
pub fn provision_step(found: &Found, claim_uid: &str, intent_ours: bool) -> ProvisionStep {
    use ProvisionStep::{Create, Owned, Refuse, TakeOver};
    match found {
        Found::Absent => Create,
        Found::Foreign => Refuse(Refusal::Foreign),
        Found::Marked(m) if m == STATE_BUCKET_MARKER => Refuse(Refusal::StateBucket),
        Found::Marked(m) if m == claim_uid => Owned,
        Found::Marked(m) => Refuse(Refusal::OtherClaim(m.clone())),
        Found::Unmarked { empty: true } if intent_ours => TakeOver(Basis::Intent),
        Found::Unmarked { empty: true } => Refuse(Refusal::Unclaimed),
        Found::Unmarked { empty: false } if intent_ours => Refuse(Refusal::WrittenBeforeMarked),
        Found::Unmarked { empty: false } => Refuse(Refusal::UnmarkedWithData),
    }
}

/// Why delete keeps a bucket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kept {
    /// It carries another claim's marker (this UID).
    OtherClaim(String),
    /// It is a state bucket of this provisioner.
    StateBucket,
    /// No marker, and nothing says it was made for this claim.
    Unmarked,
}

impl fmt::Display for Kept {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::OtherClaim(uid) => write!(f, "its ownership marker names claim UID {uid}"),
            Self::StateBucket => f.write_str("it is a state bucket of this provisioner"),
            Self::Unmarked => write!(
                f,
                "it has no ownership marker ({OWNER_MARKER_KEY}) and no creation intent of this claim, so it was not created for this claim"
            ),
        }
    }
}

/// What delete does with a bucket name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeleteStep {
    /// Nothing to delete.
    Gone,
    /// It may not be read: fail (it may be ours, with credentials that
    /// lost their rights).
    Denied,
    /// It is this claim's: delete it (per the forceDelete rules).
    Delete(Basis),
    /// It is not this claim's: keep it.
    Keep(Kept),
}

/// The delete rule; arguments as for [`provision_step`], and `recorded`:
/// the claim's bound (not reserved) greenfield ObjectBucket names the
/// bucket. An intent or the record counts for a bucket with or without
/// objects (forceDelete then decides, as for a marked bucket). A marker of
/// another claim outweighs the record; a bucket without marker, intent or
/// record is kept, empty or not.
pub fn delete_step(
    found: &Found,
    claim_uid: &str,
    intent_ours: bool,
    recorded: bool,
) -> DeleteStep {
    use DeleteStep::{Delete, Denied, Gone, Keep};
    match found {
        Found::Absent => Gone,
        Found::Foreign => Denied,
        Found::Marked(m) if m == STATE_BUCKET_MARKER => Keep(Kept::StateBucket),
        Found::Marked(m) if m == claim_uid => Delete(Basis::Marker),
        Found::Marked(m) => Keep(Kept::OtherClaim(m.clone())),
        Found::Unmarked { .. } if intent_ours => Delete(Basis::Intent),
        Found::Unmarked { .. } if recorded => Delete(Basis::ObjectBucket),
        Found::Unmarked { .. } => Keep(Kept::Unmarked),
    }
}

// ---------------------------------------------------------------------------
// The store
// ---------------------------------------------------------------------------

/// What [`Store::create_owned`](super::client::Store::create_owned) did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Creation {
    /// Created the bucket and marked it.
    Created,
    /// The bucket was already marked for the claim (an earlier attempt).
    Existing,
    /// The bucket existed without a marker and is the claim's for this
    /// reason: marked now.
    TakenOver(Basis),
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

/// The permanent error for a bucket that exists and is not this claim's.
pub fn not_ours(bucket: &str, other_claim_uid: Option<&str>) -> ProvisionError {
    let whose = match other_claim_uid {
        Some(uid) => format!(" (it was created for the claim with UID {uid})"),
        None => String::new(),
    };
    ProvisionError::permanent(format!(
        "bucket {bucket:?} exists and was not created for this claim{whose}: use generateBucketName, or another bucketName; to share an existing bucket, use a StorageClass with the bucketName parameter (for a COSI BucketClaim: ask an administrator for a Bucket with existingBucketID)"
    ))
}

/// The permanent error for an empty, unmarked bucket that nothing records
/// as made for this claim: it may be someone else's.
pub fn unclaimed(bucket: &str) -> ProvisionError {
    ProvisionError::permanent(format!(
        "bucket {bucket:?} exists and was not created for this claim: it is empty but has no ownership marker and no creation intent of this claim, so it may be someone else's; use generateBucketName or another bucketName, or a StorageClass with the bucketName parameter to share it (for a COSI BucketClaim: ask an administrator for a Bucket with existingBucketID). If a provisioner version that recorded no intents created it for this claim and was interrupted, delete the empty bucket: the claim is retried"
    ))
}

/// The permanent error for a claim asking for the state bucket.
pub fn reserved(bucket: &str) -> ProvisionError {
    ProvisionError::permanent(format!(
        "bucket {bucket:?} is the provisioner's state bucket (--state-bucket, OBC_STATE_BUCKET) and is never handed to a claim: use generateBucketName or another bucket name"
    ))
}

/// The permanent error for deleting a bucket that may not be read.
pub fn denied(bucket: &str) -> ProvisionError {
    ProvisionError::permanent(format!(
        "access to bucket {bucket:?} is denied, so whether it was created for this claim cannot be told: check that the admin Secret named by the class (the StorageClass, or COSI's BucketClass) holds credentials allowed to read it; if the bucket belongs to another account, it was not this claim's"
    ))
}

/// The permanent error for deleting a bucket that still holds objects,
/// worded for an ObjectBucketClaim (its StorageClass); its source is
/// `BucketNotEmpty`, so a caller that knows the request came from COSI
/// words it so ([`not_empty_cosi`]).
pub fn not_empty(bucket: &str) -> ProvisionError {
    ProvisionError::permanent(format!(
        "bucket {bucket} is not empty: empty it, or set {FORCE_DELETE}: \"true\" on the StorageClass"
    ))
    .with_source(BucketNotEmpty)
}

/// [`not_empty`] for a COSI Bucket: its parameters were copied from its
/// BucketClass when it was made and cannot change, so emptying the bucket
/// is the way on.
pub fn not_empty_cosi(bucket: &str) -> ProvisionError {
    ProvisionError::permanent(format!(
        "bucket {bucket} is not empty: empty it, and the deletion continues (a bucket's objects are deleted with it only if its BucketClass set {FORCE_DELETE}: \"true\" when the Bucket was made)"
    ))
    .with_source(BucketNotEmpty)
}

/// The source of [`not_empty`]'s error.
#[derive(Debug)]
pub struct BucketNotEmpty;

impl fmt::Display for BucketNotEmpty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the bucket is not empty")
    }
}

impl std::error::Error for BucketNotEmpty {}

/// Whether `err` is [`not_empty`]'s.
pub fn is_not_empty(err: &ProvisionError) -> bool {
    std::error::Error::source(err).is_some_and(|s| s.is::<BucketNotEmpty>())
}

#[cfg(test)]
#[path = "rules_tests.rs"]
mod tests;
