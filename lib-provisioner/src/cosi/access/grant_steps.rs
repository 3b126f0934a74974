//! The driver role's steps for a BucketAccess: Secrets reserved, access
//! granted, the account recorded, Secrets written, ready; on deletion the
//! Secrets deleted, access revoked, cleanup handed back.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::Api;
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::grant_plan::{self, Observed, Step};
use crate::core::error::Error;
use crate::core::provisioner::{
    AccessGrant, AccessMode, AccessRequest, AccessRevocation, AccessedBucket, ClaimIdentity,
    Provisioner,
};
use crate::cosi::answer;
use crate::cosi::api::{
    AuthenticationType, Bucket, BucketAccess, BucketAccessClass, BucketAccessMode, FINALIZER,
    SIDECAR_CLEANUP_FINISHED_ANNOTATION, account_name_for_access,
};
use crate::cosi::context::CosiContext;
use crate::cosi::failpoint;
use crate::cosi::fresh;
use crate::cosi::keys;
use crate::cosi::pass::{self, Progress};
use crate::cosi::show::{Halt, provisioner_halt};
use crate::cosi::writes;

/// What the driver role learnt in this pass and keeps between its steps.
#[derive(Default)]
pub(crate) struct Memory {
    grant: Option<AccessGrant>,
    written: BTreeSet<String>,
    revoked: bool,
    /// The access Secrets as this pass last read them: a round reads again
    /// only the ones a step wrote since (from the write's answer, where it
    /// was kept: [`crate::cosi::answer::other`]), and all of them after a
    /// failed step (a 409 among them). No watch holds Secrets, so each
    /// read is a GET; a tenant's edit in between is met by the next
    /// write's resourceVersion, as for the access itself.
    secrets: BTreeMap<String, Option<Secret>>,
}

impl Memory {
    /// Whether this pass revoked the access (or found it revoked).
    pub(crate) fn revoked(&self) -> bool {
        self.revoked
    }
}

/// Observes for the driver role, plans, and takes the step.
pub(crate) async fn round<P: Provisioner>(
    ctx: &CosiContext<P>,
    api: &Api<BucketAccess>,
    access: &BucketAccess,
    memory: &mut Memory,
) -> Result<Progress, Error> {
    let o = observe(ctx, access.clone(), memory).await?;
    memory.secrets = o.secrets.iter().cloned().collect();
    let progress = pass::take(ctx, grant_plan::next_step(&o), |step| {
        execute(ctx, api, &o, step, memory)
    })
    .await;
    if !matches!(progress, Ok(Progress::Stepped | Progress::Done)) {
        // A 409 among them: every Secret is read again, with a GET.
        memory.secrets.clear();
        let ns = access.namespace();
        for entry in &access.spec.bucket_claims {
            answer::forget_other::<Secret>(ns.as_deref(), &entry.access_secret_name);
        }
    }
    progress
}

/// The accessed Buckets and the access Secrets, with what this pass
/// learnt.
async fn observe<P>(
    ctx: &CosiContext<P>,
    access: BucketAccess,
    memory: &Memory,
) -> Result<Observed, Error> {
    let buckets_api: Api<Bucket> = Api::all(ctx.client.clone());
    let mut buckets = Vec::new();
    let accessed = access
        .status
        .as_ref()
        .and_then(|s| s.accessed_buckets.clone())
        .unwrap_or_default();
    for entry in &accessed {
        let key = ObjectRef::new(&entry.bucket_name);
        let cache = Some(&ctx.caches.buckets);
        buckets.push(fresh::read(cache, &buckets_api, key, "read an accessed Bucket").await?);
    }
    let secrets_api = secrets(ctx, &access);
    let ns = access.namespace().unwrap_or_default();
    let mut secrets = Vec::new();
    for entry in &access.spec.bucket_claims {
        let name = entry.access_secret_name.clone();
        let secret = match memory.secrets.get(&name) {
            Some(known) => known.clone(),
            // No cache holds Secrets: what this pass last wrote of it, else
            // (or if deleting) a GET.
            None => {
                let key = ObjectRef::new(&name).within(&ns);
                fresh::read(None, &secrets_api, key, "read an access Secret").await?
            }
        };
        secrets.push((name, secret));
    }
    let class = if may_grant(&access, &secrets, memory) {
        let classes: Api<BucketAccessClass> = Api::all(ctx.client.clone());
        let key = ObjectRef::new(&access.spec.bucket_access_class_name);
        let cache = Some(&ctx.caches.access_classes);
        fresh::read(cache, &classes, key, "read the BucketAccessClass").await?
    } else {
        None
    };
    Ok(Observed {
        access,
        buckets,
        secrets,
        class,
        driver: ctx.driver.clone(),
        grant: memory.grant.clone(),
        written: memory.written.clone(),
        revoked: memory.revoked,
    })
}

/// Whether the plan may call for a grant (then it checks the class, which
/// is read only then): not deleting, no grant in this pass, and not
/// settled (ready, account recorded, every Secret there).
fn may_grant(access: &BucketAccess, secrets: &[(String, Option<Secret>)], memory: &Memory) -> bool {
    let status = access.status.clone().unwrap_or_default();
    let present = secrets.iter().all(|(_, s)| {
        s.as_ref()
            .is_some_and(|s| s.metadata.deletion_timestamp.is_none())
    });
    let settled = status.ready_to_use && status.account_id.is_some() && present;
    access.metadata.deletion_timestamp.is_none() && memory.grant.is_none() && !settled
}

async fn execute<P: Provisioner>(
    ctx: &CosiContext<P>,
    api: &Api<BucketAccess>,
    o: &Observed,
    step: Step,
    memory: &mut Memory,
) -> Result<Option<Halt>, Error> {
    let a = &o.access;
    let secrets = secrets(ctx, a);
    if let Some(written) = step.secret() {
        memory.secrets.remove(written);
    }
    match step {
        Step::AddFinalizer => {
            writes::add_finalizer(api, a, "add the BucketAccess's finalizer").await?
        }
        Step::ReserveSecret(name) => {
            let reserved = reserved_secret(a, &name);
            writes::create(&secrets, &reserved, "reserve an access Secret").await?;
            failpoint::hit("cosi-after-secret-reserved");
        }
        Step::Grant => return Ok(grant(ctx, o, memory).await.err()),
        Step::RecordAccount(id) => {
            let patch = json!({"status": {"accountID": id}});
            writes::patch_status(api, a, &patch, "record the account").await?;
            failpoint::hit("cosi-after-account-recorded");
        }
        Step::WriteSecret(name) => {
            let data =
                secret_data(o, &name).ok_or(Error::MissingField("the grant of this pass"))?;
            let secret = secret_of(o, &name)?;
            // The data is never logged; only the Secret's name is.
            let patch = json!({"metadata": {"resourceVersion": secret.resource_version()}, "type": "Opaque", "stringData": data});
            writes::patch_raw(&secrets, &name, &patch, "write an access Secret").await?;
            memory.written.insert(name);
            failpoint::hit("cosi-after-secret-written");
        }
        Step::MarkReady => {
            let patch = json!({"status": {"readyToUse": true, "error": null}});
            let action = "mark the BucketAccess ready";
            writes::patch_status(api, a, &patch, action).await?;
            failpoint::hit("cosi-after-access-ready");
        }
        Step::MarkNotReady => {
            let patch = json!({"status": {"readyToUse": false}});
            let action = "mark the BucketAccess not ready";
            writes::patch_status(api, a, &patch, action).await?;
        }
        Step::DeleteSecret(name) => {
            writes::delete(&secrets, secret_of(o, &name)?, "delete an access Secret").await?;
            failpoint::hit("cosi-after-secret-deleted");
        }
        Step::ReleaseSecret(name) => {
            let secret = secret_of(o, &name)?;
            writes::remove_finalizer(&secrets, secret, "release an access Secret").await?;
        }
        Step::Revoke => return Ok(revoke(ctx, a, memory).await.err()),
        Step::FinishCleanup => {
            let key = SIDECAR_CLEANUP_FINISHED_ANNOTATION;
            writes::annotate(api, a, key, "", "hand the deletion back").await?;
            failpoint::hit("cosi-after-cleanup-finished");
        }
    }
    Ok(None)
}

/// `grant_access`; its answer is this pass's until the next grant.
async fn grant<P: Provisioner>(
    ctx: &CosiContext<P>,
    o: &Observed,
    memory: &mut Memory,
) -> Result<(), Halt> {
    let a = &o.access;
    let req = access_request(a, &o.buckets);
    let call = ctx.provisioner.grant_access(&req);
    let grant = ctx
        .call(&a.metadata, "grant_access", call)
        .await
        .map_err(provisioner_halt("the driver could not grant access"))?;
    failpoint::hit("cosi-after-grant");
    memory.grant = Some(grant);
    memory.written.clear();
    Ok(())
}

/// `revoke_access` of the account and the buckets recorded.
async fn revoke<P: Provisioner>(
    ctx: &CosiContext<P>,
    a: &BucketAccess,
    memory: &mut Memory,
) -> Result<(), Halt> {
    let req = revocation(a);
    let call = ctx.provisioner.revoke_access(&req);
    ctx.call(&a.metadata, "revoke_access", call)
        .await
        .map_err(provisioner_halt("the driver could not revoke access"))?;
    failpoint::hit("cosi-after-revoke");
    memory.revoked = true;
    Ok(())
}

fn secrets<P>(ctx: &CosiContext<P>, access: &BucketAccess) -> Api<Secret> {
    Api::namespaced(ctx.client.clone(), &access.namespace().unwrap_or_default())
}

fn secret_of<'a>(o: &'a Observed, name: &str) -> Result<&'a Secret, Error> {
    o.secrets
        .iter()
        .find(|(n, _)| n == name)
        .and_then(|(_, s)| s.as_ref())
        .ok_or(Error::MissingField("the access Secret"))
}

/// The empty Secret reserved before the grant: ours by its controller
/// reference, held by our finalizer until the BucketAccess revokes.
fn reserved_secret(a: &BucketAccess, name: &str) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: a.namespace(),
            finalizers: Some(vec![FINALIZER.to_owned()]),
            owner_references: Some(vec![OwnerReference {
                api_version: BucketAccess::api_version(&()).into_owned(),
                kind: BucketAccess::kind(&()).into_owned(),
                name: a.name_any(),
                uid: a.uid().unwrap_or_default(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..Default::default()
        },
        type_: Some("Opaque".to_owned()),
        ..Default::default()
    }
}

/// Who gets access: the BucketAccess itself.
fn principal(a: &BucketAccess) -> ClaimIdentity {
    ClaimIdentity::new(
        a.namespace().unwrap_or_default(),
        a.name_any(),
        a.uid().unwrap_or_default(),
    )
}

fn mode(m: BucketAccessMode) -> AccessMode {
    match m {
        BucketAccessMode::ReadWrite => AccessMode::ReadWrite,
        BucketAccessMode::ReadOnly => AccessMode::ReadOnly,
        BucketAccessMode::WriteOnly => AccessMode::WriteOnly,
    }
}

/// The request: the buckets recorded at the hand-off (never the spec's
/// claim names), each in the mode its claim entry asks, with the
/// parameters its Bucket was made with (`buckets`, in the same order,
/// checked by the plan to be the ones recorded).
fn access_request(a: &BucketAccess, buckets: &[Option<Bucket>]) -> AccessRequest {
    let status = a.status.clone().unwrap_or_default();
    let mut req = AccessRequest::new(
        principal(a),
        account_name_for_access(&a.uid().unwrap_or_default()),
    )
    .with_class_name(a.spec.bucket_access_class_name.clone())
    .with_parameters(status.parameters.unwrap_or_default());
    for (accessed, bucket) in status.accessed_buckets.iter().flatten().zip(buckets) {
        let asked = a
            .spec
            .bucket_claims
            .iter()
            .find(|c| c.bucket_claim_name == accessed.bucket_claim_name);
        // The plan refuses a hand-off whose buckets do not match the
        // claims; ReadOnly is the narrowest mode should that ever change.
        let m = asked.map_or(AccessMode::ReadOnly, |c| mode(c.access_mode));
        let made_with = bucket.as_ref().and_then(|b| b.spec.parameters.clone());
        let entry = AccessedBucket::new(accessed.bucket_id.clone(), m)
            .with_bucket_parameters(made_with.unwrap_or_default());
        req = req.with_accessed_bucket(entry);
    }
    req
}

fn revocation(a: &BucketAccess) -> AccessRevocation {
    let status = a.status.clone().unwrap_or_default();
    // Without a recorded account id (a crash right after the grant), the
    // account name is what the store was asked to key the account by.
    let account = status
        .account_id
        .clone()
        .unwrap_or_else(|| account_name_for_access(&a.uid().unwrap_or_default()));
    let mut req = AccessRevocation::new(principal(a), account)
        .with_class_name(a.spec.bucket_access_class_name.clone())
        .with_parameters(status.parameters.unwrap_or_default());
    for accessed in status.accessed_buckets.iter().flatten() {
        req = req.with_bucket(accessed.bucket_id.clone());
    }
    req
}

/// The `stringData` of Secret `name`: its claim's bucket and this pass's
/// credentials.
fn secret_data(o: &Observed, name: &str) -> Option<BTreeMap<String, String>> {
    let a = &o.access;
    let grant = o.grant.as_ref()?;
    let status = a.status.as_ref()?;
    let entry = a
        .spec
        .bucket_claims
        .iter()
        .find(|c| c.access_secret_name == name)?;
    let accessed = status
        .accessed_buckets
        .iter()
        .flatten()
        .find(|b| b.bucket_claim_name == entry.bucket_claim_name)?;
    let auth = status
        .authentication_type
        .unwrap_or(AuthenticationType::Key);
    Some(keys::s3_secret(
        &accessed.bucket_id,
        &grant.endpoint,
        &grant.credentials,
        auth,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cosi::api::{BucketAccessStatus, BucketSpec};

    /// Issue 36, item 5: each bucket of the request carries the parameters
    /// its Bucket was made with, where the provisioner finds its store.
    #[test]
    fn the_request_carries_each_buckets_own_parameters() {
        let mut a = BucketAccess::new(
            "reader",
            serde_json::from_value(json!({
                "bucketClaims": [{"bucketClaimName": "photos", "accessMode": "ReadOnly", "accessSecretName": "s"}],
                "bucketAccessClassName": "x", "protocol": "S3"
            }))
            .expect("spec"),
        );
        a.status = Some(BucketAccessStatus {
            accessed_buckets: Some(vec![crate::cosi::api::AccessedBucket {
                bucket_name: "legacy".into(),
                bucket_id: "photos".into(),
                bucket_claim_name: "photos".into(),
            }]),
            parameters: Some([("endpoint".to_owned(), "http://x".to_owned())].into()),
            ..Default::default()
        });
        let spec: BucketSpec = serde_json::from_value(json!({
            "driverName": "d", "deletionPolicy": "Retain",
            "parameters": {"endpoint": "http://y"},
            "bucketClaimRef": {"name": "photos", "namespace": "shop"}
        }))
        .expect("Bucket spec");
        let req = access_request(&a, &[Some(Bucket::new("legacy", spec))]);
        assert_eq!(req.parameters["endpoint"], "http://x");
        assert_eq!(req.buckets.len(), 1);
        assert_eq!(req.buckets[0].bucket_name, "photos");
        assert_eq!(req.buckets[0].mode, AccessMode::ReadOnly);
        assert_eq!(req.buckets[0].bucket_parameters["endpoint"], "http://y");
    }

    /// The class is read for every pass that may grant, a ready access
    /// whose Secret was deleted (granted again) included; not for a
    /// settled or deleting one.
    #[test]
    fn the_class_is_read_wherever_a_grant_may_follow() {
        let mut a = BucketAccess::new(
            "reader",
            serde_json::from_value(json!({
                "bucketClaims": [], "bucketAccessClassName": "x", "protocol": "S3"
            }))
            .expect("spec"),
        );
        a.status = Some(BucketAccessStatus {
            ready_to_use: true,
            account_id: Some("ba-1".into()),
            ..Default::default()
        });
        let memory = Memory::default();
        let there = vec![("s".to_owned(), Some(Secret::default()))];
        let gone = vec![("s".to_owned(), None)];
        assert!(!may_grant(&a, &there, &memory), "settled");
        assert!(may_grant(&a, &gone, &memory), "a Secret to write again");
        a.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
        ));
        assert!(!may_grant(&a, &gone, &memory), "deleting");
    }
}
