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
//! created for that claim; one without was not made by this provisioner
//! (except by versions older than the intent, for which a name the library
//! generated for the claim still counts: see
//! [`S3Provisioner`](crate::s3::S3Provisioner)).
//!
//! The rules are the pure functions [`provision_step`] and [`delete_step`];
//! [`Store::create_owned`] and [`Store::delete_owned`] gather what they need
//! from the store and carry their answer out. A bucket that holds any object
//! and no marker is never taken over, nor deleted, without an intent.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use aws_sdk_s3::config::{
    BehaviorVersion, Region, RequestChecksumCalculation, ResponseChecksumValidation,
};
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{
    BucketLocationConstraint, CreateBucketConfiguration, Delete, ObjectIdentifier, Tag, Tagging,
};
use lib_provisioner::{Credentials, ProvisionError};
use tracing::{debug, info, warn};

use crate::errors::{FailureKind, StoreFailure};
use crate::intents::KubeIntents;
use crate::params::{DEFAULT_REGION, FORCE_DELETE, StoreEndpoint};

/// The bucket tag naming the claim (UID) a bucket was created for.
pub const OWNER_TAG: &str = "objectbucket.io/claim-uid";
/// The bucket tag naming the claim (`namespace/name`), for humans.
pub const CLAIM_TAG: &str = "objectbucket.io/claim";

/// Key of the object recording which claim a bucket was created for.
pub const OWNER_MARKER_KEY: &str = ".obc-owner";
/// User metadata on the marker and on intents naming the claim, for humans.
const OWNER_CLAIM_METADATA: &str = "obc-claim";
/// The state bucket used when none is configured (`--state-bucket`).
pub const DEFAULT_STATE_BUCKET: &str = "obc-provisioner-state";
/// The marker content of a state bucket. No claim UID looks like it, so no
/// claim ever owns, takes over or deletes a state bucket.
pub const STATE_BUCKET_MARKER: &str = "obc-provisioner-state-bucket";
/// Prefix of the intents in the state bucket.
pub const INTENT_PREFIX: &str = "intents/";
/// Keys per DeleteObjects call (the S3 maximum) and per listing page.
const PAGE: i32 = 1000;

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

/// Why a bucket without a marker belongs to a claim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Basis {
    /// It carries the claim's marker.
    Marker,
    /// The state bucket holds this claim's intent to create it.
    Intent,
    /// The library generated its name for this claim (recorded on the
    /// claim before the bucket is created, with a random suffix): a
    /// creation interrupted by a version that wrote no intent.
    GeneratedName,
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
            Self::GeneratedName => "the library generated its name for the claim",
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
    /// No marker, empty, and nothing says it was made for this claim: it
    /// may be someone else's.
    Unclaimed,
    /// This claim's intent says it was created for the claim, but objects
    /// were written to it before it got its marker.
    WrittenBeforeMarked,
}

impl Refusal {
    /// The permanent error the claim shows.
    pub fn into_error(self, bucket: &str, owner: &Owner<'_>) -> ProvisionError {
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
    fn keeps_intent(&self) -> bool {
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

/// Whether the rules need to know if the library generated the bucket's
/// name for the claim (a read of the claim): only for an empty, unmarked
/// bucket without an intent of this claim.
pub fn needs_generated(found: &Found, intent_ours: bool) -> bool {
    *found == (Found::Unmarked { empty: true }) && !intent_ours
}

/// The provision rule. `intent_ours`: the state bucket holds this claim's
/// intent for the bucket; `generated`: the library generated the name for
/// this claim (only asked when [`needs_generated`]).
pub fn provision_step(
    found: &Found,
    claim_uid: &str,
    intent_ours: bool,
    generated: bool,
) -> ProvisionStep {
    use ProvisionStep::{Create, Owned, Refuse, TakeOver};
    match found {
        Found::Absent => Create,
        Found::Foreign => Refuse(Refusal::Foreign),
        Found::Marked(m) if m == STATE_BUCKET_MARKER => Refuse(Refusal::StateBucket),
        Found::Marked(m) if m == claim_uid => Owned,
        Found::Marked(m) => Refuse(Refusal::OtherClaim(m.clone())),
        Found::Unmarked { empty: true } if intent_ours => TakeOver(Basis::Intent),
        Found::Unmarked { empty: true } if generated => TakeOver(Basis::GeneratedName),
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
/// bucket. A generated name only counts for an empty bucket; an intent or
/// the record also for one holding objects (forceDelete then decides, as for
/// a marked bucket). A marker of another claim outweighs the record.
pub fn delete_step(
    found: &Found,
    claim_uid: &str,
    intent_ours: bool,
    generated: bool,
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
        Found::Unmarked { empty: true } if generated => Delete(Basis::GeneratedName),
        Found::Unmarked { .. } => Keep(Kept::Unmarked),
    }
}

// ---------------------------------------------------------------------------
// The store
// ---------------------------------------------------------------------------

/// What [`Store::create_owned`] did.
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

/// The state bucket of one store, checked once per [`Store`].
#[derive(Debug)]
struct StateBucket {
    name: String,
    ready: AtomicBool,
    checking: tokio::sync::Mutex<()>,
}

impl StateBucket {
    fn new(name: &str) -> Arc<Self> {
        Arc::new(Self {
            name: name.to_owned(),
            ready: AtomicBool::new(false),
            checking: tokio::sync::Mutex::new(()),
        })
    }
}

/// Where a store records ownership and creation intents.
#[derive(Clone, Debug)]
enum Records {
    /// A marker object in the bucket, intents in the state bucket.
    Marker,
    /// A bucket tag, intents as ConfigMaps.
    Tags(Box<KubeIntents>),
}

/// An S3 store reached with one set of credentials.
#[derive(Clone, Debug)]
pub struct Store {
    client: aws_sdk_s3::Client,
    region: String,
    state: Arc<StateBucket>,
    records: Records,
}

impl Store {
    /// A client for `endpoint`: path-style addressing, static credentials,
    /// checksums only where S3 requires them (for non-AWS stores). Its
    /// state bucket is [`DEFAULT_STATE_BUCKET`] (see
    /// [`with_state_bucket`](Self::with_state_bucket)); buckets are created
    /// in `region`.
    pub fn new(endpoint: &StoreEndpoint, region: &str, credentials: &Credentials) -> Self {
        let credentials = aws_credential_types::Credentials::new(
            &credentials.access_key_id,
            &credentials.secret_access_key,
            None,
            None,
            "storageclass-admin-secret",
        );
        let timeouts = aws_sdk_s3::config::timeout::TimeoutConfig::builder()
            .connect_timeout(Duration::from_secs(10))
            .operation_attempt_timeout(Duration::from_secs(60))
            .build();
        let config = aws_sdk_s3::config::Builder::new()
            .http_client(crate::http::s3_http_client())
            .behavior_version(BehaviorVersion::latest())
            .endpoint_url(&endpoint.url)
            .region(Region::new(region.to_owned()))
            .credentials_provider(credentials)
            .force_path_style(true)
            .request_checksum_calculation(RequestChecksumCalculation::WhenRequired)
            .response_checksum_validation(ResponseChecksumValidation::WhenRequired)
            .timeout_config(timeouts)
            .build();
        Self {
            client: aws_sdk_s3::Client::from_conf(config),
            region: region.to_owned(),
            state: StateBucket::new(DEFAULT_STATE_BUCKET),
            records: Records::Marker,
        }
    }

    /// Records ownership as the bucket tag [`OWNER_TAG`] and intents with
    /// `intents`: no marker object and no state bucket.
    pub fn with_tag_ownership(mut self, intents: KubeIntents) -> Self {
        self.records = Records::Tags(Box::new(intents));
        self
    }

    /// Whether ownership is recorded in bucket tags.
    pub fn uses_tags(&self) -> bool {
        matches!(self.records, Records::Tags(_))
    }

    /// Keeps this store's intents in bucket `name` (created on first use).
    pub fn with_state_bucket(mut self, name: &str) -> Self {
        self.state = StateBucket::new(name);
        self
    }

    /// The name of this store's state bucket.
    pub fn state_bucket(&self) -> &str {
        &self.state.name
    }

    /// Creates `bucket` for `owner`, or confirms that it already was.
    ///
    /// `generated` says whether the library generated the name for this
    /// claim; it is only called for an empty, unmarked bucket without an
    /// intent of this claim. Errors: permanent when the bucket is not the
    /// claim's ([`Refusal`]) or is the state bucket; retryable while another
    /// claim's creation of the same name is unfinished; otherwise as
    /// classified.
    pub async fn create_owned<F, Fut>(
        &self,
        bucket: &str,
        owner: &Owner<'_>,
        generated: F,
    ) -> Result<Creation, ProvisionError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<bool, ProvisionError>>,
    {
        if !self.uses_tags() {
            if bucket == self.state.name {
                return Err(reserved(bucket));
            }
            self.ensure_state_bucket().await?;
        }
        let mut found = self.find(bucket, true).await.map_err(into_error)?;
        let intent_ours = if found == Found::Absent {
            self.record_intent(bucket, owner).await?;
            match self.create_bucket(bucket).await {
                Ok(true) => {
                    let marked = self.mark(bucket, owner).await.map(|()| Creation::Created);
                    return self.settle_intent(bucket, marked, false).await;
                }
                // An earlier attempt's CreateBucket (or the SDK's retry of
                // this one) created it: decide below, with the intent.
                Ok(false) => found = self.find(bucket, false).await.map_err(into_error)?,
                Err(e) => return self.settle_intent(bucket, Err(e), false).await,
            }
            true
        } else {
            self.intent(bucket)
                .await?
                .is_some_and(|r| r.claim_uid == owner.claim_uid)
        };
        let generated = needs_generated(&found, intent_ours) && generated().await?;
        let step = provision_step(&found, owner.claim_uid, intent_ours, generated);
        let mut keep_intent = false;
        let result = match step {
            ProvisionStep::Create => Err(ProvisionError::retryable(format!(
                "CreateBucket reported that bucket {bucket:?} exists, then it did not; retrying"
            ))),
            ProvisionStep::Owned => {
                debug!(bucket, "bucket exists and carries this claim's marker");
                Ok(Creation::Existing)
            }
            ProvisionStep::TakeOver(basis) => {
                info!(
                    bucket,
                    claim = owner.claim,
                    "bucket exists, is empty and has no ownership marker, and {basis}: an earlier attempt was interrupted before the marker was written; marking it"
                );
                self.mark(bucket, owner)
                    .await
                    .map(|()| Creation::TakenOver(basis))
            }
            ProvisionStep::Refuse(refusal) => {
                keep_intent = refusal.keeps_intent();
                Err(refusal.into_error(bucket, owner))
            }
        };
        if intent_ours {
            self.settle_intent(bucket, result, keep_intent).await
        } else {
            result
        }
    }

    /// After provisioning with this claim's intent: deletes it once the
    /// outcome is final (success, or a permanent refusal that no later
    /// attempt can turn around), keeps it when a retry is to come.
    async fn settle_intent(
        &self,
        bucket: &str,
        result: Result<Creation, ProvisionError>,
        keep: bool,
    ) -> Result<Creation, ProvisionError> {
        match result {
            Ok(creation) => {
                // Failing here retries the provision, which finds the
                // bucket marked and deletes the intent again.
                self.delete_intent(bucket).await?;
                Ok(creation)
            }
            Err(e) if e.is_retryable() || keep => Err(e),
            Err(e) => {
                if let Err(failed) = self.delete_intent(bucket).await {
                    // The claim's next attempt or its deletion removes it.
                    warn!(
                        bucket,
                        "could not delete this claim's creation intent: {failed}"
                    );
                }
                Err(e)
            }
        }
    }

    /// Deletes `bucket` if it is `claim_uid`'s ([`delete_step`]); with
    /// `force`, deletes its objects first. Deletes the claim's creation
    /// intent, if any, last. `recorded` as for [`delete_step`]; `generated`
    /// as for [`create_owned`](Self::create_owned).
    pub async fn delete_owned<F, Fut>(
        &self,
        bucket: &str,
        claim_uid: &str,
        force: bool,
        recorded: bool,
        generated: F,
    ) -> Result<Deletion, ProvisionError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<bool, ProvisionError>>,
    {
        let found = self.find(bucket, false).await.map_err(into_error)?;
        let intent_ours = self
            .intent(bucket)
            .await?
            .is_some_and(|r| r.claim_uid == claim_uid);
        let generated = needs_generated(&found, intent_ours) && generated().await?;
        let deletion = match delete_step(&found, claim_uid, intent_ours, generated, recorded) {
            DeleteStep::Gone => Deletion::AlreadyGone,
            DeleteStep::Denied => return Err(denied(bucket)),
            DeleteStep::Keep(kept) => Deletion::NotOurs(kept.to_string()),
            DeleteStep::Delete(basis) => {
                // A generated name only vouches for an empty bucket.
                let force = force && basis != Basis::GeneratedName;
                let objects = if force {
                    self.purge(bucket).await?
                } else {
                    let known_empty = found == (Found::Unmarked { empty: true });
                    if !known_empty
                        && !self
                            .is_empty(bucket)
                            .await
                            .map_err(StoreFailure::into_provision_error)?
                    {
                        return Err(not_empty(bucket));
                    }
                    0
                };
                self.delete_bucket(bucket, force).await?;
                if basis != Basis::Marker {
                    info!(
                        bucket,
                        "deleted a bucket without an ownership marker, left by an interrupted creation: {basis}"
                    );
                }
                Deletion::Deleted { objects }
            }
        };
        if intent_ours {
            self.delete_intent(bucket).await?;
        }
        Ok(deletion)
    }

    /// Whether `bucket` exists (HeadBucket).
    pub async fn exists(&self, bucket: &str) -> Result<bool, StoreFailure> {
        match self.client.head_bucket().bucket(bucket).send().await {
            Ok(_) => Ok(true),
            Err(e) => {
                let f = StoreFailure::from_sdk("HeadBucket", bucket, &e);
                if f.is_not_found() { Ok(false) } else { Err(f) }
            }
        }
    }

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
        if let Records::Tags(intents) = &self.records {
            return intents.get(bucket).await;
        }
        match self
            .read_record(&self.state.name, &intent_key(bucket))
            .await
        {
            Ok(record) => Ok(record),
            Err(f) if f.is_no_such_bucket() => Ok(None),
            Err(f) => Err(f.into_provision_error()),
        }
    }

    /// Whether the bucket holds no object other than the marker.
    pub async fn is_empty(&self, bucket: &str) -> Result<bool, StoreFailure> {
        let page = self
            .client
            .list_objects_v2()
            .bucket(bucket)
            .max_keys(2)
            .send()
            .await
            .map_err(|e| StoreFailure::from_sdk("ListObjectsV2", bucket, &e))?;
        Ok(page
            .contents()
            .iter()
            .all(|o| o.key() == Some(OWNER_MARKER_KEY)))
    }

    /// What `bucket` is to the rules. `head_first`: start with HeadBucket
    /// (cheapest when the bucket usually does not exist); else with the
    /// marker (cheapest when it usually does). Some stores (s3s-fs) answer
    /// NoSuchKey rather than NoSuchBucket for an object of a missing
    /// bucket; the listing then tells.
    async fn find(&self, bucket: &str, head_first: bool) -> Result<Found, StoreFailure> {
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
                Ok(Some(uid)) => return Ok(Found::Marked(uid)),
                // No tag: a marker of an older version still counts.
                Ok(None) => {}
                Err(f) if f.is_no_such_bucket() => return Ok(Found::Absent),
                Err(f) if denied(&f) => return Ok(Found::Foreign),
                Err(f) => return Err(f),
            }
        }
        match self.read_record(bucket, OWNER_MARKER_KEY).await {
            Ok(Some(marker)) => return Ok(Found::Marked(marker.claim_uid)),
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
    async fn read_record(&self, bucket: &str, key: &str) -> Result<Option<Record>, StoreFailure> {
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
    async fn put_record(
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
    async fn mark(&self, bucket: &str, owner: &Owner<'_>) -> Result<(), ProvisionError> {
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
        Ok(self
            .tags(bucket)
            .await?
            .into_iter()
            .find(|t| t.key() == OWNER_TAG)
            .map(|t| t.value().to_owned()))
    }

    /// The bucket's tags (none: empty).
    async fn tags(&self, bucket: &str) -> Result<Vec<Tag>, StoreFailure> {
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

    /// Tags the bucket as `owner`'s, keeping its other tags. Not
    /// conditional: the intent (or the generated name) already decided that
    /// the bucket is this claim's, and the tag is read back.
    async fn put_owner_tag(&self, bucket: &str, owner: &Owner<'_>) -> Result<(), StoreFailure> {
        let tag = |k: &str, v: &str| {
            Tag::builder()
                .key(k)
                .value(v)
                .build()
                .map_err(|e| StoreFailure {
                    operation: "PutBucketTagging",
                    bucket: bucket.to_owned(),
                    kind: FailureKind::Request(e.to_string()),
                })
        };
        let mut set: Vec<Tag> = self
            .tags(bucket)
            .await?
            .into_iter()
            .filter(|t| t.key() != OWNER_TAG && t.key() != CLAIM_TAG)
            .collect();
        set.push(tag(OWNER_TAG, owner.claim_uid)?);
        set.push(tag(CLAIM_TAG, owner.claim)?);
        let tagging = Tagging::builder()
            .set_tag_set(Some(set))
            .build()
            .map_err(|e| StoreFailure {
                operation: "PutBucketTagging",
                bucket: bucket.to_owned(),
                kind: FailureKind::Request(e.to_string()),
            })?;
        self.client
            .put_bucket_tagging()
            .bucket(bucket)
            .tagging(tagging)
            .send()
            .await
            .map(drop)
            .map_err(|e| StoreFailure::from_sdk("PutBucketTagging", bucket, &e))
    }

    /// Records `owner`'s intent to create `bucket`, unless it is recorded
    /// already. Another claim's intent is a retryable error: its creation
    /// is unfinished (it then owns the bucket, or gives the name up).
    async fn record_intent(&self, bucket: &str, owner: &Owner<'_>) -> Result<(), ProvisionError> {
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
    async fn delete_intent(&self, bucket: &str) -> Result<(), ProvisionError> {
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
    async fn ensure_state_bucket(&self) -> Result<(), ProvisionError> {
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
        };
        let unusable = |why: String| {
            ProvisionError::permanent(format!(
                "bucket {name:?} cannot be the provisioner's state bucket: {why}. Choose another name with --state-bucket (OBC_STATE_BUCKET)"
            ))
        };
        match self.find(name, false).await.map_err(into_error)? {
            Found::Marked(m) if m == STATE_BUCKET_MARKER => {}
            Found::Marked(uid) => {
                return Err(unusable(format!(
                    "its ownership marker names claim UID {uid}, so it is a claim's bucket"
                )));
            }
            Found::Foreign => {
                return Err(unusable(
                    "access is denied: it belongs to another account, or the admin credentials may not read it (check the admin Secret named by the StorageClass)".into(),
                ));
            }
            Found::Unmarked { empty: false } => {
                return Err(unusable(format!(
                    "it exists, holds objects and has no marker {OWNER_MARKER_KEY}. If it is this provisioner's state bucket and lost its marker, write an object {OWNER_MARKER_KEY} holding {STATE_BUCKET_MARKER} into it instead"
                )));
            }
            found @ (Found::Absent | Found::Unmarked { empty: true }) => {
                if found == Found::Absent {
                    self.create_bucket(name).await?;
                }
                self.put_record(name, OWNER_MARKER_KEY, &us)
                    .await
                    .map_err(StoreFailure::into_provision_error)?;
                match self.owner(name).await.map_err(into_error)? {
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

    /// CreateBucket in this store's region. `Ok(false)`: it exists already.
    async fn create_bucket(&self, bucket: &str) -> Result<bool, ProvisionError> {
        let mut create = self.client.create_bucket().bucket(bucket);
        if self.region != DEFAULT_REGION {
            create = create.create_bucket_configuration(
                CreateBucketConfiguration::builder()
                    .location_constraint(BucketLocationConstraint::from(self.region.as_str()))
                    .build(),
            );
        }
        match create.send().await {
            Ok(_) => Ok(true),
            Err(e) => {
                let f = StoreFailure::from_sdk("CreateBucket", bucket, &e);
                // BucketAlreadyOwnedByYou: ours (the marker says for whom).
                // BucketAlreadyExists: another account's on AWS; s3s-fs and
                // some other stores answer it for their own buckets too.
                if matches!(
                    f.code(),
                    Some("BucketAlreadyOwnedByYou" | "BucketAlreadyExists")
                ) {
                    Ok(false)
                } else {
                    Err(f.into_provision_error())
                }
            }
        }
    }
    /// Deletes every object but the marker, page by page.
    async fn purge(&self, bucket: &str) -> Result<u64, ProvisionError> {
        let mut deleted = 0u64;
        let mut token: Option<String> = None;
        loop {
            let page = self
                .client
                .list_objects_v2()
                .bucket(bucket)
                .max_keys(PAGE)
                .set_continuation_token(token.take())
                .send()
                .await
                .map_err(|e| {
                    StoreFailure::from_sdk("ListObjectsV2", bucket, &e).into_provision_error()
                })?;
            let keys: Vec<ObjectIdentifier> = page
                .contents()
                .iter()
                .filter_map(|o| o.key())
                .filter(|k| *k != OWNER_MARKER_KEY)
                .map(|k| ObjectIdentifier::builder().key(k).build())
                .collect::<Result<_, _>>()
                .map_err(|e| {
                    ProvisionError::permanent(format!(
                        "could not build a DeleteObjects request: {e}"
                    ))
                })?;
            if !keys.is_empty() {
                let count = keys.len() as u64;
                let delete = Delete::builder()
                    .set_objects(Some(keys))
                    .quiet(true)
                    .build()
                    .map_err(|e| {
                        ProvisionError::permanent(format!(
                            "could not build a DeleteObjects request: {e}"
                        ))
                    })?;
                let out = self
                    .client
                    .delete_objects()
                    .bucket(bucket)
                    .delete(delete)
                    .send()
                    .await
                    .map_err(|e| {
                        StoreFailure::from_sdk("DeleteObjects", bucket, &e).into_provision_error()
                    })?;
                if let Some(first) = out.errors().first() {
                    let code = first.code().unwrap_or("unknown");
                    let message = format!(
                        "S3 DeleteObjects on bucket {bucket:?} could not delete {} of {count} objects (first: {:?}: {code} {})",
                        out.errors().len(),
                        first.key().unwrap_or_default(),
                        first.message().unwrap_or_default()
                    );
                    return Err(if code == "AccessDenied" {
                        ProvisionError::permanent(format!(
                            "{message}; check that the admin credentials may delete objects"
                        ))
                    } else {
                        ProvisionError::retryable(message)
                    });
                }
                deleted += count;
            }
            match page.next_continuation_token() {
                Some(next) if page.is_truncated() == Some(true) => token = Some(next.to_owned()),
                _ => break,
            }
        }
        if deleted > 0 {
            info!(
                bucket,
                objects = deleted,
                "deleted the bucket's objects ({FORCE_DELETE})"
            );
        }
        Ok(deleted)
    }

    /// DeleteBucket, removing the marker first if the store insists on an
    /// empty bucket. The marker stays until the last moment, so that an
    /// interrupted deletion still knows whose bucket it is.
    async fn delete_bucket(&self, bucket: &str, force: bool) -> Result<(), ProvisionError> {
        let mut marker_removed = false;
        loop {
            let err = match self.client.delete_bucket().bucket(bucket).send().await {
                Ok(_) => return Ok(()),
                Err(e) => StoreFailure::from_sdk("DeleteBucket", bucket, &e),
            };
            if err.is_not_found() {
                return Ok(());
            }
            if err.code() != Some("BucketNotEmpty") {
                return Err(err.into_provision_error());
            }
            if !self
                .is_empty(bucket)
                .await
                .map_err(StoreFailure::into_provision_error)?
            {
                // Objects appeared after the emptiness check or the purge.
                return Err(if force {
                    ProvisionError::retryable(format!(
                        "objects were written to bucket {bucket:?} while it was being deleted; retrying"
                    ))
                } else {
                    not_empty(bucket)
                });
            }
            if marker_removed {
                warn!(
                    bucket,
                    "bucket still is not empty after its objects and marker were deleted (object versions?)"
                );
                return Err(ProvisionError::permanent(format!(
                    "bucket {bucket:?} still holds data that ListObjectsV2 does not show (object versions or delete markers of a versioned bucket): delete them; the deletion then resumes"
                )));
            }
            self.client
                .delete_object()
                .bucket(bucket)
                .key(OWNER_MARKER_KEY)
                .send()
                .await
                .map_err(|e| {
                    StoreFailure::from_sdk("DeleteObject", bucket, &e).into_provision_error()
                })?;
            marker_removed = true;
        }
    }
}

fn into_error(f: StoreFailure) -> ProvisionError {
    f.into_provision_error()
}

/// The permanent error for a bucket that exists and is not this claim's.
pub fn not_ours(bucket: &str, other_claim_uid: Option<&str>) -> ProvisionError {
    let whose = match other_claim_uid {
        Some(uid) => format!(" (it was created for the claim with UID {uid})"),
        None => String::new(),
    };
    ProvisionError::permanent(format!(
        "bucket {bucket:?} exists and was not created for this claim{whose}: use generateBucketName, or another bucketName; to share an existing bucket, use a StorageClass with the bucketName parameter"
    ))
}

/// The permanent error for an empty, unmarked bucket that nothing records
/// as made for this claim: it may be someone else's.
pub fn unclaimed(bucket: &str) -> ProvisionError {
    ProvisionError::permanent(format!(
        "bucket {bucket:?} exists and was not created for this claim: it is empty but has no ownership marker and no creation intent of this claim, so it may be someone else's; use generateBucketName or another bucketName, or a StorageClass with the bucketName parameter to share it. If a provisioner version that recorded no intents created it for this claim and was interrupted, delete the empty bucket: the claim is retried"
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
        "access to bucket {bucket:?} is denied, so whether it was created for this claim cannot be told: check that the admin Secret named by the StorageClass holds credentials allowed to read it; if the bucket belongs to another account, it was not this claim's"
    ))
}

/// The permanent error for deleting a bucket that still holds objects.
pub fn not_empty(bucket: &str) -> ProvisionError {
    ProvisionError::permanent(format!(
        "bucket {bucket} is not empty: empty it, or set {FORCE_DELETE}: \"true\" on the StorageClass"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    const UID: &str = "uid-a";
    const OWNER: Owner<'static> = Owner {
        claim_uid: UID,
        claim: "ns/a",
    };

    #[test]
    fn teardown_messages_say_how_to_fix_them() {
        let e = not_empty("photos-1");
        assert!(!e.is_retryable());
        assert_eq!(
            e.to_string(),
            "bucket photos-1 is not empty: empty it, or set forceDelete: \"true\" on the StorageClass"
        );
        let e = not_ours("photos-1", Some("uid-2"));
        assert!(!e.is_retryable());
        assert!(
            e.to_string()
                .contains("exists and was not created for this claim"),
            "{e}"
        );
        assert!(e.to_string().contains("uid-2"), "{e}");
        for e in [reserved("s"), denied("b"), unclaimed("b")] {
            assert!(!e.is_retryable(), "{e}");
        }
        assert!(reserved("s").to_string().contains("--state-bucket"));
        assert!(denied("b").to_string().contains("admin Secret"));
    }

    #[test]
    fn refusals_are_permanent_and_say_why() {
        for (refusal, text) in [
            (Refusal::OtherClaim("uid-b".into()), "uid-b"),
            (Refusal::StateBucket, "state bucket"),
            (Refusal::Foreign, "was not created for this claim"),
            (Refusal::UnmarkedWithData, "was not created for this claim"),
            (Refusal::Unclaimed, "no creation intent"),
            (Refusal::WrittenBeforeMarked, "holding uid-a"),
        ] {
            let e = refusal.clone().into_error("b", &OWNER);
            assert!(!e.is_retryable(), "{refusal:?}");
            assert!(e.to_string().contains(text), "{refusal:?}: {e}");
        }
    }

    fn marked(uid: &str) -> Found {
        Found::Marked(uid.into())
    }
    const EMPTY: Found = Found::Unmarked { empty: true };
    const DATA: Found = Found::Unmarked { empty: false };

    #[test]
    fn provision_rule_table() {
        use ProvisionStep::*;
        // (found, intent ours, generated for the claim) -> step
        let table = [
            (Found::Absent, false, false, Create),
            (Found::Absent, true, false, Create),
            (marked(UID), false, false, Owned),
            (marked(UID), true, false, Owned),
            (
                marked("uid-b"),
                true,
                true,
                Refuse(Refusal::OtherClaim("uid-b".into())),
            ),
            (
                marked(STATE_BUCKET_MARKER),
                true,
                true,
                Refuse(Refusal::StateBucket),
            ),
            (Found::Foreign, true, true, Refuse(Refusal::Foreign)),
            (EMPTY, true, false, TakeOver(Basis::Intent)),
            (EMPTY, true, true, TakeOver(Basis::Intent)),
            (EMPTY, false, true, TakeOver(Basis::GeneratedName)),
            (EMPTY, false, false, Refuse(Refusal::Unclaimed)),
            (DATA, true, true, Refuse(Refusal::WrittenBeforeMarked)),
            (DATA, false, true, Refuse(Refusal::UnmarkedWithData)),
            (DATA, false, false, Refuse(Refusal::UnmarkedWithData)),
        ];
        for (found, intent, generated, step) in table {
            assert_eq!(
                provision_step(&found, UID, intent, generated),
                step,
                "{found:?} intent={intent} generated={generated}"
            );
        }
    }

    #[test]
    fn delete_rule_table() {
        use DeleteStep::*;
        let table = [
            (Found::Absent, true, true, Gone),
            (Found::Foreign, true, true, Denied),
            (marked(UID), false, false, Delete(Basis::Marker)),
            (
                marked("uid-b"),
                true,
                true,
                Keep(Kept::OtherClaim("uid-b".into())),
            ),
            (
                marked(STATE_BUCKET_MARKER),
                true,
                true,
                Keep(Kept::StateBucket),
            ),
            (EMPTY, true, false, Delete(Basis::Intent)),
            (DATA, true, false, Delete(Basis::Intent)),
            (EMPTY, false, true, Delete(Basis::GeneratedName)),
            (DATA, false, true, Keep(Kept::Unmarked)),
            (EMPTY, false, false, Keep(Kept::Unmarked)),
        ];
        // The ObjectBucket's record vouches for an unmarked bucket, with or
        // without objects, and never outweighs another claim's marker.
        for (found, step) in [
            (DATA, Delete(Basis::ObjectBucket)),
            (EMPTY, Delete(Basis::ObjectBucket)),
            (
                Found::Marked("other".into()),
                Keep(Kept::OtherClaim("other".into())),
            ),
            (Found::Absent, DeleteStep::Gone),
        ] {
            assert_eq!(
                delete_step(&found, UID, false, false, true),
                step,
                "{found:?}"
            );
        }
        for (found, intent, generated, step) in table {
            assert_eq!(
                delete_step(&found, UID, intent, generated, false),
                step,
                "{found:?} intent={intent} generated={generated}"
            );
        }
    }

    #[test]
    fn the_claim_is_read_only_for_an_empty_unmarked_bucket_without_intent() {
        for found in [Found::Absent, Found::Foreign, marked(UID), DATA] {
            assert!(!needs_generated(&found, false), "{found:?}");
        }
        assert!(needs_generated(&EMPTY, false));
        assert!(!needs_generated(&EMPTY, true));
    }

    /// An in-memory store: buckets (marker, object count) and intents.
    #[derive(Clone, Debug, Default, PartialEq, Eq)]
    struct Table {
        buckets: BTreeMap<String, (Option<String>, usize)>,
        intents: BTreeMap<String, String>,
    }

    /// How a modelled attempt ended.
    #[derive(Clone, Debug, PartialEq, Eq)]
    enum Outcome {
        /// The process died after the write it was to die after.
        Crashed,
        /// Provisioned / deleted (or nothing to delete).
        Done,
        /// Retryable: another claim's creation is unfinished.
        Retry,
        /// Provision refused.
        Refused(Refusal),
        /// Delete kept the bucket.
        Kept(Kept),
    }

    /// Counts writes and says when the attempt dies.
    struct Writes {
        done: usize,
        crash_after: Option<usize>,
    }

    impl Writes {
        fn new(crash_after: Option<usize>) -> Self {
            Self {
                done: 0,
                crash_after,
            }
        }

        /// Records a write; true if the process dies right after it.
        fn dies(&mut self) -> bool {
            self.done += 1;
            self.crash_after == Some(self.done - 1)
        }
    }

    impl Table {
        fn found(&self, bucket: &str) -> Found {
            match self.buckets.get(bucket) {
                None => Found::Absent,
                Some((Some(m), _)) => Found::Marked(m.clone()),
                Some((None, n)) => Found::Unmarked { empty: *n == 0 },
            }
        }

        fn intent_of(&self, bucket: &str, uid: &str) -> bool {
            self.intents.get(bucket).is_some_and(|u| u == uid)
        }

        /// One provision attempt, in the order of `Store::create_owned`,
        /// dying after write number `crash_after` (`None`: never).
        fn provision(
            &mut self,
            bucket: &str,
            uid: &str,
            generated: bool,
            crash_after: Option<usize>,
        ) -> Outcome {
            let mut w = Writes::new(crash_after);
            let mut found = self.found(bucket);
            let mut intent = self.intent_of(bucket, uid);
            if found == Found::Absent {
                // If-None-Match: *
                if !self.intents.contains_key(bucket) {
                    self.intents.insert(bucket.into(), uid.into());
                    if w.dies() {
                        return Outcome::Crashed;
                    }
                }
                if !self.intent_of(bucket, uid) {
                    return Outcome::Retry;
                }
                intent = true;
                self.buckets.entry(bucket.into()).or_insert((None, 0));
                if w.dies() {
                    return Outcome::Crashed;
                }
                found = self.found(bucket);
            }
            let generated = needs_generated(&found, intent) && generated;
            let outcome = match provision_step(&found, uid, intent, generated) {
                ProvisionStep::Create => unreachable!("the bucket exists now"),
                ProvisionStep::Owned => Outcome::Done,
                ProvisionStep::TakeOver(_) => {
                    if let Some(b) = self.buckets.get_mut(bucket) {
                        b.0.get_or_insert_with(|| uid.to_owned());
                    }
                    if w.dies() {
                        return Outcome::Crashed;
                    }
                    match self.found(bucket) {
                        Found::Marked(m) if m == uid => Outcome::Done,
                        Found::Marked(m) => Outcome::Refused(Refusal::OtherClaim(m)),
                        other => unreachable!("{other:?}"),
                    }
                }
                ProvisionStep::Refuse(r) => Outcome::Refused(r),
            };
            let keep = matches!(&outcome, Outcome::Refused(r) if r.keeps_intent());
            if intent && !keep {
                self.intents.remove(bucket);
                if w.dies() {
                    return Outcome::Crashed;
                }
            }
            outcome
        }

        /// One forced delete attempt, in the order of `Store::delete_owned`.
        fn delete(
            &mut self,
            bucket: &str,
            uid: &str,
            generated: bool,
            crash_after: Option<usize>,
        ) -> Outcome {
            let mut w = Writes::new(crash_after);
            let found = self.found(bucket);
            let intent = self.intent_of(bucket, uid);
            let generated = needs_generated(&found, intent) && generated;
            let outcome = match delete_step(&found, uid, intent, generated, false) {
                DeleteStep::Delete(_) => {
                    self.buckets.remove(bucket);
                    if w.dies() {
                        return Outcome::Crashed;
                    }
                    Outcome::Done
                }
                DeleteStep::Gone => Outcome::Done,
                DeleteStep::Keep(k) => Outcome::Kept(k),
                DeleteStep::Denied => unreachable!("no foreign buckets here"),
            };
            if intent {
                self.intents.remove(bucket);
                if w.dies() {
                    return Outcome::Crashed;
                }
            }
            outcome
        }
    }

    /// A crash after each write of a provision (intent, CreateBucket,
    /// marker, intent deleted) converges on the next attempt, for an exact
    /// name (no generated-name rule); deleting the claim instead leaves
    /// nothing, even if that is interrupted too; another claim asking for
    /// the same name never gets the bucket.
    #[test]
    fn every_interrupted_provision_converges() {
        for crash_after in 0..4 {
            let mut t = Table::default();
            let first = t.provision("b", UID, false, Some(crash_after));
            assert_eq!(first, Outcome::Crashed, "write {crash_after}: {t:?}");
            let crashed = t.clone();

            let mut other = crashed.clone();
            let outcome = other.provision("b", "uid-b", false, None);
            assert_ne!(outcome, Outcome::Done, "write {crash_after}: {other:?}");

            assert_eq!(t.provision("b", UID, false, None), Outcome::Done);
            assert_eq!(t.found("b"), marked(UID), "write {crash_after}");
            assert!(t.intents.is_empty(), "write {crash_after}: {t:?}");
            assert_eq!(t.provision("b", UID, false, None), Outcome::Done);

            for delete_crash in [Some(0), Some(1), None] {
                let mut d = crashed.clone();
                if d.delete("b", UID, false, delete_crash) == Outcome::Crashed {
                    assert_eq!(d.delete("b", UID, false, None), Outcome::Done);
                }
                assert_eq!(d, Table::default(), "write {crash_after}");
            }
        }
    }

    /// Two claims creating one exact name, each dying at any write: on
    /// restart exactly one has the bucket, and no intent is left.
    #[test]
    fn racing_claims_with_crashes_end_with_one_owner() {
        for a_crash in 0..4 {
            for b_crash in 0..4 {
                let mut t = Table::default();
                t.provision("b", "uid-a", false, Some(a_crash));
                t.provision("b", "uid-b", false, Some(b_crash));
                let a = t.provision("b", "uid-a", false, None);
                let b = t.provision("b", "uid-b", false, None);
                let done = [&a, &b].iter().filter(|o| ***o == Outcome::Done).count();
                assert_eq!(done, 1, "crashes {a_crash}/{b_crash}: {a:?} {b:?} {t:?}");
                assert!(t.intents.is_empty(), "crashes {a_crash}/{b_crash}: {t:?}");
            }
        }
    }

    /// A bucket that existed before the claim (empty, unmarked): refused
    /// for an exact name, and no intent is written for it, so neither a
    /// retry nor the claim's deletion touches it. Left by a version without
    /// intents for a generated name: taken over, or deleted with the claim.
    #[test]
    fn an_existing_unmarked_bucket_needs_an_intent_or_a_generated_name() {
        let mut t = Table::default();
        t.buckets.insert("b".into(), (None, 0));
        let before = t.clone();
        assert_eq!(
            t.provision("b", UID, false, None),
            Outcome::Refused(Refusal::Unclaimed)
        );
        assert_eq!(t, before, "nothing written");
        assert_eq!(
            t.provision("b", UID, false, None),
            Outcome::Refused(Refusal::Unclaimed)
        );
        assert_eq!(
            t.delete("b", UID, false, None),
            Outcome::Kept(Kept::Unmarked)
        );
        assert_eq!(t, before, "kept");

        assert_eq!(t.provision("b", UID, true, None), Outcome::Done);
        assert_eq!(t.found("b"), marked(UID));
        let mut d = before.clone();
        assert_eq!(d.delete("b", UID, true, None), Outcome::Done);
        assert_eq!(d, Table::default());

        // Holding data: never, even for a generated name.
        let mut t = Table::default();
        t.buckets.insert("b".into(), (None, 3));
        assert_eq!(
            t.provision("b", UID, true, None),
            Outcome::Refused(Refusal::UnmarkedWithData)
        );
        assert_eq!(
            t.delete("b", UID, true, None),
            Outcome::Kept(Kept::Unmarked)
        );
    }
}
