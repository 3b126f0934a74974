//! The claim state machine as a pure function: from what is observed, the one
//! step to take next.
//!
//! Nothing here talks to the API or the object store, so every decision is
//! unit-tested. The executor ([`super::claim`]) observes, asks [`next_step`],
//! performs that step (one write or one provisioner call), records the
//! result in [`Observed`], and asks again, until [`Step::Done`] or a step
//! that stops the pass. After a crash the same observation leads to the same
//! step, which is what makes every step safe to repeat.

//!
//! The decisions are split by question: [`names`] (which bucket, which
//! ObjectBucket), [`teardown`] (what a deletion does), [`meta`] (reading
//! finalizers, labels, annotations and owners). This file holds the state
//! and the order of the steps of a live claim.

use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::core::provisioner::{BucketAccess, Revocation};
use crate::obc::api::{
    BUCKET_ORIGIN_ANNOTATION, BucketOrigin, BucketPhase, ObjectBucket, ObjectBucketClaim,
    ReclaimPolicy,
};

mod meta;
mod names;
pub(crate) mod records;
pub(crate) mod rotation;
mod step;
mod teardown;

pub(crate) use meta::{
    annotation, cached_fixed_bucket_name, claim_ref_matches, fixed_bucket_name, has_finalizer,
    has_label, owned_by,
};
use meta::{child_is_adopted, claim_status_is_bound, config_refused};
use names::brownfield_bucket;
pub(crate) use names::{
    BUCKET_NAME_ANNOTATION, HOLDER_CLAIM_ANNOTATION, MAX_OBJECT_NAME_LEN, bucket_name,
    object_bucket_name, record_name,
};
pub(crate) use records::holds_generation;
pub(crate) use step::Step;
pub(crate) use teardown::{cached_is_reserved, is_reserved, teardown_plan};

/// What the StorageClass lookup found.
#[derive(Clone, Debug)]
pub(crate) enum ClassState {
    /// The claim names no class.
    Unnamed,
    /// The named class does not exist (yet).
    NotFound(String),
    /// The class belongs to another provisioner.
    Foreign,
    /// The class is served by this provisioner.
    Ours(Box<StorageClass>),
}

/// Everything a decision depends on.
#[derive(Clone, Debug)]
pub(crate) struct Observed {
    pub claim: ObjectBucketClaim,
    pub class: ClassState,
    /// The ObjectBucket the claim binds (or would bind) to.
    pub ob: Option<ObjectBucket>,
    /// Metadata of the Secret named after the claim.
    pub secret: Option<ObjectMeta>,
    /// Metadata of the ConfigMap named after the claim.
    pub config_map: Option<ObjectMeta>,
    /// Another claim that holds the same greenfield bucket name first.
    pub name_holder: Option<String>,
    /// Access obtained from the provisioner during this pass.
    pub access: Option<BucketAccess>,
    /// Secret and ConfigMap contents were checked against `access` in this pass.
    pub secret_synced: bool,
    pub config_map_synced: bool,
    /// The Secret's data is not what the library wrote (see `drift`).
    pub secret_drifted: bool,
    /// The ConfigMap's data is not what the ObjectBucket's endpoint gives.
    pub config_map_drifted: bool,
    /// The access key id the Secret holds: read while a rotation is asked
    /// for or under way, and set by this pass's own Secret write. It only
    /// tells whether the Secret was switched; which key a rotation replaces
    /// comes from the ObjectBucket's record, never from here.
    pub secret_key_id: Option<String>,
    /// `access` was issued by the provisioner's `rotate` in this pass.
    pub rotated_now: bool,
    /// What the provisioner did with the rotation's previous key, in this
    /// pass.
    pub revocation: Option<Revocation>,
    /// The provisioner's teardown ran during this pass.
    pub torn_down: bool,
    /// Greenfield bucket names are held through a record the apiserver
    /// arbitrates (see `reconcile::bucket_names`): the controller was given
    /// a namespace for them.
    pub name_records: bool,
    /// This pass holds the claim's bucket name (took or found its record).
    pub name_held: bool,
    /// This pass released the claim's bucket name record (a deletion).
    pub name_released: bool,
    /// The apiserver dropped `spec.objectBucketName` when it was written (a
    /// CRD schema without the field): binding is known from the claimRef.
    pub bind_pruned: bool,
    /// This provisioner's `bucket-provisioner` label value.
    pub label: String,
    /// The bucket is due for a comparison with its applied config.
    pub config_check_due: bool,
}

impl Observed {
    /// A claim and its class, with nothing else seen or done yet.
    pub(crate) fn new(claim: ObjectBucketClaim, class: ClassState, label: String) -> Self {
        Self {
            claim,
            class,
            ob: None,
            secret: None,
            config_map: None,
            name_holder: None,
            access: None,
            secret_synced: false,
            config_map_synced: false,
            secret_drifted: false,
            config_map_drifted: false,
            secret_key_id: None,
            rotated_now: false,
            revocation: None,
            torn_down: false,
            name_records: false,
            name_held: false,
            name_released: false,
            bind_pruned: false,
            label,
            config_check_due: false,
        }
    }
}

/// A problem with the claim, as it is shown on the claim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Problem {
    /// CamelCase reason for the condition and the Event.
    pub reason: &'static str,
    /// What is wrong and how to fix it.
    pub message: String,
}

impl Problem {
    fn new(reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            reason,
            message: message.into(),
        }
    }
}

/// How the bucket name is known.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum BucketName {
    /// Already decided (spec, annotation, class or existing ObjectBucket).
    Known(String),
    /// To be generated from this prefix, and persisted before use.
    Generate(String),
}

/// The next step for a claim.
pub(crate) fn next_step(o: &Observed) -> Step {
    if o.claim.metadata.deletion_timestamp.is_some() {
        return teardown::next_deletion_step(o);
    }
    match validate(o) {
        Ok(valid) => live_step(o, valid),
        Err(step) => step,
    }
}

/// What a valid live claim resolves to.
struct Valid<'a> {
    /// `None` for a bound claim whose class is gone.
    class: Option<&'a StorageClass>,
    origin: BucketOrigin,
    name: BucketName,
    reclaim_policy: ReclaimPolicy,
}

/// Checks a live claim, in the order a user fixes things: its class, its
/// ObjectBucket, its bucket name, its reclaim policy, then name conflicts.
/// `Err` is the step that shows the problem (or ignores the claim).
fn validate(o: &Observed) -> Result<Valid<'_>, Step> {
    check_class_unchanged(o)?;
    let class = class_of(o)?;
    if let Some(name) = names::own_object_bucket_name(o) {
        return Err(Step::NameObjectBucket { name });
    }
    if let Some(ob) = &o.ob {
        check_object_bucket(o, ob)?;
    }
    let origin = origin(o, class);
    let name = bucket_name(o, class, origin).map_err(Step::Reject)?;
    let reclaim_policy = reclaim_policy(o, class).map_err(Step::Reject)?;
    if let Some(holder) = &o.name_holder
        && origin == BucketOrigin::Greenfield
        && o.ob.is_none()
    {
        return Err(Step::Reject(Problem::new(
            "BucketNameTaken",
            format!(
                "bucket {:?} is already claimed by {holder}: choose another spec.bucketName, or use spec.generateBucketName",
                match &name {
                    BucketName::Known(n) | BucketName::Generate(n) => n,
                }
            ),
        )));
    }
    if let Some(problem) = child_conflict(o) {
        return Err(Step::Reject(problem));
    }
    Ok(Valid {
        class,
        origin,
        name,
        reclaim_policy,
    })
}

/// The claim's class, `None` when a bound claim's class is gone (everything
/// needed is in the ObjectBucket), or the step that reports it.
fn class_of(o: &Observed) -> Result<Option<&StorageClass>, Step> {
    match &o.class {
        ClassState::Foreign => Err(Step::Ignore),
        ClassState::Ours(class) => Ok(Some(class.as_ref())),
        _ if bound_here(o) => Ok(None),
        ClassState::Unnamed => Err(Step::Reject(Problem::new(
            "MissingStorageClass",
            "spec.storageClassName is empty: set it to a StorageClass whose provisioner serves buckets",
        ))),
        ClassState::NotFound(name) => Err(Step::Wait(Problem::new(
            "StorageClassNotFound",
            format!(
                "StorageClass {name:?} does not exist: create it, or set spec.storageClassName to an existing class; the claim is retried when it appears"
            ),
        ))),
    }
}

/// The claim names the class its ObjectBucket records. Before bind a user
/// may still edit `spec.storageClassName`, while the ObjectBucket (reserved,
/// or created from the provisioner's answer) records the class its bucket
/// was made on, and every later step (update, rotation, teardown) follows
/// the ObjectBucket: a provision on the new class would make a bucket that
/// nothing records. Refused until the user sets the class back.
fn check_class_unchanged(o: &Observed) -> Result<(), Step> {
    let Some(ob) = o.ob.as_ref().filter(|ob| claim_ref_matches(ob, &o.claim)) else {
        return Ok(());
    };
    let recorded = ob.spec.storage_class_name.as_str();
    let wanted = o.claim.spec.storage_class_name.as_str();
    let ours = has_label(&ob.metadata, &o.label) || matches!(o.class, ClassState::Ours(_));
    if recorded.is_empty() || recorded == wanted || !ours {
        return Ok(());
    }
    Err(Step::Reject(Problem::new(
        "StorageClassChanged",
        format!(
            "spec.storageClassName was changed to {wanted:?}, but ObjectBucket {} records class {recorded:?}, on which bucket {:?} was reserved or provisioned for this claim: set spec.storageClassName back to {recorded:?}. To use class {wanted:?}, delete this claim (its bucket is torn down as class {recorded:?} says) and create a new one",
            object_bucket_name(&o.claim),
            ob.bucket_name().unwrap_or_default()
        ),
    )))
}

/// The ObjectBucket of the claim's name belongs to another claim (rejected),
/// or is being deleted (waited for).
fn check_object_bucket(o: &Observed, ob: &ObjectBucket) -> Result<(), Step> {
    let ob_name = object_bucket_name(&o.claim);
    if !claim_ref_matches(ob, &o.claim) {
        return Err(Step::Reject(Problem::new(
            "ObjectBucketTaken",
            object_bucket_taken(o, ob, &ob_name),
        )));
    }
    if ob.metadata.deletion_timestamp.is_some() {
        return Err(Step::Wait(Problem::new(
            "ObjectBucketDeleting",
            format!(
                "ObjectBucket {ob_name} is being deleted while its claim exists; it stays until the claim is deleted. Delete the claim to release the bucket"
            ),
        )));
    }
    Ok(())
}

/// The class's reclaim policy; a bound claim whose class is gone keeps the
/// one its ObjectBucket recorded.
fn reclaim_policy(o: &Observed, class: Option<&StorageClass>) -> Result<ReclaimPolicy, Problem> {
    let Some(class) = class else {
        return Ok(o
            .ob
            .as_ref()
            .map(|ob| ob.spec.reclaim_policy)
            .unwrap_or_default());
    };
    ReclaimPolicy::from_class(class.reclaim_policy.as_deref()).map_err(|message| {
        Problem::new(
            "InvalidReclaimPolicy",
            format!(
                "StorageClass {}: {message}",
                class.metadata.name.as_deref().unwrap_or_default()
            ),
        )
    })
}

/// The steps of a valid live claim: protect it, get its bucket and
/// ObjectBucket, write its children, bind.
fn live_step(o: &Observed, v: Valid<'_>) -> Step {
    // From here on the claim is valid and every write is ours.
    let generate_from = match &v.name {
        BucketName::Generate(prefix) => Some(prefix.clone()),
        BucketName::Known(_) => None,
    };
    let bind_to = names::bind_at_prepare(&o.claim);
    if !has_finalizer(&o.claim.metadata)
        || !has_label(&o.claim.metadata, &o.label)
        || generate_from.is_some()
    {
        return Step::PrepareClaim {
            generate_from,
            bind_to,
        };
    }
    let BucketName::Known(bucket_name) = v.name else {
        // Unreachable: PrepareClaim persisted the generated name above.
        return Step::PrepareClaim {
            generate_from,
            bind_to,
        };
    };
    // Two greenfield claims asking for one name at once both pass the
    // cache's check (name_holder); the apiserver lets only one create the
    // name's record, before anything is reserved or provisioned.
    if o.name_records && !o.name_held && o.ob.is_none() && v.origin == BucketOrigin::Greenfield {
        return Step::HoldBucketName { bucket_name };
    }
    let create = Step::CreateObjectBucket {
        bucket_name: bucket_name.clone(),
        origin: v.origin,
        reclaim_policy: v.reclaim_policy,
    };
    // The ObjectBucket comes first, reserved, in every pass that has none:
    // it is the durable record that a bucket may exist for the claim before
    // the provisioner runs. Should the claim vanish meanwhile (the apiserver
    // may still carry out a DELETE that raced the finalizer), it tells the
    // ObjectBucket reconciler what to tear down; should the provisioner fail
    // after creating something, it stays (see `obtain_access`).
    if o.ob.is_none() && o.access.is_none() {
        return create;
    }
    let reserved = o.ob.as_ref().is_some_and(is_reserved);
    let secret_needed = o.secret.is_none() || o.secret_drifted || is_deleting(o.secret.as_ref());
    // A rotation needs the library's record of the Secret's key; an older
    // ObjectBucket has none, and the Secret's word is the tenant's: the
    // provisioner's own answer (as for a repair) is recorded first.
    let key_unknown =
        o.ob.as_ref()
            .is_some_and(|ob| !reserved && rotation::needs_key_record(o, ob));
    if o.access.is_none() && (o.ob.is_none() || reserved || secret_needed || key_unknown) {
        return Step::ObtainAccess {
            bucket_name,
            origin: v.origin,
        };
    }
    let Some(ob) = &o.ob else {
        return create;
    };
    // The origin is recorded only when the class tells it: a guess written
    // into the annotation would outlive the reason for it.
    let record_origin = (v.class.is_some()
        && annotation(&ob.metadata, BUCKET_ORIGIN_ANNOTATION).is_none())
    .then_some(v.origin);
    if !has_finalizer(&ob.metadata) || !has_label(&ob.metadata, &o.label) || record_origin.is_some()
    {
        return Step::AdoptObjectBucket {
            origin: record_origin,
        };
    }
    if reserved {
        return Step::CompleteObjectBucket;
    }
    let missing = records::missing(ob, &o.claim, &o.class);
    if !missing.is_empty() {
        return Step::RecordObjectBucket { records: missing };
    }
    if records::access_unrecorded(o, ob) {
        return Step::RecordAccess;
    }
    children_step(o).unwrap_or_else(|| binding_step(o, ob))
}

/// The Secret and ConfigMap: written when missing or when fresh access was
/// obtained, adopted when another version wrote them.
fn children_step(o: &Observed) -> Option<Step> {
    // A child a user deleted is written anew once gone. One an older version
    // wrote with our finalizer would hang in Terminating: it is let go first.
    if is_deleting(o.secret.as_ref()) {
        return Some(Step::ReleaseSecret);
    }
    if is_deleting(o.config_map.as_ref()) {
        return Some(Step::ReleaseConfigMap);
    }
    if o.secret.is_none() && o.config_map.is_none() {
        return Some(Step::WriteChildren);
    }
    if o.secret.is_none() || (o.access.is_some() && !o.secret_synced) {
        return Some(Step::WriteSecret);
    }
    if o.secret
        .as_ref()
        .is_some_and(|s| !child_is_adopted(s, &o.label))
    {
        return Some(Step::AdoptSecret);
    }
    if o.config_map.is_none()
        || o.config_map_drifted
        || (o.access.is_some() && !o.config_map_synced)
    {
        return Some(Step::WriteConfigMap);
    }
    if o.config_map
        .as_ref()
        .is_some_and(|c| !child_is_adopted(c, &o.label))
    {
        return Some(Step::AdoptConfigMap);
    }
    None
}

/// A child of ours, with the finalizer of older versions, whose deletion
/// was requested.
fn is_deleting(meta: Option<&ObjectMeta>) -> bool {
    meta.is_some_and(|m| m.deletion_timestamp.is_some() && has_finalizer(m))
}

/// The binding, on both statuses (and on the claim, for claims prepared
/// without it by older versions).
fn binding_step(o: &Observed, ob: &ObjectBucket) -> Step {
    let ob_name = object_bucket_name(&o.claim);
    if !o.bind_pruned && o.claim.spec.object_bucket_name.as_deref() != Some(ob_name.as_str()) {
        return Step::BindClaim;
    }
    if ob.status.as_ref().and_then(|s| s.phase) != Some(BucketPhase::Bound) {
        return Step::MarkObjectBucketBound;
    }
    if let Some(step) = rotation::rotation_step(o, ob) {
        return step;
    }
    let pending =
        records::applied_config(ob).is_some_and(|a| a != records::wanted_config(&o.claim));
    let refused = pending && config_refused(&o.claim);
    if pending && !refused {
        return Step::UpdateBucket;
    }
    // Only against a recorded config: a bucket bound by the Go library or
    // an older version has none, and an empty one would ask to remove all.
    if o.config_check_due && records::applied_config(ob).is_some() {
        return Step::CheckConfig;
    }
    if !claim_status_is_bound(&o.claim, refused) {
        return Step::MarkClaimBound;
    }
    Step::Done
}

/// The claim has an ObjectBucket bound to it here already.
fn bound_here(o: &Observed) -> bool {
    o.ob.as_ref().is_some_and(|ob| {
        claim_ref_matches(ob, &o.claim)
            && has_label(&ob.metadata, &o.label)
            && ob.bucket_name().is_some()
    })
}

/// What to do about an ObjectBucket of the claim's name that another claim
/// holds: an earlier claim of this namespace and name (retained, or being
/// torn down), or a claim elsewhere whose `obc-<ns>-<name>` is the same
/// (`a-b`/`c` and `a`/`b-c`), named without saying which: it may be
/// another tenant's. The second happens to a claim that lost the race to
/// create it: `spec.objectBucketName`, recorded when the claim was
/// prepared, cannot change, but a claim created again is given a name of
/// its own (see `names::own_object_bucket_name`).
fn object_bucket_taken(o: &Observed, ob: &ObjectBucket, ob_name: &str) -> String {
    let same_name = ob.spec.claim_ref.as_ref().is_some_and(|r| {
        r.namespace == o.claim.metadata.namespace && r.name == o.claim.metadata.name
    });
    if same_name {
        return format!(
            "ObjectBucket {ob_name} is bound to an earlier claim with this name{}: delete that ObjectBucket (a retained bucket is kept in the store) or give the claim another name",
            released_note(ob)
        );
    }
    format!(
        "ObjectBucket {ob_name} is bound to a claim of another namespace or name: delete this claim and create it again without spec.objectBucketName (it is then given an ObjectBucket name of its own), or give it another name"
    )
}

fn released_note(ob: &ObjectBucket) -> &'static str {
    if ob.status.as_ref().and_then(|s| s.phase) == Some(BucketPhase::Released) {
        " and was retained (phase Released)"
    } else {
        ""
    }
}

/// Greenfield or brownfield: what the ObjectBucket recorded, else the class.
fn origin(o: &Observed, class: Option<&StorageClass>) -> BucketOrigin {
    if let Some(origin) =
        o.ob.as_ref()
            .and_then(|ob| annotation(&ob.metadata, BUCKET_ORIGIN_ANNOTATION))
            .and_then(BucketOrigin::parse)
    {
        return origin;
    }
    match class.and_then(brownfield_bucket) {
        Some(_) => BucketOrigin::Brownfield,
        None if class.is_none() => BucketOrigin::Brownfield,
        None => BucketOrigin::Greenfield,
    }
}

/// A Secret or ConfigMap of the claim's name that belongs to someone else.
fn child_conflict(o: &Observed) -> Option<Problem> {
    let name = o.claim.metadata.name.as_deref().unwrap_or_default();
    for (kind, meta) in [("Secret", &o.secret), ("ConfigMap", &o.config_map)] {
        if let Some(meta) = meta
            && !owned_by(meta, &o.claim)
        {
            return Some(Problem::new(
                "NameConflict",
                format!(
                    "a {kind} named {name:?} already exists in this namespace and does not belong to this claim: rename or delete that {kind}, or give the claim another name"
                ),
            ));
        }
    }
    None
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "plan_after_bind_tests.rs"]
mod after_bind_tests;
