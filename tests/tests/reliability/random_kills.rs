//! Random kills: SIGKILLs at random moments while claims come and go,
//! and the interrupted states a kill leaves (a claim deleted as its
//! finalizer lands, a bucket created and not yet marked).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, anyhow, bail, ensure};
use futures::future::join_all;
use kube::ResourceExt;
use kube::api::{Api, ListParams, PostParams};
use lib_provisioner::api::{
    ClaimPhase, FINALIZER, ObjectBucket, ObjectBucketClaim, PROVISIONER_LABEL,
};
use obc_tests::reliability::{
    Classes, Kind, Summary, converge, store_intents, wait_all_bound, wait_all_gone,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::{LABEL, Suite, T, claims, create, delete_claim, logs, message, phase, still_running};

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_kills_while_claims_come_and_go() {
    let claims = env_usize("OBC_SOAK_CLAIMS", 200);
    let kills = env_usize("OBC_SOAK_KILLS", 8);
    soak("random kills", claims, kills).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "long soak (several minutes): run with --ignored; OBC_SOAK_CLAIMS and OBC_SOAK_KILLS size it"]
async fn random_kills_long_soak() {
    let claims = env_usize("OBC_SOAK_CLAIMS", 1000);
    let kills = env_usize("OBC_SOAK_KILLS", 40);
    soak("random kills, long soak", claims, kills).await;
}

async fn soak(title: &str, n: usize, kills: usize) {
    Suite::run(title, &["soak"], async |suite, summary| {
        soak_run(suite, n, kills, summary).await
    })
    .await;
}

/// Whether the soak's claims include exact `bucketName`s
/// (`OBC_SOAK_EXACT_NAMES=1`). A SIGKILL between CreateBucket and the
/// ownership marker used to wedge such a claim; the sample's creation
/// intents fixed that (regression:
/// `a_crash_during_concurrent_bucket_creation_does_not_wedge_exact_name_claims`).
/// Still off by default: turn it on by default once soaks with it pass.
fn soak_exact_names() -> bool {
    std::env::var("OBC_SOAK_EXACT_NAMES").is_ok_and(|v| v == "1")
}

/// When the soak deletes the claims it deletes "while provisioning".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum EarlyDelete {
    /// Once the ObjectBucket exists (the default).
    ObjectBucket,
    /// Once the claim carries the finalizer (`OBC_SOAK_EARLY_DELETES=prepared`):
    /// a kill between CreateBucket and the ownership marker used to leave an
    /// orphan bucket (fixed; regression:
    /// `an_interrupted_bucket_creation_is_cleaned_up_when_the_claim_is_deleted`).
    Prepared,
    /// Right after creation (`OBC_SOAK_EARLY_DELETES=at-once`), racing the
    /// finalizer (library bug, reproduced by
    /// `a_claim_deleted_as_its_finalizer_is_added_leaves_nothing`).
    AtOnce,
}

impl EarlyDelete {
    fn from_env() -> Self {
        match std::env::var("OBC_SOAK_EARLY_DELETES").as_deref() {
            Ok("prepared") => Self::Prepared,
            Ok("at-once") => Self::AtOnce,
            _ => Self::ObjectBucket,
        }
    }
}

fn random_kind(rng: &mut StdRng, exact: bool) -> Kind {
    let kind = match rng.random_range(0..100) {
        0..30 => Kind::GeneratedDelete,
        30..55 => Kind::ExactDelete,
        55..70 => Kind::GeneratedRetain,
        70..80 => Kind::ExactRetain,
        _ => Kind::Shared,
    };
    match kind {
        Kind::ExactDelete if !exact => Kind::GeneratedDelete,
        Kind::ExactRetain if !exact => Kind::GeneratedRetain,
        other => other,
    }
}

async fn soak_run(suite: &Suite, n: usize, kills: usize, summary: &mut Summary) -> Result<()> {
    let seed = std::env::var("OBC_SOAK_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| u64::from(std::process::id()) ^ 0x5eed);
    summary.note("seed (OBC_SOAK_SEED)", seed);
    let mut rng = StdRng::seed_from_u64(seed);
    let exact = soak_exact_names();
    summary.note("exact bucketNames (OBC_SOAK_EXACT_NAMES)", exact);
    let early = EarlyDelete::from_env();
    summary.note(
        "deleted while provisioning: when (OBC_SOAK_EARLY_DELETES)",
        format!("{early:?}"),
    );
    let client = suite.admin.clone();
    let classes = suite.namespace("soak").await?;
    let launch = suite.launch("soak");
    let proc = Arc::new(tokio::sync::Mutex::new(launch.start(logs())?));

    // The plan: each claim's kind, whether it is deleted, and when.
    #[derive(Clone)]
    struct Plan {
        name: String,
        kind: Kind,
        delete: bool,
        early: bool,
    }
    let plans: Vec<Plan> = (0..n)
        .map(|i| {
            let delete = rng.random_bool(0.5);
            Plan {
                name: format!("c{i}"),
                kind: random_kind(&mut rng, exact),
                delete,
                early: delete && rng.random_bool(0.2),
            }
        })
        .collect();
    let kill_delays: Vec<Duration> = (0..kills)
        .map(|_| Duration::from_millis(rng.random_range(1500..5000)))
        .collect();
    let restart_delays: Vec<Duration> = (0..kills)
        .map(|_| Duration::from_millis(rng.random_range(0..1000)))
        .collect();

    // The killer: SIGKILL at random intervals, restart after a short pause.
    let killed = Arc::new(AtomicUsize::new(0));
    let killer = {
        let (proc, killed, launch) = (proc.clone(), killed.clone(), launch.clone());
        tokio::spawn(async move {
            for (wait, pause) in kill_delays.into_iter().zip(restart_delays) {
                tokio::time::sleep(wait).await;
                let mut p = proc.lock().await;
                if !p.is_running() {
                    return Err(anyhow!(
                        "the provisioner died on its own: {}",
                        p.log_tail(30)
                    ));
                }
                p.kill().await;
                killed.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(pause).await;
                *p = launch.start(logs())?;
            }
            anyhow::Ok(())
        })
    };

    // One lister for everyone: claim name -> phase, every 300 ms.
    type Phases = std::collections::BTreeMap<String, (Option<ClaimPhase>, String)>;
    let phases = Arc::new(std::sync::RwLock::new(Phases::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let lister = {
        let (phases, stop, api) = (phases.clone(), stop.clone(), claims(&client, "soak"));
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                if let Ok(list) = api.list(&ListParams::default()).await {
                    let map = list
                        .items
                        .iter()
                        .map(|c| (c.name_any(), (phase(c), message(c))))
                        .collect();
                    *phases.write().unwrap_or_else(|p| p.into_inner()) = map;
                }
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        })
    };

    // The workload: a claim every 200 ms; each deleted once Bound (or at once).
    let started = Instant::now();
    let mut deleters = Vec::new();
    for (i, plan) in plans.iter().cloned().enumerate() {
        tokio::time::sleep_until((started + Duration::from_millis(200 * i as u64)).into()).await;
        let spec = plan.kind.spec(&classes, &format!("soak-{i}"));
        create(&client, "soak", &plan.name, spec).await?;
        if !plan.delete {
            continue;
        }
        let (client, phases) = (client.clone(), phases.clone());
        deleters.push(tokio::spawn(async move {
            if !plan.early {
                let seen = || {
                    phases
                        .read()
                        .unwrap_or_else(|p| p.into_inner())
                        .get(&plan.name)
                        .cloned()
                };
                let waited = obc_tests::wait_for(
                    Duration::from_secs(120),
                    format!("{} to bind", plan.name),
                    || async {
                        match seen() {
                            Some((Some(ClaimPhase::Bound), _)) => Ok(Some(())),
                            Some((Some(ClaimPhase::Failed), m)) => {
                                Err(anyhow!("{} failed: {m}", plan.name))
                            }
                            _ => Ok(None),
                        }
                    },
                )
                .await;
                if let Err(e) = waited {
                    bail!("{e:#} (last seen: {:?})", seen());
                }
            }
            if plan.early && early != EarlyDelete::AtOnce {
                // Deleted while provisioning: once its ObjectBucket exists
                // (default), or once the claim carries the finalizer.
                let api = claims(&client, "soak");
                let obs: Api<ObjectBucket> = Api::all(client.clone());
                let ob_name = format!("obc-soak-{}", plan.name);
                obc_tests::wait_for(T, format!("{} to be provisioning", plan.name), || async {
                    let ready = match early {
                        EarlyDelete::Prepared => {
                            let c = api.get(&plan.name).await?;
                            c.finalizers().iter().any(|f| f == FINALIZER)
                        }
                        _ => obs.get_opt(&ob_name).await?.is_some(),
                    };
                    Ok(ready.then_some(()))
                })
                .await?;
            }
            delete_claim(&client, "soak", &plan.name, &plan.kind).await
        }));
    }
    let mut deleted = Vec::new();
    for d in deleters {
        deleted.push(d.await.context("deleter task")??);
    }
    killer.await.context("killer task")??;
    stop.store(true, Ordering::Relaxed);
    let _ = lister.await;
    let workload = started.elapsed();
    {
        let mut p = proc.lock().await;
        ensure!(p.is_running(), "the provisioner died: {}", p.log_tail(30));
    }

    let live: Vec<String> = plans
        .iter()
        .filter(|p| !p.delete)
        .map(|p| p.name.clone())
        .collect();
    let gone: Vec<String> = plans
        .iter()
        .filter(|p| p.delete)
        .map(|p| p.name.clone())
        .collect();
    wait_all_bound(&client, "soak", &live, Duration::from_secs(120)).await?;
    wait_all_gone(&client, "soak", &gone, Duration::from_secs(120)).await?;
    let mut x = suite.expect(&["soak"]);
    x.deleted = deleted;
    let a = converge(&suite.env, &client, &x, T).await?;
    summary.check("after the soak", &a)?;

    let kills_done = killed.load(Ordering::Relaxed);
    summary.counts.scenarios = n;
    summary.counts.crashes = kills_done;
    summary.note("claims created", n);
    summary.note("claims deleted", gone.len());
    summary.note(
        "claims deleted while provisioning",
        plans.iter().filter(|p| p.early).count(),
    );
    summary.note("claims Bound at the end", live.len());
    summary.note("buckets in the store at the end", a.buckets);
    summary.note("workload time", format!("{:.1}s", workload.as_secs_f64()));
    ensure!(
        kills_done == kills,
        "{kills_done} of {kills} kills happened"
    );
    Ok(())
}

/// A claim deleted at the moment the library adds its finalizer: the
/// apiserver may still delete it at once (it decided before the finalizer
/// landed), and the library's pass goes on creating the bucket, the
/// ObjectBucket, the Secret and the ConfigMap for a claim that is gone.
/// Nothing of it may be left behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_deleted_as_its_finalizer_is_added_leaves_nothing() {
    Suite::run(
        "delete racing the finalizer",
        &["race"],
        delete_races_finalizer,
    )
    .await;
}

async fn delete_races_finalizer(suite: &Suite, summary: &mut Summary) -> Result<()> {
    let client = &suite.admin;
    let ns = "race";
    let classes = suite.namespace(ns).await?;
    let mut proc = suite.launch("race").start(logs())?;
    let mut x = suite.expect(&[ns]);
    let names: Vec<String> = (0..80).map(|i| format!("d{i}")).collect();
    for batch in names.chunks(8) {
        let results = join_all(batch.iter().map(|name| {
            let classes = classes.clone();
            async move {
                let kind = Kind::GeneratedDelete;
                create(client, ns, name, kind.spec(&classes, name)).await?;
                delete_claim(client, ns, name, &kind).await
            }
        }))
        .await;
        for r in results {
            x.deleted.push(r?);
        }
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    wait_all_gone(client, ns, &names, T).await?;
    let a = converge(&suite.env, client, &x, Duration::from_secs(20)).await?;
    summary.counts.scenarios = names.len();
    still_running(&mut proc)?;
    summary.check("after the racing deletes", &a)?;
    Ok(())
}

/// Writes the state a kill between CreateBucket and the ownership marker
/// leaves: a prepared claim (finalizer, label, and for a generated name its
/// annotation) and its bucket, empty and unmarked, and no ObjectBucket.
/// `intent`: with the creation intent the sample records before
/// CreateBucket (without: as left by a version that recorded none, which
/// only a generated name gets over).
async fn interrupted_creation(
    suite: &Suite,
    ns: &str,
    name: &str,
    kind: &Kind,
    classes: &Classes,
    intent: bool,
) -> Result<String> {
    let mut claim = ObjectBucketClaim::new(name, kind.spec(classes, name));
    claim.metadata.finalizers = Some(vec![FINALIZER.into()]);
    claim.metadata.labels = Some([(PROVISIONER_LABEL.to_owned(), LABEL.to_owned())].into());
    let bucket = match claim.spec.bucket_name.clone() {
        Some(exact) => exact,
        None => {
            let generated = format!("gen-{name}-aaaa1111");
            claim.metadata.annotations = Some(
                [(
                    lib_provisioner::api::GENERATED_NAME_ANNOTATION.to_owned(),
                    generated.clone(),
                )]
                .into(),
            );
            generated
        }
    };
    let created = claims(&suite.admin, ns)
        .create(&PostParams::default(), &claim)
        .await?;
    let s3 = suite.env.s3_client();
    if intent {
        write_intent(&s3, &bucket, &created.uid().unwrap_or_default(), ns, name).await?;
    }
    s3.create_bucket().bucket(&bucket).send().await?;
    Ok(bucket)
}

/// Writes a creation intent as the sample does: the state bucket (made and
/// marked if needed), then `intents/<bucket>` holding the claim's UID.
async fn write_intent(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    uid: &str,
    ns: &str,
    name: &str,
) -> Result<()> {
    use aws_sdk_s3::primitives::ByteStream;
    use sample_provisioner::store::{
        DEFAULT_STATE_BUCKET, OWNER_MARKER_KEY, STATE_BUCKET_MARKER, intent_key,
    };
    if s3
        .head_bucket()
        .bucket(DEFAULT_STATE_BUCKET)
        .send()
        .await
        .is_err()
    {
        s3.create_bucket()
            .bucket(DEFAULT_STATE_BUCKET)
            .send()
            .await?;
        s3.put_object()
            .bucket(DEFAULT_STATE_BUCKET)
            .key(OWNER_MARKER_KEY)
            .body(ByteStream::from_static(STATE_BUCKET_MARKER.as_bytes()))
            .send()
            .await?;
    }
    s3.put_object()
        .bucket(DEFAULT_STATE_BUCKET)
        .key(intent_key(bucket))
        .metadata("obc-claim", format!("{ns}/{name}"))
        .body(ByteStream::from(uid.as_bytes().to_vec()))
        .send()
        .await?;
    Ok(())
}

/// The interrupted creations the two tests below start from, each with the
/// intent this version records before CreateBucket. (Without one, left by a
/// version that recorded none, an empty unmarked bucket is refused since
/// issue 25: a claim's generated-name annotation is the claim owner's to
/// write, and no proof that the bucket was made for it.)
const INTERRUPTED: [(Kind, bool); 4] = [
    (Kind::GeneratedDelete, true),
    (Kind::GeneratedRetain, true),
    (Kind::ExactDelete, true),
    (Kind::ExactRetain, true),
];

/// After a kill between CreateBucket and the marker, the restarted
/// provisioner takes the empty bucket over for the claim it was created
/// for (its intent, or the name generated for it): one bucket, marked,
/// Bound, and no intent left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_bucket_creation_is_taken_over_by_its_claim() {
    Suite::run(
        "interrupted CreateBucket, then restart",
        &["resumed"],
        interrupted_then_restart,
    )
    .await;
}

async fn interrupted_then_restart(suite: &Suite, summary: &mut Summary) -> Result<()> {
    let client = &suite.admin;
    let ns = "resumed";
    let classes = suite.namespace(ns).await?;
    let mut names = Vec::new();
    for (i, (kind, intent)) in INTERRUPTED.iter().enumerate() {
        let name = format!("i{i}");
        interrupted_creation(suite, ns, &name, kind, &classes, *intent).await?;
        names.push(name);
    }
    summary.counts.crashes = names.len();
    let mut proc = suite.launch("resumed").start(logs())?;
    wait_all_bound(client, ns, &names, T).await?;
    let a = converge(&suite.env, client, &suite.expect(&[ns]), T).await?;
    summary.check("after the restart", &a)?;
    ensure!(a.buckets == 1 + names.len(), "{} buckets", a.buckets);
    let intents = store_intents(&suite.env.s3_client()).await?;
    ensure!(intents.is_empty(), "intents left: {intents:?}");
    still_running(&mut proc)?;
    summary.counts.scenarios = names.len();
    Ok(())
}

/// The same states, but the claim is deleted before the provisioner comes
/// back: the empty bucket created for it must go too (nothing else records
/// it), under either reclaim policy (the claim was never bound), and so
/// must its intent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_bucket_creation_is_cleaned_up_when_the_claim_is_deleted() {
    Suite::run(
        "interrupted CreateBucket, then delete",
        &["abandoned"],
        interrupted_then_delete,
    )
    .await;
}

async fn interrupted_then_delete(suite: &Suite, summary: &mut Summary) -> Result<()> {
    let client = &suite.admin;
    let ns = "abandoned";
    let classes = suite.namespace(ns).await?;
    let mut x = suite.expect(&[ns]);
    let mut names = Vec::new();
    for (i, (kind, intent)) in INTERRUPTED.iter().enumerate() {
        let name = format!("i{i}");
        interrupted_creation(suite, ns, &name, kind, &classes, *intent).await?;
        x.deleted.push(delete_claim(client, ns, &name, kind).await?);
        names.push(name);
    }
    summary.counts.crashes = names.len();
    let mut proc = suite.launch("abandoned").start(logs())?;
    wait_all_gone(client, ns, &names, T).await?;
    let a = converge(&suite.env, client, &x, Duration::from_secs(10)).await?;
    still_running(&mut proc)?;
    summary.counts.scenarios = names.len();
    summary.check("after deletion", &a)?;
    ensure!(
        a.buckets == 1,
        "{} buckets (the shared one only)",
        a.buckets
    );
    let intents = store_intents(&suite.env.s3_client()).await?;
    ensure!(intents.is_empty(), "intents left: {intents:?}");
    Ok(())
}
