//! See [`super`]: attacks before bind (issue 25). A tenant's claim names
//! an administrator's fresh, empty bucket through the generated-name
//! annotation (against RustFS, where the sample's ownership is a bucket tag
//! and credentials are per claim); and tenants race a victim for one exact
//! bucket name, both claims created at once.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context as _, Result, ensure};
use aws_sdk_s3::primitives::ByteStream;
use kube::Client;
use kube::api::{DeleteParams, PostParams};
use lib_provisioner::api::{
    ClaimPhase, FINALIZER, GENERATED_NAME_ANNOTATION, ObjectBucketClaim, ObjectBucketClaimSpec,
    PROVISIONER_LABEL,
};
use obc_tests::reliability::{
    Kind, Summary, claim_keys, register_secret, wait_all_bound, wait_all_gone,
};
use obc_tests::rustfs::RustFs;
use obc_tests::testenv::s3_client_for;
use obc_tests::wait_for;
use sample_provisioner::store::OWNER_TAG;

use super::super::{LABEL, Suite, T, claims, create, logs, message, phase};

/// The administrator's bucket, made for a brownfield class, still empty.
const ADMIN_BUCKET: &str = "admin-fresh";
/// The object the administrator writes into it once the claims settled.
const ADMIN_OBJECT: &str = "admin-data.txt";

/// Waits until the claim is Bound or Failed.
async fn settled(client: &Client, ns: &str, name: &str) -> Result<ObjectBucketClaim> {
    let api = claims(client, ns);
    wait_for(T, format!("{ns}/{name} to settle"), || async {
        let c = api.get(name).await?;
        Ok(matches!(phase(&c), Some(ClaimPhase::Bound | ClaimPhase::Failed)).then_some(c))
    })
    .await
}

/// Whether the claim's Secret (if it has one) reaches `bucket`: a list, a
/// read of the admin's object, or a write.
async fn keys_reach(store: &RustFs, client: &Client, ns: &str, name: &str) -> bool {
    let Ok((key, secret)) = claim_keys(client, ns, name).await else {
        return false;
    };
    register_secret(&secret);
    let s3 = s3_client_for(&store.endpoint(), &key, &secret);
    let listed = s3
        .list_objects_v2()
        .bucket(ADMIN_BUCKET)
        .send()
        .await
        .is_ok();
    let read = s3
        .get_object()
        .bucket(ADMIN_BUCKET)
        .key(ADMIN_OBJECT)
        .send()
        .await
        .is_ok();
    let wrote = s3
        .put_object()
        .bucket(ADMIN_BUCKET)
        .key("tenant-was-here.txt")
        .body(ByteStream::from_static(b"x"))
        .send()
        .await
        .is_ok();
    listed || read || wrote
}

/// The claim UID the admin's bucket is tagged with, if any.
async fn owner_tag(store: &RustFs) -> Option<String> {
    let tags = store
        .root_client()
        .get_bucket_tagging()
        .bucket(ADMIN_BUCKET)
        .send()
        .await
        .ok()?;
    tags.tag_set()
        .iter()
        .find(|t| t.key() == OWNER_TAG)
        .map(|t| t.value().to_owned())
}

/// The attacks: a claim that names the admin's bucket through the
/// generated-name annotation, next to a prefix; and one that also forges
/// the library's finalizer and label, as if it had been prepared.
fn hijack_claims() -> Vec<ObjectBucketClaim> {
    let annotated = |name: &str, prefix: Option<&str>, forged: bool| {
        let mut c = ObjectBucketClaim::new(
            name,
            ObjectBucketClaimSpec {
                storage_class_name: "tenant-rustfs".into(),
                generate_bucket_name: prefix.map(str::to_owned),
                ..Default::default()
            },
        );
        c.metadata.annotations = Some(BTreeMap::from([(
            GENERATED_NAME_ANNOTATION.to_owned(),
            ADMIN_BUCKET.to_owned(),
        )]));
        if forged {
            c.metadata.finalizers = Some(vec![FINALIZER.to_owned()]);
            c.metadata.labels = Some(BTreeMap::from([(
                PROVISIONER_LABEL.to_owned(),
                LABEL.to_owned(),
            )]));
        }
        c
    };
    vec![
        annotated("hijack", Some("mine"), false),
        annotated("hijack-forged", None, true),
    ]
}

/// Issue 25, item 1: the admin's fresh bucket is never the tenant's: no
/// keys that work on it, no tag of the claim, and after the claims'
/// deletion (forceDelete) the bucket and the admin's object are there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_annotation_never_takes_over_an_empty_bucket() {
    Suite::run(
        "tenant attack: generated-name annotation on an admin's empty bucket (RustFS)",
        &["tenant"],
        async |suite, summary| {
            let store = RustFs::start(suite.env.dir())
                .await
                .context("RustFS (scripts/install-testenv builds it)")?;
            let result = hijack(suite, summary, &store).await;
            store.stop().await;
            result
        },
    )
    .await;
}

async fn hijack(suite: &Suite, summary: &mut Summary, store: &RustFs) -> Result<()> {
    let ns = "tenant";
    suite.env.ensure_namespace(ns).await?;
    super::rustfs_class(suite, store, "tenant-rustfs").await?;
    store
        .root_client()
        .create_bucket()
        .bucket(ADMIN_BUCKET)
        .send()
        .await
        .context("the admin's bucket")?;
    let _proc = suite.launch("hijack").start(logs())?;
    let api = claims(&suite.admin, ns);
    let attacks = hijack_claims();
    let names: Vec<String> = attacks
        .iter()
        .map(|c| c.metadata.name.clone().unwrap_or_default())
        .collect();
    for claim in &attacks {
        api.create(&PostParams::default(), claim).await?;
        summary.counts.attacks += 1;
    }
    let mut outcomes = Vec::new();
    for name in &names {
        let c = settled(&suite.admin, ns, name).await?;
        outcomes.push(format!("{name}: {:?}: {}", phase(&c), message(&c)));
    }
    // The admin starts using the bucket.
    store
        .root_client()
        .put_object()
        .bucket(ADMIN_BUCKET)
        .key(ADMIN_OBJECT)
        .body(ByteStream::from_static(b"the admin's data"))
        .send()
        .await?;
    let mut reached = Vec::new();
    for name in &names {
        let uid = api.get(name).await?.metadata.uid.unwrap_or_default();
        let keys = keys_reach(store, &suite.admin, ns, name).await;
        let tagged = owner_tag(store).await.as_deref() == Some(uid.as_str());
        if keys || tagged {
            summary.counts.foreign_buckets += 1;
            reached.push(format!("{name} (keys work: {keys}, tagged: {tagged})"));
        }
    }
    for name in &names {
        api.delete(name, &DeleteParams::default()).await?;
    }
    wait_all_gone(&suite.admin, ns, &names, T).await?;
    let root = store.root_client();
    let kept = root.head_bucket().bucket(ADMIN_BUCKET).send().await.is_ok()
        && root
            .get_object()
            .bucket(ADMIN_BUCKET)
            .key(ADMIN_OBJECT)
            .send()
            .await
            .is_ok();
    if !kept {
        summary.counts.data_lost += 1;
    }
    summary.note("outcomes", outcomes.join("; "));
    ensure!(
        reached.is_empty() && kept,
        "the tenant reached the admin's bucket {ADMIN_BUCKET}: {reached:?}; bucket and object kept after the claims' deletion: {kept}; claims: {outcomes:?}"
    );
    Ok(())
}

/// How many victims a tenant races in
/// [`racing_a_victim_for_a_bucket_name_never_shares_it`].
const RACES: usize = 12;

/// Issue 25, item 6: a tenant creates a claim for the same exact bucket
/// name at the same moment as its victim, many times over: per name one
/// claim reaches `provision` and binds, the other is told the name is
/// taken (before the provisioner: not the store's refusal).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_a_victim_for_a_bucket_name_never_shares_it() {
    Suite::run(
        "tenant attack: racing a victim for one bucket name",
        &["victim", "racer"],
        async |suite, summary| race(suite, summary).await,
    )
    .await;
}

async fn race(suite: &Suite, summary: &mut Summary) -> Result<()> {
    let victim = suite.namespace("victim").await?;
    suite.namespace("racer").await?;
    let _proc = suite.launch("race").start(logs())?;
    // The provisioner is up and watching before the races start, so that
    // both claims of a pair reach it at once (not in one initial list).
    create(
        &suite.admin,
        "victim",
        "warm-up",
        Kind::GeneratedDelete.spec(&victim, "warm-up"),
    )
    .await?;
    wait_all_bound(&suite.admin, "victim", &["warm-up".to_owned()], T).await?;
    for i in 0..RACES {
        let bucket = format!("contested-{i}");
        let spec = ObjectBucketClaimSpec {
            storage_class_name: victim.delete.clone(),
            bucket_name: Some(bucket),
            ..Default::default()
        };
        let name = format!("c{i}");
        let (victims, racers) = (
            claims(&suite.admin, "victim"),
            claims(&suite.admin, "racer"),
        );
        let (vc, rc) = (
            ObjectBucketClaim::new(&name, spec.clone()),
            ObjectBucketClaim::new(&name, spec),
        );
        let pp = PostParams::default();
        let (a, b) = tokio::join!(victims.create(&pp, &vc), racers.create(&pp, &rc));
        a?;
        b?;
        summary.counts.attacks += 1;
    }
    let mut shared = Vec::new();
    let mut names = Vec::new();
    for i in 0..RACES {
        let name = format!("c{i}");
        let v = settled(&suite.admin, "victim", &name).await?;
        let r = settled(&suite.admin, "racer", &name).await?;
        let bound = [&v, &r]
            .iter()
            .filter(|c| phase(c) == Some(ClaimPhase::Bound))
            .count();
        let loser = if phase(&v) == Some(ClaimPhase::Bound) {
            &r
        } else {
            &v
        };
        // Told by the library, before any provisioner call; the store's
        // own refusal ("was not created for this claim") means both
        // claims reached provision.
        let arbitrated = message(loser).contains("is already claimed by");
        if bound != 1 || !arbitrated {
            shared.push(format!(
                "contested-{i}: victim {:?} ({}), racer {:?} ({})",
                phase(&v),
                message(&v),
                phase(&r),
                message(&r)
            ));
        }
        if bound > 1 {
            summary.counts.foreign_buckets += 1;
        }
        names.push(name);
    }
    for ns in ["victim", "racer"] {
        for name in &names {
            claims(&suite.admin, ns)
                .delete(name, &DeleteParams::default())
                .await?;
        }
    }
    claims(&suite.admin, "victim")
        .delete("warm-up", &DeleteParams::default())
        .await?;
    for ns in ["victim", "racer"] {
        wait_all_gone(&suite.admin, ns, &names, Duration::from_secs(90)).await?;
    }
    wait_all_gone(&suite.admin, "victim", &["warm-up".to_owned()], T).await?;
    summary.note("names raced", RACES);
    ensure!(
        shared.is_empty(),
        "{} of {RACES} raced names were not settled by the library alone: {shared:?}",
        shared.len()
    );
    Ok(())
}
