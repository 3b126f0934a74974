//! See [`super`]: attacks through COSI (`objectstorage.k8s.io/v1alpha2`),
//! on RustFS (one store user per BucketAccess). A victim namespace holds a
//! BucketClaim with data and a BucketAccess whose keys the victim uses; a
//! tenant in another namespace tries to reach, revoke or delete them with
//! what it controls: the claim names its BucketAccess lists, a Secret it
//! creates first under the accessSecretName, the annotations of its own
//! BucketClaim and BucketAccess (`objectstorage.k8.io/bucketclaim-being-deleted`,
//! `objectstorage.k8s.io/controller-management-override`), a static
//! BucketClaim naming the victim's Bucket, and (as a tenant granted more
//! than the tenant roles give) the status of its own objects, written while
//! the controller is down. Counted: `attacks`; `foreign_buckets` (keys in a
//! tenant Secret that reach the victim's bucket, a tenant object bound to
//! or recording the victim's Bucket, the victim's Bucket re-bound);
//! `foreign_revocations` (the victim's keys stop working, or a Secret the
//! controller did not create is overwritten or deleted); `data_lost` (the
//! victim's object or bucket gone); `orphaned` (a store user left after
//! its BucketAccess is gone, or a BucketAccess of a driver we do not run
//! gone before that driver released its Secret). Issue 36: a BucketAccess
//! deleted and re-created at once under the same name with a wider mode
//! (it must get a user of its own, and the old one's be revoked), and a
//! deleting BucketAccess of another driver carrying the
//! `sidecar-cleanup-finished` annotation its owner wrote; and the tenant
//! editing its BucketAccess in a tight loop (item 6) while the victim's
//! namespace asks for a new claim.

use std::time::Duration;

use anyhow::{Context as _, Result, ensure};
use aws_sdk_s3::primitives::ByteStream;
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use obc_tests::cosi_e2e::{
    ACCESS_CLASS, AccessKeys, BEING_DELETED, CosiSuite, DELETE_CLASS, DRIVER, Kind,
    MANAGEMENT_OVERRIDE, access_keys, access_of, api, claim_of_class, create, keys_of, reach,
    status_str, wait_ready,
};
use obc_tests::reliability::{Proc, Summary, ownerless_users};
use obc_tests::wait_for;
use serde_json::json;

use super::super::{BIN, T, logs};

const VICTIM: &str = "cosi-victim";
const TENANT: &str = "cosi-tenant";
const VICTIM_OBJECT: &str = "victim.txt";
/// How long a refused attack is watched for a late success.
const SETTLE: Duration = Duration::from_secs(8);

/// What the victim has, recorded once bound.
struct Victim {
    bucket_object: String,
    bucket_id: String,
    claim_uid: String,
    keys: AccessKeys,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_reaches_no_other_namespaces_bucket_through_cosi() {
    let suite = CosiSuite::start(BIN, "tenant-cosi")
        .await
        .expect("environment, COSI and RustFS start");
    let mut summary = Summary::new("tenant attacks: COSI (RustFS)");
    let result = attacks(&suite, &mut summary).await;
    suite
        .finish(summary, logs(), result)
        .await
        .expect("no COSI attack reaches what is not the tenant's");
}

async fn attacks(suite: &CosiSuite, summary: &mut Summary) -> Result<()> {
    let admin = &suite.admin;
    for ns in [VICTIM, TENANT] {
        suite.env.ensure_namespace(ns).await?;
    }
    let mut proc = suite.launch.start(logs())?;
    let victim = victim(suite).await?;
    let mut outcomes = Vec::new();

    outcomes.push(cross_namespace_claim_name(suite, summary, &victim).await?);
    outcomes.push(static_claim_of_the_victims_bucket(suite, summary, &victim).await?);
    outcomes.push(secret_created_first(suite, summary).await?);
    outcomes.push(replaced_under_the_same_name(suite, summary).await?);
    outcomes.push(foreign_drivers_cleanup_annotation(suite, summary).await?);
    outcomes.push(edit_loop(suite, summary).await?);
    proc.kill().await;
    outcomes.push(forged_status_and_annotations(suite, summary, &victim, &mut proc).await?);

    // The victim, after all of it.
    let still = reach(
        &victim.keys.s3(),
        &suite.root(),
        &victim.bucket_id,
        VICTIM_OBJECT,
    )
    .await;
    if !still.read || !still.write {
        summary.counts.foreign_revocations += 1;
        outcomes.push(format!("the victim's keys lost access: {still:?}"));
    }
    let object_kept = suite
        .root()
        .head_object()
        .bucket(&victim.bucket_id)
        .key(VICTIM_OBJECT)
        .send()
        .await
        .is_ok();
    if !object_kept {
        summary.counts.data_lost += 1;
        outcomes.push("the victim's object is gone".into());
    }
    let bucket = api(admin, Kind::Bucket, "")
        .get(&victim.bucket_object)
        .await?;
    // Nothing a tenant did marks the victim's Bucket as being deleted or
    // makes the victim's claim or access not ready.
    if bucket
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(BEING_DELETED))
    {
        summary.counts.foreign_buckets += 1;
        outcomes.push("the victim's Bucket is marked being-deleted".into());
    }
    for (kind, name) in [(Kind::BucketClaim, "data"), (Kind::BucketAccess, "app")] {
        let o = api(admin, kind, VICTIM).get(name).await?;
        if !obc_tests::cosi_e2e::ready(&o) {
            summary.counts.foreign_buckets += 1;
            outcomes.push(format!(
                "the victim's {kind:?} is not ready: {}",
                o.data["status"]
            ));
        }
    }
    let claim_uid = bucket.data["spec"]["bucketClaimRef"]["uid"].as_str();
    if claim_uid != Some(victim.claim_uid.as_str()) {
        summary.counts.foreign_buckets += 1;
        outcomes.push(format!("the victim's Bucket is bound to {claim_uid:?}"));
    }
    // Every store user left has a live owner once revocations settle.
    let ownerless = settled_ownerless(suite).await?;
    if !ownerless.is_empty() {
        summary.counts.orphaned_principals += ownerless.len();
        outcomes.push(format!("store users without a live owner: {ownerless:?}"));
    }
    summary.note("outcomes", outcomes.join("; "));
    cleanup(suite, summary, &victim).await?;
    ensure!(
        summary.counts.clean(),
        "a COSI attack reached what was not the tenant's: {:?}; {outcomes:?}",
        summary.counts
    );
    summary.counts.scenarios += 1;
    proc.kill().await;
    Ok(())
}

/// The store's users without a live claim or BucketAccess, after giving
/// revocations under way time to finish.
async fn settled_ownerless(suite: &CosiSuite) -> Result<Vec<String>> {
    let (root, _) = suite.store.root_credentials();
    let deadline = tokio::time::Instant::now() + T;
    loop {
        let ownerless = ownerless_users(&suite.admin, &suite.store_admin, &root).await?;
        if ownerless.is_empty() || tokio::time::Instant::now() > deadline {
            return Ok(ownerless);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The victim's BucketClaim, its BucketAccess, and an object written with
/// its keys.
async fn victim(suite: &CosiSuite) -> Result<Victim> {
    let admin = &suite.admin;
    create(
        admin,
        Kind::BucketClaim,
        VICTIM,
        "data",
        claim_of_class(DELETE_CLASS),
    )
    .await?;
    let access = access_of(ACCESS_CLASS, &[("data", "ReadWrite", "app-keys")]);
    create(admin, Kind::BucketAccess, VICTIM, "app", access).await?;
    let claim = wait_ready(admin, Kind::BucketClaim, VICTIM, "data", T).await?;
    wait_ready(admin, Kind::BucketAccess, VICTIM, "app", T).await?;
    let bucket_object = status_str(&claim, "boundBucketName").context("boundBucketName")?;
    let bucket = api(admin, Kind::Bucket, "").get(&bucket_object).await?;
    let bucket_id = status_str(&bucket, "bucketID").context("bucketID")?;
    let keys = access_keys(admin, VICTIM, "app-keys").await?;
    keys.s3()
        .put_object()
        .bucket(&bucket_id)
        .key(VICTIM_OBJECT)
        .body(ByteStream::from_static(b"the victim's data"))
        .send()
        .await
        .context("the victim writes with its keys")?;
    Ok(Victim {
        bucket_object,
        bucket_id,
        claim_uid: claim.uid().unwrap_or_default(),
        keys,
    })
}

/// Whether the Secret `ns/name`, if it exists and holds COSI keys, reaches
/// the victim's bucket.
async fn secret_reaches(suite: &CosiSuite, ns: &str, name: &str, victim: &Victim) -> bool {
    let Ok(Some(secret)) = Api::<Secret>::namespaced(suite.admin.clone(), ns)
        .get_opt(name)
        .await
    else {
        return false;
    };
    let Ok(keys) = keys_of(&secret) else {
        return false;
    };
    !reach(&keys.s3(), &suite.root(), &victim.bucket_id, VICTIM_OBJECT)
        .await
        .none()
}

/// Whether a BucketAccess records the victim's Bucket as accessed.
fn records_victim(access: &DynamicObject, victim: &Victim) -> bool {
    access.data["status"]["accessedBuckets"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|b| {
            b["bucketName"] == victim.bucket_object.as_str()
                || b["bucketID"] == victim.bucket_id.as_str()
        })
}

/// Watches the tenant's BucketAccess `name` until the controller has
/// answered it (a status error, or readyToUse), then for [`SETTLE`] more:
/// counts a foreign bucket if its Secret reaches the victim's bucket, or
/// (unless the test forged its status, which then names the victim's
/// Bucket by the tenant's own hand) it records the victim's Bucket, or an
/// account was granted while it records it. Returns what it saw.
async fn watch_access(
    suite: &CosiSuite,
    summary: &mut Summary,
    name: &str,
    secret: &str,
    victim: &Victim,
    status_forged: bool,
) -> Result<String> {
    let accesses = api(&suite.admin, Kind::BucketAccess, TENANT);
    let answered = wait_for(
        T,
        format!("the controller to answer BucketAccess {name}"),
        || {
            let accesses = accesses.clone();
            async move {
                let a = accesses.get(name).await?;
                let answered = !obc_tests::cosi_e2e::error_message(&a).is_empty()
                    || obc_tests::cosi_e2e::ready(&a);
                Ok(answered.then_some(()))
            }
        },
    )
    .await
    .is_ok();
    let until = tokio::time::Instant::now() + SETTLE;
    let mut reached = false;
    let mut last = None;
    while tokio::time::Instant::now() < until && !reached {
        let a = accesses.get(name).await?;
        let granted = status_str(&a, "accountID").is_some();
        let recorded = records_victim(&a, victim) && (granted || !status_forged);
        reached = recorded || secret_reaches(suite, TENANT, secret, victim).await;
        last = Some(a);
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    if !answered {
        summary.note(&format!("{name} unanswered"), "no status error, not ready");
    }
    if reached {
        summary.counts.foreign_buckets += 1;
    }
    let status = last
        .map(|a| a.data["status"].to_string())
        .unwrap_or_default();
    Ok(format!(
        "{name}: reached the victim: {reached}; status {status}"
    ))
}

/// A BucketAccess in the tenant's namespace naming `data`, a claim that
/// exists only in the victim's: it gets nothing; once the tenant makes its
/// own `data`, it gets keys to that one only.
async fn cross_namespace_claim_name(
    suite: &CosiSuite,
    summary: &mut Summary,
    victim: &Victim,
) -> Result<String> {
    summary.counts.attacks += 1;
    let access = access_of(ACCESS_CLASS, &[("data", "ReadWrite", "steal-keys")]);
    create(&suite.admin, Kind::BucketAccess, TENANT, "steal", access).await?;
    let before = watch_access(suite, summary, "steal", "steal-keys", victim, false).await?;
    create(
        &suite.admin,
        Kind::BucketClaim,
        TENANT,
        "data",
        claim_of_class(DELETE_CLASS),
    )
    .await?;
    wait_ready(&suite.admin, Kind::BucketAccess, TENANT, "steal", T).await?;
    let after = watch_access(suite, summary, "steal", "steal-keys", victim, false).await?;
    let own = access_keys(&suite.admin, TENANT, "steal-keys").await?;
    ensure!(
        own.bucket != victim.bucket_id,
        "the tenant's access got the victim's bucket id"
    );
    Ok(format!(
        "cross-namespace claim name: {before}; after its own claim: {after}"
    ))
}

/// A static BucketClaim naming the victim's Bucket: never bound, a
/// BucketAccess on it gets nothing, and its deletion leaves the victim's
/// Bucket, bucket and data.
async fn static_claim_of_the_victims_bucket(
    suite: &CosiSuite,
    summary: &mut Summary,
    victim: &Victim,
) -> Result<String> {
    summary.counts.attacks += 1;
    let admin = &suite.admin;
    let body = json!({"spec": {"existingBucketName": victim.bucket_object, "protocols": ["S3"]}});
    create(admin, Kind::BucketClaim, TENANT, "static", body).await?;
    let access = access_of(ACCESS_CLASS, &[("static", "ReadWrite", "static-keys")]);
    create(admin, Kind::BucketAccess, TENANT, "static", access).await?;
    let seen = watch_access(suite, summary, "static", "static-keys", victim, false).await?;
    let claim = api(admin, Kind::BucketClaim, TENANT).get("static").await?;
    let bound = status_str(&claim, "boundBucketName");
    if bound.as_deref() == Some(victim.bucket_object.as_str()) {
        summary.counts.foreign_buckets += 1;
    }
    for kind in [Kind::BucketAccess, Kind::BucketClaim] {
        api(admin, kind, TENANT)
            .delete("static", &DeleteParams::default())
            .await?;
    }
    for kind in [Kind::BucketAccess, Kind::BucketClaim] {
        obc_tests::recording::wait_gone(&api(admin, kind, TENANT), "static", T)
            .await
            .with_context(|| format!("the tenant's static {kind:?} goes"))?;
    }
    let message = obc_tests::cosi_e2e::error_message(&claim);
    Ok(format!(
        "static claim of the victim's Bucket: bound {bound:?}, error {message:?}; {seen}"
    ))
}

/// The tenant creates the Secret a BucketAccess will name before the
/// BucketAccess: the controller neither writes keys into it nor deletes
/// it, and no store user outlives the BucketAccess.
async fn secret_created_first(suite: &CosiSuite, summary: &mut Summary) -> Result<String> {
    summary.counts.attacks += 1;
    let admin = &suite.admin;
    let secrets = Api::<Secret>::namespaced(admin.clone(), TENANT);
    let planted: Secret = serde_json::from_value(json!({
        "metadata": {"name": "trap-keys"},
        "stringData": {"COSI_S3_ACCESS_KEY_ID": "planted-by-the-tenant", "note": "mine"}
    }))?;
    secrets.create(&PostParams::default(), &planted).await?;
    let users_before = suite.users().await?;
    let access = access_of(ACCESS_CLASS, &[("data", "ReadOnly", "trap-keys")]);
    create(admin, Kind::BucketAccess, TENANT, "trap", access).await?;
    let message = obc_tests::cosi_e2e::wait_error(admin, Kind::BucketAccess, TENANT, "trap", T)
        .await
        .unwrap_or_else(|e| format!("(no error reported: {e:#})"));
    tokio::time::sleep(SETTLE).await;
    let kept = |s: &Secret| {
        s.data
            .as_ref()
            .and_then(|d| d.get("COSI_S3_ACCESS_KEY_ID"))
            .map(|v| v.0.clone())
            == Some(b"planted-by-the-tenant".to_vec())
    };
    let overwritten = !kept(&secrets.get("trap-keys").await?);
    api(admin, Kind::BucketAccess, TENANT)
        .delete("trap", &DeleteParams::default())
        .await?;
    obc_tests::recording::wait_gone(&api(admin, Kind::BucketAccess, TENANT), "trap", T)
        .await
        .context("the BucketAccess over a planted Secret goes")?;
    let after = secrets.get_opt("trap-keys").await?;
    let deleted = after.is_none();
    if overwritten || deleted || after.as_ref().is_some_and(|s| !kept(s)) {
        summary.counts.foreign_revocations += 1;
    }
    let left: Vec<String> = suite
        .users()
        .await?
        .difference(&users_before)
        .cloned()
        .collect();
    summary.counts.orphaned += left.len();
    Ok(format!(
        "Secret created first: error {message:?}; overwritten {overwritten}; deleted with the BucketAccess {deleted}; users left {left:?}"
    ))
}

/// With the controller down, the tenant (granted status writes, which the
/// tenant roles never give) forges its objects' status to name the
/// victim's Bucket, and annotates its own with the being-deleted,
/// management-override and cleanup-finished annotations; then the
/// controller starts. Nothing of the victim's is reached, and the
/// annotated BucketAccess's keys are revoked when it is deleted.
async fn forged_status_and_annotations(
    suite: &CosiSuite,
    summary: &mut Summary,
    victim: &Victim,
    proc: &mut Proc,
) -> Result<String> {
    let admin = &suite.admin;
    let pp = PatchParams::default();
    // A fresh claim whose status names the victim's Bucket.
    summary.counts.attacks += 1;
    create(
        admin,
        Kind::BucketClaim,
        TENANT,
        "forged",
        claim_of_class(DELETE_CLASS),
    )
    .await?;
    let forged = json!({"status": {"boundBucketName": victim.bucket_object, "readyToUse": true,
        "protocols": ["S3"]}});
    api(admin, Kind::BucketClaim, TENANT)
        .patch_status("forged", &pp, &Patch::Merge(&forged))
        .await
        .context("forging the claim's status")?;
    // A BucketAccess whose status records the victim's bucket, handed to
    // the driver as if the binding role had.
    summary.counts.attacks += 1;
    let access = access_of(ACCESS_CLASS, &[("data", "ReadWrite", "forged-keys")]);
    create(admin, Kind::BucketAccess, TENANT, "forged", access).await?;
    let forged = json!({"status": {"readyToUse": false, "driverName": DRIVER,
        "authenticationType": "Key",
        "accessedBuckets": [{"bucketName": victim.bucket_object, "bucketID": victim.bucket_id,
            "bucketClaimName": "data"}]}});
    api(admin, Kind::BucketAccess, TENANT)
        .patch_status("forged", &pp, &Patch::Merge(&forged))
        .await
        .context("forging the access's status")?;
    // Annotations a tenant may write: being-deleted on its claim, the
    // override on a BucketAccess it then deletes.
    summary.counts.attacks += 1;
    let annotate = |key: &str| json!({"metadata": {"annotations": {key: ""}}});
    api(admin, Kind::BucketClaim, TENANT)
        .patch("data", &pp, &Patch::Merge(&annotate(BEING_DELETED)))
        .await?;
    let access = access_of(ACCESS_CLASS, &[("data", "ReadWrite", "override-keys")]);
    create(admin, Kind::BucketAccess, TENANT, "override", access).await?;

    *proc = suite.launch.start(logs())?;
    let forged_seen = watch_access(suite, summary, "forged", "forged-keys", victim, true).await?;
    wait_ready(admin, Kind::BucketAccess, TENANT, "override", T).await?;
    let override_keys = access_keys(admin, TENANT, "override-keys").await?;
    // Both annotations that hand a BucketAccess back to the binding role,
    // which does not revoke: the override, and the driver's own
    // cleanup-finished, written before the deletion.
    let hand_back = json!({"metadata": {"annotations": {
        MANAGEMENT_OVERRIDE: "",
        lib_provisioner::cosi::api::SIDECAR_CLEANUP_FINISHED_ANNOTATION: "",
    }}});
    api(admin, Kind::BucketAccess, TENANT)
        .patch("override", &pp, &Patch::Merge(&hand_back))
        .await?;
    api(admin, Kind::BucketAccess, TENANT)
        .delete("override", &DeleteParams::default())
        .await?;
    let gone =
        obc_tests::recording::wait_gone(&api(admin, Kind::BucketAccess, TENANT), "override", T)
            .await;
    let revoked = wait_for(T, "the overridden access's user to be removed", || async {
        Ok((!suite.users().await?.contains(&override_keys.key_id)).then_some(()))
    })
    .await
    .is_ok();
    // Not counted here: a user left is counted once, by `cleanup`.
    let forged_claim = api(admin, Kind::BucketClaim, TENANT).get("forged").await?;
    api(admin, Kind::BucketClaim, TENANT)
        .delete("forged", &DeleteParams::default())
        .await?;
    let forged_claim_gone =
        obc_tests::recording::wait_gone(&api(admin, Kind::BucketClaim, TENANT), "forged", T)
            .await
            .is_ok();
    Ok(format!(
        "forged status: {forged_seen}; forged claim error {:?}, gone after delete {forged_claim_gone}; override access gone {}, its user removed {revoked}",
        obc_tests::cosi_e2e::error_message(&forged_claim),
        gone.is_ok()
    ))
}

/// Deletes every object of both namespaces and waits; counts store users
/// and buckets left as orphans.
async fn cleanup(suite: &CosiSuite, summary: &mut Summary, victim: &Victim) -> Result<()> {
    let admin = &suite.admin;
    for kind in [Kind::BucketAccess, Kind::BucketClaim] {
        for ns in [TENANT, VICTIM] {
            let api = api(admin, kind, ns);
            for o in api.list(&Default::default()).await? {
                api.delete(&o.name_any(), &DeleteParams::default()).await?;
            }
        }
    }
    for kind in [Kind::BucketAccess, Kind::BucketClaim] {
        for ns in [TENANT, VICTIM] {
            let api = api(admin, kind, ns);
            wait_for(T, format!("every {kind:?} in {ns} to go"), || async {
                Ok(api
                    .list(&Default::default())
                    .await?
                    .items
                    .is_empty()
                    .then_some(()))
            })
            .await?;
        }
    }
    let users = wait_for(T, "no store user left", || async {
        let users = suite.users().await?;
        Ok(users.is_empty().then_some(users))
    })
    .await;
    if let Err(e) = users {
        summary.counts.orphaned += suite.users().await?.len();
        summary.note("users left", format!("{e:#}"));
    }
    let buckets = suite.buckets().await?;
    let left: Vec<_> = buckets
        .iter()
        .filter(|b| **b != sample_provisioner::store::DEFAULT_STATE_BUCKET)
        .collect();
    summary.counts.orphaned += left.len();
    if !left.is_empty() {
        summary.note(
            "buckets left",
            format!("{left:?} (victim's: {})", victim.bucket_id),
        );
    }
    Ok(())
}

/// The tenant's BucketAccess `swap` (ReadOnly, on its own claim `data`),
/// deleted and re-created at once under the same name asking ReadWrite:
/// the replacement gets a store user of its own, never its predecessor's
/// key, and the predecessor's user is revoked (a user left is counted by
/// `cleanup`).
async fn replaced_under_the_same_name(suite: &CosiSuite, summary: &mut Summary) -> Result<String> {
    summary.counts.attacks += 1;
    let admin = &suite.admin;
    let accesses = api(admin, Kind::BucketAccess, TENANT);
    let body = |mode: &str| access_of(ACCESS_CLASS, &[("data", mode, "swap-keys")]);
    create(admin, Kind::BucketAccess, TENANT, "swap", body("ReadOnly")).await?;
    wait_ready(admin, Kind::BucketAccess, TENANT, "swap", T).await?;
    let old = access_keys(admin, TENANT, "swap-keys").await?;
    accesses.delete("swap", &DeleteParams::default()).await?;
    // Re-created the moment the name is free.
    wait_for(T, "the name swap to be free again", || async {
        match create(admin, Kind::BucketAccess, TENANT, "swap", body("ReadWrite")).await {
            Ok(_) => Ok(Some(())),
            Err(_) => Ok(None),
        }
    })
    .await?;
    wait_ready(admin, Kind::BucketAccess, TENANT, "swap", T).await?;
    let new = access_keys(admin, TENANT, "swap-keys").await?;
    let inherited = new.key_id == old.key_id;
    if inherited {
        summary.counts.foreign_buckets += 1;
    }
    let old_revoked = wait_for(T, "the replaced access's user to be removed", || async {
        Ok((!suite.users().await?.contains(&old.key_id)).then_some(()))
    })
    .await
    .is_ok();
    Ok(format!(
        "replaced under the same name: inherited the old key {inherited}; old user revoked {old_revoked}"
    ))
}

/// A driver this process does not run (its sidecar played by the test):
/// the tenant annotates its deleting BucketAccess `sidecar-cleanup-finished`
/// while that driver's access Secret still holds its finalizer. The
/// BucketAccess must stay until the driver released the Secret (gone
/// earlier, nothing would ever revoke that driver's user: counted as
/// orphaned).
async fn foreign_drivers_cleanup_annotation(
    suite: &CosiSuite,
    summary: &mut Summary,
) -> Result<String> {
    const FOREIGN: &str = "other.example.com";
    summary.counts.attacks += 1;
    let admin = &suite.admin;
    let pp = PatchParams::default();
    let spec = json!({"spec": {"driverName": FOREIGN, "deletionPolicy": "Retain"}});
    create(admin, Kind::BucketClass, "", "foreign", spec).await?;
    let spec = json!({"spec": {"driverName": FOREIGN, "authenticationType": "Key"}});
    create(admin, Kind::BucketAccessClass, "", "foreign-keys", spec).await?;
    let claim = create(
        admin,
        Kind::BucketClaim,
        TENANT,
        "elsewhere",
        claim_of_class("foreign"),
    )
    .await?;
    // The foreign sidecar provisions the Bucket.
    let bucket = format!("bc-{}", claim.uid().unwrap_or_default());
    let buckets = api(admin, Kind::Bucket, "");
    wait_for(T, format!("Bucket {bucket}"), || async {
        Ok(buckets.get_opt(&bucket).await?)
    })
    .await?;
    let status =
        json!({"status": {"readyToUse": true, "bucketID": "elsewhere", "protocols": ["S3"]}});
    buckets
        .patch_status(&bucket, &pp, &Patch::Merge(&status))
        .await?;
    wait_ready(admin, Kind::BucketClaim, TENANT, "elsewhere", T).await?;
    let access = access_of(
        "foreign-keys",
        &[("elsewhere", "ReadWrite", "elsewhere-keys")],
    );
    let a = create(admin, Kind::BucketAccess, TENANT, "elsewhere", access).await?;
    let accesses = api(admin, Kind::BucketAccess, TENANT);
    wait_for(T, "the hand-off to the foreign driver", || async {
        let a = accesses.get("elsewhere").await?;
        Ok((status_str(&a, "driverName").as_deref() == Some(FOREIGN)).then_some(()))
    })
    .await?;
    // The foreign sidecar reserves its Secret, then grants.
    let secrets = Api::<Secret>::namespaced(admin.clone(), TENANT);
    let reserved: Secret = serde_json::from_value(json!({
        "metadata": {"name": "elsewhere-keys",
            "finalizers": [lib_provisioner::cosi::api::FINALIZER],
            "ownerReferences": [{"apiVersion": "objectstorage.k8s.io/v1alpha2",
                "kind": "BucketAccess", "name": "elsewhere", "uid": a.uid(),
                "controller": true, "blockOwnerDeletion": true}]},
        "type": "Opaque"
    }))?;
    secrets.create(&PostParams::default(), &reserved).await?;
    // The tenant: the annotation, then the deletion.
    let annotate = json!({"metadata": {"annotations": {
        lib_provisioner::cosi::api::SIDECAR_CLEANUP_FINISHED_ANNOTATION: ""}}});
    accesses
        .patch("elsewhere", &pp, &Patch::Merge(&annotate))
        .await?;
    accesses
        .delete("elsewhere", &DeleteParams::default())
        .await?;
    tokio::time::sleep(SETTLE).await;
    let held = accesses.get_opt("elsewhere").await?.is_some();
    if !held {
        summary.counts.orphaned += 1;
    }
    // The foreign sidecar's cleanup: its Secret released and deleted.
    let release = json!({"metadata": {"finalizers": null}});
    secrets
        .patch("elsewhere-keys", &pp, &Patch::Merge(&release))
        .await?;
    let _ = secrets
        .delete("elsewhere-keys", &DeleteParams::default())
        .await;
    let gone = obc_tests::recording::wait_gone(&accesses, "elsewhere", T)
        .await
        .is_ok();
    Ok(format!(
        "foreign driver's cleanup annotation: held until its Secret went {held}; gone after {gone}"
    ))
}

/// Issue 36 item 6: the tenant annotates its own BucketAccess (all the
/// `edit` role needs) one PATCH after another for [`LOOP`], while the
/// victim asks for a new BucketClaim and an access to it. The victim must
/// be served, and the controller must not spend on the loop more than the
/// object's pace allows: every pass it runs reads the access Secret (no
/// watch holds Secrets), nothing the caches hold, and writes nothing.
/// (How much the loop slows the victim is the benchmark's figure, not a
/// timed test's.)
async fn edit_loop(suite: &CosiSuite, summary: &mut Summary) -> Result<String> {
    summary.counts.attacks += 1;
    let admin = &suite.admin;
    let accesses = api(admin, Kind::BucketAccess, TENANT);
    create(
        admin,
        Kind::BucketAccess,
        TENANT,
        "looped",
        access_of(ACCESS_CLASS, &[("data", "ReadOnly", "looped-keys")]),
    )
    .await?;
    wait_ready(admin, Kind::BucketAccess, TENANT, "looped", T).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let audit = suite.env.audit_log_path();
    let before = obc_tests::rbac::audit_mark(&audit)?;
    let started = std::time::Instant::now();
    let served = async {
        create(
            admin,
            Kind::BucketClaim,
            VICTIM,
            "during-loop",
            claim_of_class(DELETE_CLASS),
        )
        .await?;
        let access = access_of(
            ACCESS_CLASS,
            &[("during-loop", "ReadWrite", "during-loop-keys")],
        );
        create(admin, Kind::BucketAccess, VICTIM, "during-loop", access).await?;
        wait_ready(admin, Kind::BucketClaim, VICTIM, "during-loop", T).await?;
        wait_ready(admin, Kind::BucketAccess, VICTIM, "during-loop", T).await?;
        anyhow::Ok(started.elapsed())
    };
    let edits = async {
        let mut edits = 0u32;
        while started.elapsed() < LOOP {
            let patch = json!({"metadata": {"annotations": {"tenant/loop": edits.to_string()}}});
            accesses
                .patch("looped", &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
            edits += 1;
        }
        anyhow::Ok(edits)
    };
    let (served, edits) = tokio::join!(served, edits);
    let (served, edits) = (served?, edits?);
    // The passes the last edits started.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let user = format!(
        "system:serviceaccount:{}:sample-provisioner",
        obc_tests::reliability::SYSTEM_NAMESPACE
    );
    let mut by_kind = std::collections::BTreeMap::<String, usize>::new();
    for r in obc_tests::rbac::requests_after(&audit, before, &user)? {
        if r.namespace.as_deref() == Some(TENANT) {
            *by_kind
                .entry(format!("{} {}", r.verb, r.resource))
                .or_default() += 1;
        }
    }
    // The pace: a burst of 10 passes, then 5 a second, each reading one
    // Secret; some slack for the passes in flight at the ends.
    let allowed = 10 + 5 * (LOOP.as_secs() as usize + 2) + 5;
    let secret_reads = by_kind.get("get secrets").copied().unwrap_or(0);
    let other: Vec<_> = by_kind
        .iter()
        .filter(|(k, _)| k.as_str() != "get secrets")
        .collect();
    ensure!(
        secret_reads <= allowed && other.is_empty(),
        "the tenant's {edits} edits bought more than its pace: {by_kind:?} (at most {allowed} Secret reads, nothing else)"
    );
    Ok(format!(
        "edit loop: {edits} edits in {LOOP:?}; the controller's requests in the tenant's namespace {by_kind:?}; the victim's new claim and access ready after {served:?}"
    ))
}

/// How long the tenant loops.
const LOOP: Duration = Duration::from_secs(5);
