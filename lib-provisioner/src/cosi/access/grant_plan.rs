//! The driver role's BucketAccess state machine, pure: [`next_step`].

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;

use super::bind_plan::class_refusal;
use crate::core::provisioner::AccessGrant;
use crate::cosi::api::{
    AuthenticationType, BUCKETCLAIM_BEING_DELETED_ANNOTATION, Bucket, BucketAccess,
    BucketAccessClass, ObjectProtocol, SIDECAR_CLEANUP_FINISHED_ANNOTATION,
};
use crate::cosi::plan::{Next, has_annotation, has_finalizer};

/// What the driver role's pass sees.
#[derive(Clone, Debug)]
pub(crate) struct Observed {
    pub access: BucketAccess,
    /// The Bucket of each `status.accessedBuckets` entry, in order.
    pub buckets: Vec<Option<Bucket>>,
    /// Each `spec.bucketClaims[].accessSecretName`, with the Secret found.
    pub secrets: Vec<(String, Option<Secret>)>,
    /// The BucketAccessClass `spec.bucketAccessClassName` names, as read
    /// now (checked again before a grant).
    pub class: Option<BucketAccessClass>,
    /// The driver this process serves.
    pub driver: String,
    /// What `grant_access` answered in this pass.
    pub grant: Option<AccessGrant>,
    /// Secrets written with that grant in this pass.
    pub written: BTreeSet<String>,
    /// Whether `revoke_access` succeeded in this pass.
    pub revoked: bool,
}

/// One step of the driver role.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Step {
    AddFinalizer,
    /// Create the Secret empty, with the finalizer and a controller
    /// reference to the BucketAccess, before anything is granted.
    ReserveSecret(String),
    Grant,
    /// `status.accountID` (before any Secret holds credentials: a deletion
    /// then revokes the account the store made).
    RecordAccount(String),
    WriteSecret(String),
    MarkReady,
    MarkNotReady,
    DeleteSecret(String),
    /// Remove our finalizer from a Secret of this BucketAccess.
    ReleaseSecret(String),
    Revoke,
    /// `sidecar-cleanup-finished`: the binding role ends the deletion.
    FinishCleanup,
}

impl Step {
    /// The access Secret the step writes, if it writes one.
    pub(crate) fn secret(&self) -> Option<&str> {
        match self {
            Self::ReserveSecret(name)
            | Self::WriteSecret(name)
            | Self::DeleteSecret(name)
            | Self::ReleaseSecret(name) => Some(name),
            _ => None,
        }
    }
}

/// Whether `secret` is controlled by `access` (by UID).
pub(crate) fn controlled_by(secret: &Secret, access: &BucketAccess) -> bool {
    let uid = access.uid();
    secret
        .owner_references()
        .iter()
        .any(|r| r.controller == Some(true) && Some(&r.uid) == uid.as_ref())
}

fn ready(a: &BucketAccess) -> bool {
    a.status.as_ref().is_some_and(|s| s.ready_to_use)
}

/// The next step of the driver role for `o.access`.
pub(crate) fn next_step(o: &Observed) -> Next<Step> {
    if o.access.metadata.deletion_timestamp.is_some() {
        return deletion_step(o);
    }
    if let Some(refusal) = refusal(o) {
        return Next::Refuse(refusal);
    }
    let a = &o.access;
    if !has_finalizer(&a.metadata) {
        return Next::Step(Step::AddFinalizer);
    }
    if let Some((name, _)) = o
        .secrets
        .iter()
        .find(|(_, s)| s.as_ref().is_some_and(|s| !controlled_by(s, a)))
    {
        return Next::Refuse(format!(
            "Secret {name} exists and does not belong to this BucketAccess: delete it, or recreate this BucketAccess with another accessSecretName"
        ));
    }
    let present = |s: &Option<Secret>| {
        s.as_ref()
            .is_some_and(|s| s.metadata.deletion_timestamp.is_none())
    };
    let status = a.status.clone().unwrap_or_default();
    if ready(a)
        && status.account_id.is_some()
        && o.grant.is_none()
        && o.secrets.iter().all(|(_, s)| present(s))
    {
        return Next::Done;
    }
    for (name, secret) in &o.secrets {
        match secret {
            None => return Next::Step(Step::ReserveSecret(name.clone())),
            Some(s) if s.metadata.deletion_timestamp.is_some() => {
                return Next::Step(Step::ReleaseSecret(name.clone()));
            }
            Some(_) => {}
        }
    }
    let Some(grant) = &o.grant else {
        return match grant_refusal(o) {
            Some(next) => next,
            None => Next::Step(Step::Grant),
        };
    };
    match &status.account_id {
        None => return Next::Step(Step::RecordAccount(grant.account_id.clone())),
        Some(id) if *id != grant.account_id => {
            return Next::Refuse(format!(
                "the driver returned account {}, but this BucketAccess recorded account {id}: the driver must return the same account for the same account name; ask an administrator",
                grant.account_id
            ));
        }
        Some(_) => {}
    }
    if let Some((name, _)) = o.secrets.iter().find(|(name, _)| !o.written.contains(name)) {
        return Next::Step(Step::WriteSecret(name.clone()));
    }
    if !ready(a) || status.error.is_some() {
        return Next::Step(Step::MarkReady);
    }
    Next::Done
}

/// What makes the hand-off unusable (checked again here: the driver acts
/// only on Buckets of its own, bound to claims of this namespace).
fn refusal(o: &Observed) -> Option<String> {
    let a = &o.access;
    let status = a.status.clone().unwrap_or_default();
    let (Some(accessed), Some(_), Some(auth)) = (
        &status.accessed_buckets,
        &status.driver_name,
        &status.authentication_type,
    ) else {
        return Some("the hand-off to the driver is incomplete (status.accessedBuckets, driverName and authenticationType must all be set): recreate this BucketAccess".into());
    };
    // Keys handed out for a ServiceAccount class would say one thing and
    // do another: the provisioner's requests carry no ServiceAccount yet.
    if *auth == AuthenticationType::ServiceAccount {
        return Some(format!(
            "driver {} gives key credentials only, and this BucketAccess's class authenticates with a ServiceAccount: use a BucketAccessClass with authenticationType Key",
            o.driver
        ));
    }
    if a.spec.protocol != ObjectProtocol::S3 {
        return Some(format!(
            "driver {} serves only S3, and this BucketAccess asks for {}: recreate it with protocol S3",
            o.driver,
            a.spec.protocol.as_str()
        ));
    }
    let mut names = BTreeSet::new();
    if let Some(dup) = a
        .spec
        .bucket_claims
        .iter()
        .find(|c| !names.insert(&c.access_secret_name))
    {
        return Some(format!(
            "accessSecretName {} is named twice: recreate this BucketAccess with one Secret per claim",
            dup.access_secret_name
        ));
    }
    let ns = a.namespace().unwrap_or_default();
    for (entry, bucket) in accessed.iter().zip(&o.buckets) {
        let name = &entry.bucket_name;
        let Some(b) = bucket else {
            return Some(format!("Bucket {name} is gone: delete this BucketAccess"));
        };
        let r = &b.spec.bucket_claim_ref;
        let why = if b.metadata.deletion_timestamp.is_some()
            || has_annotation(&b.metadata, BUCKETCLAIM_BEING_DELETED_ANNOTATION)
        {
            "is being deleted"
        } else if b.spec.driver_name != o.driver {
            "belongs to another driver"
        } else if r.namespace != ns || r.name != entry.bucket_claim_name {
            "is not bound to a claim of this namespace"
        } else if b.status.as_ref().and_then(|s| s.bucket_id.as_ref()) != Some(&entry.bucket_id) {
            "is not the bucket recorded at the hand-off"
        } else {
            continue;
        };
        return Some(format!("Bucket {name} {why}: delete this BucketAccess"));
    }
    if accessed.len() != o.buckets.len() || accessed.len() != a.spec.bucket_claims.len() {
        return Some(
            "status.accessedBuckets does not match spec.bucketClaims: recreate this BucketAccess"
                .into(),
        );
    }
    None
}

/// The class's rules against the spec about to be granted, and the
/// hand-off against the class: the binding role checked them on the
/// BucketAccess it read, which may not be this one (a hand-off computed for
/// an object deleted and re-created under the same name, or written by a
/// binding controller we do not run).
fn grant_refusal(o: &Observed) -> Option<Next<Step>> {
    let a = &o.access;
    let name = &a.spec.bucket_access_class_name;
    let Some(class) = &o.class else {
        return Some(Next::Wait(format!(
            "BucketAccessClass {name} does not exist: access is granted once it does"
        )));
    };
    if let Some(refusal) = class_refusal(a, class) {
        return Some(Next::Refuse(refusal));
    }
    let status = a.status.clone().unwrap_or_default();
    let parameters = class.spec.parameters.clone().filter(|p| !p.is_empty());
    let matches = class.spec.driver_name == o.driver
        && status.authentication_type == Some(class.spec.authentication_type)
        && status.parameters.filter(|p| !p.is_empty()) == parameters;
    (!matches).then(|| {
        Next::Refuse(format!(
            "the hand-off recorded on this BucketAccess (driver, authentication type, parameters) is not what BucketAccessClass {name} says: recreate this BucketAccess"
        ))
    })
}

fn deletion_step(o: &Observed) -> Next<Step> {
    let a = &o.access;
    if ready(a) {
        return Next::Step(Step::MarkNotReady);
    }
    for (name, secret) in &o.secrets {
        let Some(s) = secret.as_ref().filter(|s| controlled_by(s, a)) else {
            continue; // absent, or someone else's: left alone
        };
        if s.metadata.deletion_timestamp.is_none() {
            return Next::Step(Step::DeleteSecret(name.clone()));
        }
        if has_finalizer(&s.metadata) {
            return Next::Step(Step::ReleaseSecret(name.clone()));
        }
    }
    let handed_off = a
        .status
        .as_ref()
        .is_some_and(|s| s.accessed_buckets.is_some());
    if handed_off && !o.revoked {
        return Next::Step(Step::Revoke);
    }
    if !has_annotation(&a.metadata, SIDECAR_CLEANUP_FINISHED_ANNOTATION) {
        return Next::Step(Step::FinishCleanup);
    }
    Next::Done
}
