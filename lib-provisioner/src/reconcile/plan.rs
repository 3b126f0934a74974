//! The claim state machine as a pure function: from what is observed, the one
//! step to take next.
//!
//! Nothing here talks to the API or the object store, so every decision is
//! unit-tested. The executor ([`super::claim`]) observes, asks [`next_step`],
//! performs that step (one write or one provisioner call), records the
//! result in [`Observed`], and asks again, until [`Step::Done`] or a step
//! that stops the pass. After a crash the same observation leads to the same
//! step, which is what makes every step safe to repeat.

use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::api::{
    BROWNFIELD_BUCKET_PARAMETER, BUCKET_ORIGIN_ANNOTATION, BucketOrigin, BucketPhase, ClaimPhase,
    FINALIZER, GENERATED_NAME_ANNOTATION, ObjectBucket, ObjectBucketClaim, PROVISIONER_LABEL,
    ReclaimPolicy,
};
use crate::names;
use crate::provisioner::BucketAccess;

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
    /// The provisioner's teardown ran during this pass.
    pub torn_down: bool,
    /// This pass added the finalizer: a DELETE racing it may still remove
    /// the claim, so the ObjectBucket is reserved before the provisioner runs.
    pub prepared_now: bool,
    /// The apiserver dropped `spec.objectBucketName` when it was written (a
    /// CRD schema without the field): binding is known from the claimRef.
    pub bind_pruned: bool,
    /// This provisioner's `bucket-provisioner` label value.
    pub label: String,
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
            torn_down: false,
            prepared_now: false,
            bind_pruned: false,
            label,
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

/// The step to take next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// Not this provisioner's claim: touch nothing.
    Ignore,
    /// The claim is invalid: mark it Failed and stop.
    Reject(Problem),
    /// The claim waits for something outside it: mark it Pending and retry.
    Wait(Problem),
    /// Add the finalizer and label, and persist a generated bucket name, in
    /// one patch: nothing is created before the claim is protected and its
    /// name fixed.
    PrepareClaim { generate_from: Option<String> },
    /// Create the ObjectBucket `obc-<ns>-<name>`: from the obtained access,
    /// or, in the pass that added the finalizer, reserved (no endpoint yet)
    /// before the provisioner is called, as the durable record outside the
    /// claim that a bucket may exist for it.
    CreateObjectBucket {
        bucket_name: String,
        origin: BucketOrigin,
        reclaim_policy: ReclaimPolicy,
    },
    /// Ask the provisioner for the bucket (greenfield) or access (brownfield).
    ObtainAccess {
        bucket_name: String,
        origin: BucketOrigin,
    },
    /// Record the provisioner's endpoint and state on the reserved
    /// ObjectBucket, and lift the reservation.
    CompleteObjectBucket,
    /// Take over an ObjectBucket bound to this claim that lacks our label,
    /// finalizer or origin annotation (written by the Go library or an
    /// older version). The origin annotation is written when known.
    AdoptObjectBucket { origin: Option<BucketOrigin> },
    /// Create the Secret, or make its data match freshly obtained access.
    WriteSecret,
    /// Give an existing Secret of this claim our label and finalizer.
    AdoptSecret,
    /// Create the ConfigMap, or make it match the ObjectBucket's endpoint.
    WriteConfigMap,
    /// Give an existing ConfigMap of this claim our label and finalizer.
    AdoptConfigMap,
    /// Record `spec.objectBucketName` on the claim.
    BindClaim,
    /// Set the ObjectBucket's status phase to Bound.
    MarkObjectBucketBound,
    /// Set the claim's status to Bound.
    MarkClaimBound,
    /// Call Delete (or Revoke) for a claim being deleted.
    Teardown { delete_bucket: bool },
    /// Reclaim policy Delete: remove the ObjectBucket's finalizer and delete it.
    DeleteObjectBucket,
    /// Reclaim policy Retain: mark the ObjectBucket Released, drop its finalizer.
    ReleaseObjectBucket,
    /// Remove the Secret's finalizer and delete it.
    ReleaseSecret,
    /// Remove the ConfigMap's finalizer and delete it.
    ReleaseConfigMap,
    /// Remove the claim's finalizer: the last write of a deletion.
    RemoveClaimFinalizer,
    /// Nothing left to do.
    Done,
}

impl Step {
    /// Whether the step writes the claim (and its Events) and nothing else:
    /// then a conflict can only be on the claim, and the pass's own copies
    /// of the other objects are still what it last wrote or read.
    pub(crate) fn writes_only_the_claim(&self) -> bool {
        // Exhaustive on purpose: a new step must say which conflict
        // recovery it needs.
        match self {
            Step::Reject(_)
            | Step::Wait(_)
            | Step::PrepareClaim { .. }
            | Step::BindClaim
            | Step::MarkClaimBound
            | Step::RemoveClaimFinalizer => true,
            Step::Ignore
            | Step::CreateObjectBucket { .. }
            | Step::ObtainAccess { .. }
            | Step::CompleteObjectBucket
            | Step::AdoptObjectBucket { .. }
            | Step::WriteSecret
            | Step::AdoptSecret
            | Step::WriteConfigMap
            | Step::AdoptConfigMap
            | Step::MarkObjectBucketBound
            | Step::Teardown { .. }
            | Step::DeleteObjectBucket
            | Step::ReleaseObjectBucket
            | Step::ReleaseSecret
            | Step::ReleaseConfigMap
            | Step::Done => false,
        }
    }
}

/// The next step for a claim.
pub(crate) fn next_step(o: &Observed) -> Step {
    if o.claim.metadata.deletion_timestamp.is_some() {
        return next_deletion_step(o);
    }
    let class = match &o.class {
        ClassState::Foreign => return Step::Ignore,
        ClassState::Ours(class) => Some(class.as_ref()),
        // A claim we bound keeps working if its class is deleted: everything
        // needed is in the ObjectBucket.
        _ if bound_here(o) => None,
        ClassState::Unnamed => {
            return Step::Reject(Problem::new(
                "MissingStorageClass",
                "spec.storageClassName is empty: set it to a StorageClass whose provisioner serves buckets",
            ));
        }
        ClassState::NotFound(name) => {
            return Step::Wait(Problem::new(
                "StorageClassNotFound",
                format!(
                    "StorageClass {name:?} does not exist: create it, or set spec.storageClassName to an existing class; the claim is retried when it appears"
                ),
            ));
        }
    };

    let ob_name = object_bucket_name(&o.claim);
    if let Some(ob) = &o.ob {
        if !claim_ref_matches(ob, &o.claim) {
            return Step::Reject(Problem::new(
                "ObjectBucketTaken",
                format!(
                    "ObjectBucket {ob_name} is bound to an earlier claim with this name{}: delete that ObjectBucket (a retained bucket is kept in the store) or give the claim another name",
                    released_note(ob)
                ),
            ));
        }
        if ob.metadata.deletion_timestamp.is_some() {
            return Step::Wait(Problem::new(
                "ObjectBucketDeleting",
                format!(
                    "ObjectBucket {ob_name} is being deleted while its claim exists; it stays until the claim is deleted. Delete the claim to release the bucket"
                ),
            ));
        }
    }

    let origin = match origin(o, class) {
        Ok(origin) => origin,
        Err(problem) => return Step::Reject(problem),
    };
    let name = match bucket_name(o, class, origin) {
        Ok(name) => name,
        Err(problem) => return Step::Reject(problem),
    };
    let reclaim_policy = match class {
        Some(class) => match ReclaimPolicy::from_class(class.reclaim_policy.as_deref()) {
            Ok(policy) => policy,
            Err(message) => {
                return Step::Reject(Problem::new(
                    "InvalidReclaimPolicy",
                    format!(
                        "StorageClass {}: {message}",
                        class.metadata.name.as_deref().unwrap_or_default()
                    ),
                ));
            }
        },
        None => {
            o.ob.as_ref()
                .map(|ob| ob.spec.reclaim_policy)
                .unwrap_or_default()
        }
    };
    if let Some(holder) = &o.name_holder
        && origin == BucketOrigin::Greenfield
        && o.ob.is_none()
    {
        return Step::Reject(Problem::new(
            "BucketNameTaken",
            format!(
                "bucket {:?} is already claimed by {holder}: choose another spec.bucketName, or use spec.generateBucketName",
                match &name {
                    BucketName::Known(n) | BucketName::Generate(n) => n,
                }
            ),
        ));
    }
    if let Some(problem) = child_conflict(o) {
        return Step::Reject(problem);
    }

    // From here on the claim is valid and every write is ours.
    let generate_from = match &name {
        BucketName::Generate(prefix) => Some(prefix.clone()),
        BucketName::Known(_) => None,
    };
    if !has_finalizer(&o.claim.metadata)
        || !has_label(&o.claim.metadata, &o.label)
        || generate_from.is_some()
    {
        return Step::PrepareClaim { generate_from };
    }
    let BucketName::Known(bucket_name) = name else {
        // Unreachable: PrepareClaim persisted the generated name above.
        return Step::PrepareClaim { generate_from };
    };

    // In the pass that added the finalizer the ObjectBucket comes first,
    // reserved: should the claim vanish while the provisioner works (the
    // apiserver may still carry out a DELETE that raced the finalizer), the
    // ObjectBucket tells the ObjectBucket reconciler what to tear down. Later
    // passes (retries, restarts) find the race long settled.
    let secret_missing = o.secret.is_none();
    if o.ob.is_none() && o.prepared_now {
        return Step::CreateObjectBucket {
            bucket_name,
            origin,
            reclaim_policy,
        };
    }
    let reserved = o.ob.as_ref().is_some_and(is_reserved);
    if o.access.is_none() && (o.ob.is_none() || reserved || secret_missing) {
        return Step::ObtainAccess {
            bucket_name,
            origin,
        };
    }
    let Some(ob) = &o.ob else {
        return Step::CreateObjectBucket {
            bucket_name,
            origin,
            reclaim_policy,
        };
    };
    // The origin is recorded only when the class tells it: a guess written
    // into the annotation would outlive the reason for it.
    let record_origin = (class.is_some()
        && annotation(&ob.metadata, BUCKET_ORIGIN_ANNOTATION).is_none())
    .then_some(origin);
    if !has_finalizer(&ob.metadata) || !has_label(&ob.metadata, &o.label) || record_origin.is_some()
    {
        return Step::AdoptObjectBucket {
            origin: record_origin,
        };
    }
    if reserved {
        return Step::CompleteObjectBucket;
    }
    if secret_missing || (o.access.is_some() && !o.secret_synced) {
        return Step::WriteSecret;
    }
    if o.secret
        .as_ref()
        .is_some_and(|s| !child_is_adopted(s, &o.label))
    {
        return Step::AdoptSecret;
    }
    if o.config_map.is_none() || (o.access.is_some() && !o.config_map_synced) {
        return Step::WriteConfigMap;
    }
    if o.config_map
        .as_ref()
        .is_some_and(|c| !child_is_adopted(c, &o.label))
    {
        return Step::AdoptConfigMap;
    }
    if !o.bind_pruned && o.claim.spec.object_bucket_name.as_deref() != Some(ob_name.as_str()) {
        return Step::BindClaim;
    }
    if ob.status.as_ref().and_then(|s| s.phase) != Some(BucketPhase::Bound) {
        return Step::MarkObjectBucketBound;
    }
    if !claim_status_is_bound(&o.claim) {
        return Step::MarkClaimBound;
    }
    Step::Done
}

/// The next step for a claim being deleted.
fn next_deletion_step(o: &Observed) -> Step {
    if !has_finalizer(&o.claim.metadata) {
        return Step::Done;
    }
    let ours = has_label(&o.claim.metadata, &o.label)
        || matches!(o.class, ClassState::Ours(_))
        || o.ob
            .as_ref()
            .is_some_and(|ob| has_label(&ob.metadata, &o.label));
    if !ours {
        return Step::Ignore;
    }
    if let Some(ob) = o.ob.as_ref().filter(|ob| claim_ref_matches(ob, &o.claim)) {
        let released = ob.status.as_ref().and_then(|s| s.phase) == Some(BucketPhase::Released);
        if !released {
            let plan = teardown_plan(ob, &o.class);
            if !o.torn_down {
                return Step::Teardown {
                    delete_bucket: plan.delete_bucket,
                };
            }
            return if plan.delete_object_bucket {
                Step::DeleteObjectBucket
            } else {
                Step::ReleaseObjectBucket
            };
        }
        if has_finalizer(&ob.metadata) {
            return Step::ReleaseObjectBucket;
        }
    }
    if o.ob.is_none() && !o.torn_down && !was_bound(&o.claim) {
        // The pass that was provisioning may have died after the bucket was
        // created and before its ObjectBucket was: tear down by name, so no
        // bucket outlives its claim. The provisioner only deletes what it
        // created for this claim. A claim that was bound had an ObjectBucket;
        // if that is gone, its teardown already ran.
        //
        // Reclaim policy Retain keeps the bucket of a claim that was bound.
        // This one never was, and nothing would record a kept bucket (there is
        // no ObjectBucket), so a greenfield bucket is deleted under either
        // policy rather than orphaned.
        if let ClassState::Ours(class) = &o.class {
            let origin = if brownfield_bucket(class).is_some() {
                BucketOrigin::Brownfield
            } else {
                BucketOrigin::Greenfield
            };
            let named = origin == BucketOrigin::Brownfield || fixed_bucket_name(&o.claim).is_some();
            if named {
                return Step::Teardown {
                    delete_bucket: origin == BucketOrigin::Greenfield,
                };
            }
        }
    }
    if o.secret.as_ref().is_some_and(|s| owned_by(s, &o.claim)) {
        return Step::ReleaseSecret;
    }
    if o.config_map.as_ref().is_some_and(|c| owned_by(c, &o.claim)) {
        return Step::ReleaseConfigMap;
    }
    Step::RemoveClaimFinalizer
}

/// The ObjectBucket a claim binds to: the one it names, else `obc-<ns>-<name>`.
pub(crate) fn object_bucket_name(claim: &ObjectBucketClaim) -> String {
    claim
        .spec
        .object_bucket_name
        .clone()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| {
            names::object_bucket_name(
                claim.metadata.namespace.as_deref().unwrap_or_default(),
                claim.metadata.name.as_deref().unwrap_or_default(),
            )
        })
}

/// Whether an ObjectBucket's `claimRef` points at this claim: by UID when
/// both have one, else by namespace and name (older writers left no UID).
pub(crate) fn claim_ref_matches(ob: &ObjectBucket, claim: &ObjectBucketClaim) -> bool {
    let Some(r) = &ob.spec.claim_ref else {
        return false;
    };
    if let (Some(a), Some(b)) = (r.uid.as_deref(), claim.metadata.uid.as_deref())
        && !a.is_empty()
        && !b.is_empty()
    {
        return a == b;
    }
    r.name == claim.metadata.name && r.namespace == claim.metadata.namespace
}

/// The claim has an ObjectBucket bound to it here already.
fn bound_here(o: &Observed) -> bool {
    o.ob.as_ref().is_some_and(|ob| {
        claim_ref_matches(ob, &o.claim)
            && has_label(&ob.metadata, &o.label)
            && ob.bucket_name().is_some()
    })
}

fn released_note(ob: &ObjectBucket) -> &'static str {
    if ob.status.as_ref().and_then(|s| s.phase) == Some(BucketPhase::Released) {
        " and was retained (phase Released)"
    } else {
        ""
    }
}

/// Greenfield or brownfield: what the ObjectBucket recorded, else the class.
fn origin(o: &Observed, class: Option<&StorageClass>) -> Result<BucketOrigin, Problem> {
    if let Some(origin) =
        o.ob.as_ref()
            .and_then(|ob| annotation(&ob.metadata, BUCKET_ORIGIN_ANNOTATION))
            .and_then(BucketOrigin::parse)
    {
        return Ok(origin);
    }
    let Some(class) = class else {
        return Ok(BucketOrigin::Brownfield);
    };
    Ok(match brownfield_bucket(class) {
        Some(_) => BucketOrigin::Brownfield,
        None => BucketOrigin::Greenfield,
    })
}

/// Origin for teardown. When nothing recorded it and the class is gone,
/// assume brownfield: revoking keeps data, deleting could not be undone.
/// Whether the ObjectBucket is a reservation made before its bucket (see
/// [`crate::api::RESERVED_ANNOTATION`]).
/// How an ObjectBucket is torn down once its claim goes: the one decision
/// both the claim's deletion and the orphan cleanup follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TeardownPlan {
    /// Delete the bucket (else only revoke the claim's access).
    pub delete_bucket: bool,
    /// Delete the ObjectBucket afterwards (else mark it Released, keep it).
    pub delete_object_bucket: bool,
}

/// The teardown of `ob`, whose class is `class` (for ObjectBuckets that
/// recorded no origin).
pub(crate) fn teardown_plan(ob: &ObjectBucket, class: &ClassState) -> TeardownPlan {
    // A reserved ObjectBucket was never bound: its claim never got
    // credentials, so Retain has nothing to keep (an empty bucket at most),
    // and the bucket goes with the reservation.
    let delete_object_bucket = ob.spec.reclaim_policy == ReclaimPolicy::Delete || is_reserved(ob);
    TeardownPlan {
        delete_bucket: recorded_origin(ob, class) == BucketOrigin::Greenfield
            && delete_object_bucket,
        delete_object_bucket,
    }
}

pub(crate) fn is_reserved(ob: &ObjectBucket) -> bool {
    annotation(&ob.metadata, crate::api::RESERVED_ANNOTATION).is_some()
}

fn recorded_origin(ob: &ObjectBucket, class: &ClassState) -> BucketOrigin {
    if let Some(origin) =
        annotation(&ob.metadata, BUCKET_ORIGIN_ANNOTATION).and_then(BucketOrigin::parse)
    {
        return origin;
    }
    match class {
        ClassState::Ours(class) if brownfield_bucket(class).is_none() => BucketOrigin::Greenfield,
        _ => BucketOrigin::Brownfield,
    }
}

/// The class's parameters, or none when it is not ours (deleted, say).
pub(crate) fn class_parameters(class: &ClassState) -> std::collections::BTreeMap<String, String> {
    match class {
        ClassState::Ours(class) => class.parameters.clone().unwrap_or_default(),
        _ => Default::default(),
    }
}

fn brownfield_bucket(class: &StorageClass) -> Option<&str> {
    class
        .parameters
        .as_ref()
        .and_then(|p| p.get(BROWNFIELD_BUCKET_PARAMETER))
        .map(String::as_str)
        .filter(|b| !b.is_empty())
}

/// Decides the bucket name, in the order that never yields a second bucket:
/// an existing ObjectBucket, the class (brownfield), `spec.bucketName`, a
/// name generated earlier, and only then a new generated name.
pub(crate) fn bucket_name(
    o: &Observed,
    class: Option<&StorageClass>,
    origin: BucketOrigin,
) -> Result<BucketName, Problem> {
    if let Some(name) = o.ob.as_ref().and_then(ObjectBucket::bucket_name) {
        return Ok(BucketName::Known(name.to_owned()));
    }
    let spec = &o.claim.spec;
    let exact = spec.bucket_name.as_deref().filter(|n| !n.is_empty());
    let prefix = spec
        .generate_bucket_name
        .as_deref()
        .filter(|n| !n.is_empty());

    if origin == BucketOrigin::Brownfield {
        let Some(existing) = class.and_then(brownfield_bucket) else {
            return Err(Problem::new(
                "ObjectBucketMissing",
                "the claim's ObjectBucket is gone and its StorageClass no longer names a bucket: restore the ObjectBucket or recreate the claim",
            ));
        };
        if let Some(exact) = exact.filter(|e| *e != existing) {
            return Err(Problem::new(
                "BucketNameMismatch",
                format!(
                    "StorageClass {:?} grants access to the existing bucket {existing:?}, but spec.bucketName asks for {exact:?}: remove spec.bucketName, or use a class without a bucketName parameter to create a new bucket",
                    o.claim.spec.storage_class_name
                ),
            ));
        }
        return validated(existing, "StorageClass parameter bucketName");
    }

    let processed = has_finalizer(&o.claim.metadata) || was_bound(&o.claim);
    match (exact, prefix) {
        (None, None) => {
            if let Some(generated) = annotation(&o.claim.metadata, GENERATED_NAME_ANNOTATION) {
                return validated(generated, "the generated bucket name");
            }
            Err(Problem::new(
                "MissingBucketName",
                "set spec.generateBucketName (recommended: a prefix, a random suffix is added) or spec.bucketName (an exact name)",
            ))
        }
        (Some(exact), Some(prefix)) => {
            // Older versions wrote the generated name back into
            // spec.bucketName: then it is the bucket's real name.
            if names::looks_generated_from(prefix, exact) || processed {
                validated(exact, "spec.bucketName")
            } else {
                Err(Problem::new(
                    "AmbiguousBucketName",
                    format!(
                        "both spec.bucketName ({exact:?}) and spec.generateBucketName ({prefix:?}) are set: keep only one"
                    ),
                ))
            }
        }
        (Some(exact), None) => validated(exact, "spec.bucketName"),
        (None, Some(prefix)) => {
            if let Some(generated) = annotation(&o.claim.metadata, GENERATED_NAME_ANNOTATION) {
                return validated(generated, "the generated bucket name");
            }
            if was_bound(&o.claim) {
                // The ObjectBucket was the only record of the generated name:
                // generating another would create a second bucket.
                return Err(Problem::new(
                    "ObjectBucketMissing",
                    format!(
                        "the claim was bound but ObjectBucket {} is gone, and with it the generated bucket name: restore the ObjectBucket, or set spec.bucketName to the bucket's name",
                        object_bucket_name(&o.claim)
                    ),
                ));
            }
            names::generate_bucket_name(prefix).map_err(|e| {
                Problem::new(
                    "InvalidBucketName",
                    format!("{e}: fix spec.generateBucketName"),
                )
            })?;
            Ok(BucketName::Generate(prefix.to_owned()))
        }
    }
}

fn validated(name: &str, source: &str) -> Result<BucketName, Problem> {
    names::validate_bucket_name(name)
        .map_err(|e| Problem::new("InvalidBucketName", format!("{source}: {e}")))?;
    Ok(BucketName::Known(name.to_owned()))
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

/// Whether a child names the claim as its owner.
pub(crate) fn owned_by(meta: &ObjectMeta, claim: &ObjectBucketClaim) -> bool {
    meta.owner_references.as_ref().is_some_and(|refs| {
        refs.iter()
            .any(|r| r.kind == "ObjectBucketClaim" && Some(&r.uid) == claim.metadata.uid.as_ref())
    })
}

fn child_is_adopted(meta: &ObjectMeta, label: &str) -> bool {
    has_finalizer(meta) && has_label(meta, label)
}

pub(crate) fn has_finalizer(meta: &ObjectMeta) -> bool {
    meta.finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|f| f == FINALIZER))
}

pub(crate) fn has_label(meta: &ObjectMeta, value: &str) -> bool {
    meta.labels
        .as_ref()
        .and_then(|l| l.get(PROVISIONER_LABEL))
        .is_some_and(|v| v == value)
}

pub(crate) fn annotation<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
        .filter(|v| !v.is_empty())
}

fn was_bound(claim: &ObjectBucketClaim) -> bool {
    claim
        .spec
        .object_bucket_name
        .as_deref()
        .is_some_and(|n| !n.is_empty())
        || claim.status.as_ref().and_then(|s| s.phase) == Some(ClaimPhase::Bound)
}

/// The status is Bound, for the current generation, with a Bound condition.
fn claim_status_is_bound(claim: &ObjectBucketClaim) -> bool {
    claim.status.as_ref().is_some_and(|s| {
        s.phase == Some(ClaimPhase::Bound)
            && s.observed_generation == claim.metadata.generation
            && s.conditions
                .iter()
                .any(|c| c.type_ == super::status::BOUND_CONDITION && c.status == "True")
    })
}

/// The bucket name a claim has fixed for itself (spec or annotation), used
/// to find two greenfield claims that ask for the same bucket.
pub(crate) fn fixed_bucket_name(claim: &ObjectBucketClaim) -> Option<&str> {
    claim
        .spec
        .bucket_name
        .as_deref()
        .filter(|n| !n.is_empty())
        .or_else(|| annotation(&claim.metadata, GENERATED_NAME_ANNOTATION))
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
