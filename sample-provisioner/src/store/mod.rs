//! Bucket operations on an S3 store, with the ownership record and the
//! creation intent that make them safe to repeat and to interrupt.
//!
//! # Ownership record: a bucket tag, or a marker object
//!
//! On stores with bucket tagging (MinIO, RustFS, AWS, Ceph), a bucket
//! created for a claim carries the tag [`OWNER_TAG`] whose value is the
//! claim's UID, and intents are ConfigMaps in the provisioner's namespace
//! ([`crate::intents`]): nothing is written into the user's bucket and no
//! state bucket exists ([`Store::with_tag_ownership`], the StorageClass
//! default `ownership: tags`). A bucket marked by an older version (below)
//! still counts as marked.
//!
//! On stores without tagging (s3s-fs 0.14 implements neither
//! PutBucketTagging nor GetBucketTagging; `ownership: marker`), the bucket
//! holds an object [`OWNER_MARKER_KEY`] whose body is the claim's UID,
//! written with `If-None-Match: *`, so two claims racing for one bucket name
//! cannot both win, and read back before the bucket is used. The rest of
//! this section describes that mode; the tag mode follows the same rules
//! with the tag for the marker and a ConfigMap for the intent object.
//!
//! # Creation intent and the state bucket
//!
//! CreateBucket and the marker are two requests: a process that dies
//! between them leaves an empty bucket without a marker, which looks the
//! same as an empty bucket someone else made. So before CreateBucket the
//! provisioner records an *intent*: an object [`intent_key`]`(bucket)` in
//! its own state bucket ([`DEFAULT_STATE_BUCKET`], one per store, created on
//! first use and marked with [`STATE_BUCKET_MARKER`]), holding the claim's
//! UID. The intent is written only when the bucket does not exist, with
//! `If-None-Match: *`, and deleted once the marker is written (or when the
//! claim goes). An unmarked bucket with an intent for a claim was therefore
//! created for that claim; one without was not made by this provisioner for
//! it. A claim's annotations (the generated-name annotation included) never
//! count: the claim's owner can write them, and naming an empty bucket
//! someone else made would hand it over. An empty bucket left by a version
//! older than the intent is refused with a message that says to delete it.
//!
//! The rules are the pure functions [`provision_step`] and [`delete_step`];
//! [`Store::create_owned`] and [`Store::delete_owned`] gather what they need
//! from the store and carry their answer out. A bucket that holds any object
//! and no marker is never taken over, nor deleted, without an intent.
//!
//! # The reclaim policy, for the store sweep
//!
//! With tag ownership the bucket also records the reclaim (COSI: deletion)
//! policy it was created under ([`RECLAIM_TAG`]), and `Retain` once a
//! teardown keeps it ([`Store::record_kept`]). A bucket the sweep finds
//! without a live owner is deleted only when its tags, read again at that
//! moment, name the same owner and `Delete` ([`Store::delete_orphan`]).

// `Store`'s methods are spread over files that each use only the ones before
// them, so that no two depend on each other: `rules.rs` (the rules, no I/O),
// `client.rs` (the type and the requests that need no record), `records.rs`
// (the ownership records), `versions.rs` (deleting a versioned bucket's
// versions), `owned.rs` (creating and deleting a claim's bucket),
// `settings.rs` (versioning, lifecycle, policy, object lock), `tagged.rs`
// (what the sweep does with the tags). This module only
// re-exports.
mod client;
mod owned;
mod records;
mod rules;
mod settings;
mod tagged;
mod versions;

pub use self::client::{DEFAULT_STATE_BUCKET, Store};
pub use self::records::Tagged;
pub use self::rules::{
    Basis, Creation, DeleteStep, Deletion, Found, Kept, ProvisionStep, Refusal, delete_step,
    denied, is_not_empty, not_empty, not_empty_cosi, not_ours, provision_step, reserved, unclaimed,
};
// Defined in `crate::ownership` because the intent ConfigMaps use them too;
// this is their public path.
pub use crate::ownership::{
    CLAIM_KIND_TAG, CLAIM_TAG, ClaimKind, INTENT_PREFIX, OWNER_MARKER_KEY, OWNER_TAG, Owner,
    RECLAIM_TAG, Record, STATE_BUCKET_MARKER, SweepRecord, intent_key,
};
