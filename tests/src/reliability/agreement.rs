//! The check that the cluster and the S3 store agree exactly: every live
//! claim Bound with its ObjectBucket, bucket, Secret and ConfigMap, nothing
//! orphaned, nothing lost, deleted claims gone per their reclaim policy
//! ([`Deleted`]).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use anyhow::Result;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};
use lib_provisioner::api::{
    BUCKET_ORIGIN_ANNOTATION, BucketPhase, ClaimPhase, FINALIZER, GENERATED_NAME_ANNOTATION,
    ObjectBucket, ObjectBucketClaim,
};

use super::sample::Kind;
use super::store::{store_buckets, store_intents};
use crate::testenv::TestEnv;

/// A claim the test deleted, and what must remain of it.
#[derive(Clone, Debug)]
pub struct Deleted {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// UID.
    pub uid: String,
    /// Its bucket, if it was known when the claim was deleted.
    pub bucket: Option<String>,
    /// What it asked for.
    pub kind: Kind,
    /// Whether it was ever Bound (then a retained bucket must be kept).
    pub was_bound: bool,
}

/// The bucket a claim has (from its ObjectBucket), or has fixed for itself.
pub async fn bucket_of(client: &Client, claim: &ObjectBucketClaim) -> Option<String> {
    let ob = Api::<ObjectBucket>::all(client.clone())
        .get_opt(&format!(
            "obc-{}-{}",
            claim.namespace().unwrap_or_default(),
            claim.name_any()
        ))
        .await
        .ok()
        .flatten()
        .filter(|ob| {
            ob.spec.claim_ref.as_ref().and_then(|r| r.uid.as_deref()) == claim.uid().as_deref()
        });
    if let Some(name) = ob.as_ref().and_then(|ob| ob.bucket_name()) {
        return Some(name.to_owned());
    }
    claim
        .spec
        .bucket_name
        .clone()
        .or_else(|| claim.annotations().get(GENERATED_NAME_ANNOTATION).cloned())
}

/// What the cluster and the store hold, and where they disagree.
#[derive(Debug, Default)]
pub struct Agreement {
    /// Live claims in scope.
    pub claims: usize,
    /// Buckets in the store (all, with the pre-existing ones).
    pub buckets: usize,
    /// Buckets that should exist and do not.
    pub lost: Vec<String>,
    /// Buckets, ObjectBuckets, Secrets and ConfigMaps no claim accounts for.
    pub orphaned: Vec<String>,
    /// Everything else that is wrong (phases, markers, owners...).
    pub wrong: Vec<String>,
}

impl Agreement {
    /// Whether everything agrees.
    pub fn ok(&self) -> bool {
        self.lost.is_empty() && self.orphaned.is_empty() && self.wrong.is_empty()
    }

    /// All problems, one per line.
    pub fn problems(&self) -> String {
        let mut out = String::new();
        for (what, list) in [
            ("LOST", &self.lost),
            ("ORPHAN", &self.orphaned),
            ("WRONG", &self.wrong),
        ] {
            for p in list {
                let _ = writeln!(out, "  {what}: {p}");
            }
        }
        out
    }
}

/// What [`agreement`] checks against.
#[derive(Clone, Debug, Default)]
pub struct Expectations {
    /// Namespaces whose claims, Secrets and ConfigMaps are checked.
    pub namespaces: Vec<String>,
    /// Buckets that existed before any claim (never deleted, not counted).
    pub preexisting: BTreeSet<String>,
    /// Claims the test deleted.
    pub deleted: Vec<Deleted>,
    /// Claims (`ns/name`) expected not to be Bound (bad input).
    pub not_bound: BTreeSet<String>,
    /// Whether `spec.objectBucketName` can be pruned (an old CRD schema).
    pub bind_pruned: bool,
    /// Greenfield buckets allowed to lack the ownership marker (made by
    /// another implementation, such as the Go library).
    pub unmarked: BTreeSet<String>,
}

fn owner_uid(meta: &ObjectMeta) -> Option<String> {
    meta.owner_references
        .as_ref()?
        .iter()
        .find(|r| r.kind == "ObjectBucketClaim")
        .map(|r| r.uid.clone())
}

fn has_finalizer(meta: &ObjectMeta) -> bool {
    meta.finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|f| f == FINALIZER))
}

/// Reads the cluster and the store once and lists every disagreement.
pub async fn agreement(env: &TestEnv, client: &Client, x: &Expectations) -> Result<Agreement> {
    let mut a = Agreement::default();
    let obs = Api::<ObjectBucket>::all(client.clone())
        .list(&ListParams::default())
        .await?
        .items;
    let store = store_buckets(&env.s3_client()).await?;
    a.buckets = store.len();
    let mut claims: BTreeMap<(String, String), ObjectBucketClaim> = BTreeMap::new();
    let mut secrets = Vec::new();
    let mut config_maps = Vec::new();
    for ns in &x.namespaces {
        for c in Api::<ObjectBucketClaim>::namespaced(client.clone(), ns)
            .list(&ListParams::default())
            .await?
            .items
        {
            claims.insert((ns.clone(), c.name_any()), c);
        }
        secrets.extend(
            Api::<Secret>::namespaced(client.clone(), ns)
                .list_metadata(&ListParams::default())
                .await?
                .items
                .into_iter()
                .map(|s| (ns.clone(), s.metadata)),
        );
        config_maps.extend(
            Api::<ConfigMap>::namespaced(client.clone(), ns)
                .list_metadata(&ListParams::default())
                .await?
                .items
                .into_iter()
                .map(|s| (ns.clone(), s.metadata)),
        );
    }
    let claim_uids: BTreeSet<String> = claims.values().filter_map(|c| c.uid()).collect();
    a.claims = claims.len();

    // Every live claim: Bound, with its ObjectBucket, bucket, Secret, ConfigMap.
    for ((ns, name), c) in &claims {
        let key = format!("{ns}/{name}");
        let uid = c.uid().unwrap_or_default();
        if x.not_bound.contains(&key) {
            continue;
        }
        if c.metadata.deletion_timestamp.is_some() {
            a.wrong.push(format!("claim {key} is still being deleted"));
            continue;
        }
        let status = c.status.clone().unwrap_or_default();
        if status.phase != Some(ClaimPhase::Bound) {
            a.wrong.push(format!(
                "claim {key} is {:?}: {}",
                status.phase,
                status.message.unwrap_or_default()
            ));
            continue;
        }
        let ob_name = format!("obc-{ns}-{name}");
        if !x.bind_pruned && c.spec.object_bucket_name.as_deref() != Some(&ob_name) {
            a.wrong.push(format!(
                "claim {key} names ObjectBucket {:?}",
                c.spec.object_bucket_name
            ));
        }
        if !has_finalizer(&c.metadata) {
            a.wrong.push(format!("claim {key} has no finalizer"));
        }
        let Some(ob) = obs.iter().find(|o| o.name_any() == ob_name) else {
            a.wrong.push(format!(
                "claim {key} is Bound without ObjectBucket {ob_name}"
            ));
            continue;
        };
        // Older writers left no UID in the claimRef: then ns/name binds.
        if ob
            .spec
            .claim_ref
            .as_ref()
            .and_then(|r| r.uid.as_deref())
            .is_some_and(|u| !u.is_empty() && u != uid)
        {
            a.wrong.push(format!(
                "ObjectBucket {ob_name} is bound to another claim UID"
            ));
        }
        if ob.status.as_ref().and_then(|s| s.phase) != Some(BucketPhase::Bound) {
            a.wrong.push(format!("ObjectBucket {ob_name} is not Bound"));
        }
        let Some(bucket) = ob.bucket_name() else {
            a.wrong
                .push(format!("ObjectBucket {ob_name} names no bucket"));
            continue;
        };
        let brownfield = ob
            .annotations()
            .get(BUCKET_ORIGIN_ANNOTATION)
            .map(String::as_str)
            == Some("brownfield");
        match store.get(bucket) {
            None => a.lost.push(format!("{bucket} (claim {key})")),
            Some(None) if x.unmarked.contains(bucket) => {}
            Some(marker) if !brownfield && marker.as_deref() != Some(uid.as_str()) => a.wrong.push(
                format!("bucket {bucket} of claim {key} carries marker {marker:?}, not {uid}"),
            ),
            Some(_) => {}
        }
        for (kind, list) in [("Secret", &secrets), ("ConfigMap", &config_maps)] {
            match list
                .iter()
                .find(|(n, m)| n == ns && m.name.as_deref() == Some(name))
            {
                None => a.wrong.push(format!("claim {key} has no {kind}")),
                Some((_, m)) if owner_uid(m).as_deref() != Some(uid.as_str()) => a
                    .wrong
                    .push(format!("{kind} {key} is not owned by its claim")),
                Some(_) => {}
            }
        }
    }

    // ObjectBuckets: bound to a live claim, or Released (a retained bucket).
    let mut referenced: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for ob in &obs {
        let r = ob.spec.claim_ref.clone().unwrap_or_default();
        let in_scope = r
            .namespace
            .as_ref()
            .is_some_and(|n| x.namespaces.contains(n));
        if let Some(b) = ob.bucket_name() {
            referenced
                .entry(b.to_owned())
                .or_default()
                .push(ob.name_any());
        }
        if !in_scope {
            continue;
        }
        let live = match r.uid.as_deref().filter(|u| !u.is_empty()) {
            Some(u) => claim_uids.contains(u),
            None => claims.contains_key(&(
                r.namespace.clone().unwrap_or_default(),
                r.name.clone().unwrap_or_default(),
            )),
        };
        let released = ob.status.as_ref().and_then(|s| s.phase) == Some(BucketPhase::Released);
        if !live {
            if !released {
                a.orphaned.push(format!(
                    "ObjectBucket {} (claim {}/{} is gone, not Released)",
                    ob.name_any(),
                    r.namespace.unwrap_or_default(),
                    r.name.unwrap_or_default()
                ));
            } else if has_finalizer(&ob.metadata) {
                a.wrong.push(format!(
                    "released ObjectBucket {} still has the finalizer",
                    ob.name_any()
                ));
            }
        }
    }

    // Secrets and ConfigMaps belong to live claims.
    for (kind, list) in [("Secret", &secrets), ("ConfigMap", &config_maps)] {
        for (ns, m) in list {
            if let Some(uid) = owner_uid(m)
                && !claim_uids.contains(&uid)
            {
                a.orphaned.push(format!(
                    "{kind} {ns}/{} (its claim is gone)",
                    m.name.clone().unwrap_or_default()
                ));
            }
        }
    }

    // Every bucket is accounted for by exactly one ObjectBucket.
    for (bucket, marker) in &store {
        if x.preexisting.contains(bucket) {
            continue;
        }
        match referenced.get(bucket).map(Vec::len).unwrap_or(0) {
            0 => a.orphaned.push(format!(
                "bucket {bucket} (marker {marker:?}) has no ObjectBucket"
            )),
            1 => {}
            n => a.wrong.push(format!(
                "bucket {bucket} is named by {n} ObjectBuckets: {:?}",
                referenced.get(bucket)
            )),
        }
    }
    for b in &x.preexisting {
        if !store.contains_key(b) {
            a.lost.push(format!("{b} (pre-existing)"));
        }
    }

    // Creation intents last only while their claim is being provisioned.
    for intent in store_intents(&env.s3_client()).await? {
        let in_scope = intent
            .claim
            .as_deref()
            .and_then(|c| c.split_once('/'))
            .is_none_or(|(ns, _)| x.namespaces.iter().any(|n| n == ns));
        if !in_scope {
            continue;
        }
        match claims.values().find(|c| c.uid().as_deref() == Some(&intent.uid)) {
            None => a.orphaned.push(format!(
                "creation intent for bucket {} of claim {:?} (UID {}), which is gone",
                intent.bucket, intent.claim, intent.uid
            )),
            Some(c) if c.status.as_ref().and_then(|s| s.phase) == Some(ClaimPhase::Bound) => {
                a.wrong.push(format!(
                    "creation intent for bucket {} outlives the provisioning of claim {:?}, which is Bound",
                    intent.bucket, intent.claim
                ))
            }
            Some(_) => {}
        }
    }

    // Deleted claims: gone, and their buckets per reclaim policy.
    for d in &x.deleted {
        let key = format!("{}/{}", d.namespace, d.name);
        if let Some(c) = claims.get(&(d.namespace.clone(), d.name.clone()))
            && c.uid().as_deref() == Some(d.uid.as_str())
        {
            a.wrong.push(format!(
                "deleted claim {key} still exists ({})",
                c.status
                    .as_ref()
                    .and_then(|s| s.message.clone())
                    .unwrap_or_default()
            ));
            continue;
        }
        let Some(bucket) = &d.bucket else { continue };
        if !d.kind.greenfield() {
            continue;
        }
        let marker_ours = |m: &Option<String>| m.as_deref() == Some(d.uid.as_str());
        match (d.kind.keeps_bucket(), store.get(bucket)) {
            // Retained: it must still be there if the claim was ever Bound
            // (one deleted while provisioning may keep it only with a
            // Released ObjectBucket: an unrecorded one is an orphan above).
            (true, None) if d.was_bound => a
                .lost
                .push(format!("{bucket} (retained by deleted claim {key})")),
            (true, Some(m)) if d.was_bound && !marker_ours(m) => a.wrong.push(format!(
                "retained bucket {bucket} carries marker {m:?}, not {}",
                d.uid
            )),
            (false, Some(m)) if marker_ours(m) => a.orphaned.push(format!(
                "bucket {bucket} of deleted claim {key} (reclaim Delete) still exists"
            )),
            _ => {}
        }
    }
    Ok(a)
}
