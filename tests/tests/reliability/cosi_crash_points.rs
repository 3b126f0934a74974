//! COSI crash points: the process serving COSI (binding and driver roles)
//! is killed at every named COSI point, in creation and in deletion, and
//! restarted; on RustFS, so that store users are real. After each point:
//! one bucket per BucketClaim, one store user per BucketAccess, every
//! object readyToUse; after deletion nothing of them is left on the store
//! (the Retain claim's bucket and Bucket excepted, until the administrator
//! deletes them) and no Secret stays.

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::{Context as _, Result, ensure};
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use obc_tests::cosi_e2e::{
    ACCESS_CLASS, CosiSuite, DELETE_CLASS, Kind, RETAIN_CLASS, access_keys, access_of, api,
    claim_of_class, create, ready, status_str,
};
use obc_tests::recording::wait_gone;
use obc_tests::reliability::{Launch, Proc, Summary};
use obc_tests::wait_for;

use super::{BIN, T, logs};

/// The objects of one iteration: (claim, class), and (access, claim, mode).
const CLAIMS: [(&str, &str); 2] = [("del", DELETE_CLASS), ("ret", RETAIN_CLASS)];
const ACCESSES: [(&str, &str, &str); 2] = [("rw", "del", "ReadWrite"), ("ro", "ret", "ReadOnly")];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_cosi_crash_point_converges_in_create_and_delete_flows() {
    let suite = CosiSuite::start(BIN, "cosi-crash")
        .await
        .expect("environment, COSI and RustFS start");
    let mut summary = Summary::new("COSI crash points (RustFS)");
    let result = walk(&suite, &mut summary).await;
    suite
        .finish(summary, logs(), result)
        .await
        .expect("every COSI crash point converges");
}

async fn walk(suite: &CosiSuite, summary: &mut Summary) -> Result<()> {
    let mut launch = suite.launch.clone();
    // One object at a time, so that the process dies exactly after the
    // named write.
    launch.concurrency = Some(1);
    let mut never_fired = Vec::new();
    for (i, point) in lib_provisioner::cosi::failpoint::POINTS.iter().enumerate() {
        let ns = format!("cosi-crash-{i}");
        suite.env.ensure_namespace(&ns).await?;
        let started = std::time::Instant::now();
        let crashes = iteration(suite, &launch, &ns, point)
            .await
            .with_context(|| format!("crash point {point}"))?;
        summary.counts.scenarios += 1;
        summary.counts.crashes += crashes;
        if crashes == 0 {
            never_fired.push((*point).to_owned());
        }
        summary.note(
            &format!("  {point}"),
            format!("{crashes} crashes, {:.1}s", started.elapsed().as_secs_f64()),
        );
    }
    summary.note(
        "COSI crash points",
        lib_provisioner::cosi::failpoint::POINTS.len(),
    );
    ensure!(
        never_fired.is_empty(),
        "COSI crash points that never fired: {never_fired:?}"
    );
    Ok(())
}

/// Creation then deletion with `point` armed; returns the crashes.
async fn iteration(suite: &CosiSuite, launch: &Launch, ns: &str, point: &str) -> Result<usize> {
    let admin = &suite.admin;
    let mut crashes = 0;
    let mut proc = launch.armed(point).start(logs())?;
    for (claim, class) in CLAIMS {
        create(admin, Kind::BucketClaim, ns, claim, claim_of_class(class)).await?;
    }
    for (access, claim, mode) in ACCESSES {
        let secret = format!("{access}-keys");
        create(
            admin,
            Kind::BucketAccess,
            ns,
            access,
            access_of(ACCESS_CLASS, &[(claim, mode, &secret)]),
        )
        .await?;
    }
    if crashed(&mut proc, point, || all_ready(admin, ns)).await? {
        crashes += 1;
        proc = launch.unarmed().start(logs())?;
        wait_for(
            T,
            format!("everything in {ns} ready after {point}"),
            || async { Ok(all_ready(admin, ns).await?.then_some(())) },
        )
        .await?;
    }
    let state = converged(suite, ns).await?;

    // Deletion, with the point armed again unless the armed process lives.
    if crashes > 0 {
        proc.kill().await;
        proc = launch.armed(point).start(logs())?;
    }
    for (access, _, _) in ACCESSES {
        api(admin, Kind::BucketAccess, ns)
            .delete(access, &DeleteParams::default())
            .await?;
    }
    for (claim, _) in CLAIMS {
        api(admin, Kind::BucketClaim, ns)
            .delete(claim, &DeleteParams::default())
            .await?;
    }
    if crashed(&mut proc, point, || all_gone(admin, ns)).await? {
        crashes += 1;
        proc = launch.unarmed().start(logs())?;
        wait_for(
            T,
            format!("everything in {ns} gone after {point}"),
            || async { Ok(all_gone(admin, ns).await?.then_some(())) },
        )
        .await?;
    }
    // The rest (users, Secrets, the administrator's deletion of the
    // retained Bucket) under an unarmed process.
    proc.kill().await;
    let mut proc = launch.unarmed().start(logs())?;
    torn_down(suite, ns, &state).await?;
    proc.kill().await;
    Ok(crashes)
}

/// Waits until the process dies or `done` holds; true if it died, which
/// must be at `point`.
async fn crashed<F, Fut>(proc: &mut Proc, point: &str, done: F) -> Result<bool>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<bool>>,
{
    let died = proc.crashed_or(T, Duration::from_millis(700), done).await?;
    if died {
        ensure!(
            proc.crashed_at(point),
            "died, but not at {point} ({:?}):\n{}",
            proc.exit_status(),
            proc.log_tail(30)
        );
    }
    Ok(died)
}

async fn all_ready(admin: &Client, ns: &str) -> Result<bool> {
    for kind in [Kind::BucketClaim, Kind::BucketAccess] {
        for o in api(admin, kind, ns).list(&Default::default()).await? {
            if !ready(&o) {
                return Ok(false);
            }
        }
    }
    Ok(true)
}

async fn all_gone(admin: &Client, ns: &str) -> Result<bool> {
    for kind in [Kind::BucketClaim, Kind::BucketAccess] {
        if !api(admin, kind, ns)
            .list(&Default::default())
            .await?
            .items
            .is_empty()
        {
            return Ok(false);
        }
    }
    Ok(true)
}

/// What an iteration made, once converged.
struct Made {
    /// Bucket object and store bucket of each claim.
    buckets: Vec<(String, String, String)>,
    /// Each access's store user.
    users: Vec<String>,
}

/// One bucket per claim, bound to it, and no other new bucket; one user
/// per access, and no other new user.
async fn converged(suite: &CosiSuite, ns: &str) -> Result<Made> {
    let admin = &suite.admin;
    let mut buckets = Vec::new();
    for (claim, _) in CLAIMS {
        let c = api(admin, Kind::BucketClaim, ns).get(claim).await?;
        let object = status_str(&c, "boundBucketName").context("boundBucketName")?;
        let b = api(admin, Kind::Bucket, "").get(&object).await?;
        ensure!(
            b.data["spec"]["bucketClaimRef"]["uid"] == c.uid().unwrap_or_default().as_str(),
            "Bucket {object} is not bound to {ns}/{claim}"
        );
        let id = status_str(&b, "bucketID").context("bucketID")?;
        buckets.push((claim.to_owned(), object, id));
    }
    let on_store = suite.buckets().await?;
    let ours: BTreeSet<String> = buckets.iter().map(|(_, _, id)| id.clone()).collect();
    ensure!(
        ours.len() == CLAIMS.len(),
        "two claims share a bucket: {buckets:?}"
    );
    for id in &ours {
        ensure!(on_store.contains(id), "bucket {id} is not on the store");
    }
    let mut users = Vec::new();
    for (access, _, _) in ACCESSES {
        let keys = access_keys(admin, ns, &format!("{access}-keys")).await?;
        users.push(keys.key_id);
    }
    let store_users = suite.users().await?;
    for u in &users {
        ensure!(store_users.contains(u), "user {u} is not on the store");
    }
    // Across iterations only the retained buckets stay: every other bucket
    // and every user on the store is this iteration's.
    let retained = retained_buckets(admin).await?;
    let stray: Vec<_> = on_store
        .iter()
        .filter(|b| !ours.contains(*b) && !retained.contains(*b))
        .filter(|b| **b != sample_provisioner::store::DEFAULT_STATE_BUCKET)
        .collect();
    ensure!(stray.is_empty(), "buckets no claim has: {stray:?}");
    let stray_users: Vec<_> = store_users.iter().filter(|u| !users.contains(u)).collect();
    ensure!(
        stray_users.is_empty(),
        "users no BucketAccess has: {stray_users:?}"
    );
    Ok(Made { buckets, users })
}

/// The store buckets of Buckets that outlived their claims (Retain).
async fn retained_buckets(admin: &Client) -> Result<BTreeSet<String>> {
    let mut out = BTreeSet::new();
    for b in api(admin, Kind::Bucket, "")
        .list(&Default::default())
        .await?
    {
        if let Some(id) = status_str(&b, "bucketID") {
            out.insert(id);
        }
    }
    Ok(out)
}

/// After deletion: the users are gone, the Delete claim's Bucket and
/// bucket are gone, the Retain claim's stay (then the administrator
/// deletes them: policy switched to Delete, Bucket deleted), no Secret of
/// an access stays.
async fn torn_down(suite: &CosiSuite, ns: &str, made: &Made) -> Result<()> {
    let admin = &suite.admin;
    for u in &made.users {
        wait_for(T, format!("user {u} removed"), || async {
            Ok((!suite.users().await?.contains(u)).then_some(()))
        })
        .await?;
    }
    for (access, _, _) in ACCESSES {
        let secrets =
            kube::Api::<k8s_openapi::api::core::v1::Secret>::namespaced(admin.clone(), ns);
        wait_gone(&secrets, &format!("{access}-keys"), T).await?;
    }
    let root = suite.root();
    for (claim, object, id) in &made.buckets {
        let buckets = api(admin, Kind::Bucket, "");
        if *claim == "del" {
            wait_gone(&buckets, object, T).await?;
            wait_for(T, format!("bucket {id} deleted"), || async {
                Ok(root
                    .head_bucket()
                    .bucket(id)
                    .send()
                    .await
                    .is_err()
                    .then_some(()))
            })
            .await?;
        } else {
            root.head_bucket()
                .bucket(id)
                .send()
                .await
                .with_context(|| format!("the retained bucket {id}"))?;
            let policy = serde_json::json!({"spec": {"deletionPolicy": "Delete"}});
            buckets
                .patch(object, &PatchParams::default(), &Patch::Merge(&policy))
                .await?;
            buckets.delete(object, &DeleteParams::default()).await?;
            wait_gone(&buckets, object, T)
                .await
                .context("the administrator deletes the retained Bucket")?;
            wait_for(T, format!("retained bucket {id} deleted"), || async {
                Ok(root
                    .head_bucket()
                    .bucket(id)
                    .send()
                    .await
                    .is_err()
                    .then_some(()))
            })
            .await?;
        }
    }
    Ok(())
}
