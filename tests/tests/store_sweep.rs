//! The store sweep against a tenant who is faster than the controller:
//! the finalizers of a BucketAccess and its access Secret (or of a
//! BucketClaim with its BucketAccesses) stripped and all deleted in
//! back-to-back requests, with no wait. The sweep finds the store user
//! without a live owner and removes it within interval + grace (+ slack),
//! while a live grant and a live ObjectBucketClaim's user on the same
//! store keep working across the sweeps, and the audit shows the orphan
//! before and nothing after. The sample runs in-process on RustFS with a
//! real apiserver; a missing RustFS or apiserver fails the tests.
//!
//! Who wins the race is up to the scheduler: a running controller can see
//! the strip and put its finalizer back before the delete arrives (then it
//! revokes the ordinary way). The tests that need the tenant to win (the
//! audit must see the orphan) pause the controller for the strip, which
//! makes the worst case certain; the BucketClaim test races a running
//! controller and holds whichever path wins to the same end state.
//!
//! `OBC_TEST_SWEEP_OFF=1` runs the same with the sweep turned off: the
//! first test then fails (the keys keep working), which is the attack.

#![allow(clippy::unwrap_used)] // tests may unwrap; the library may not

use std::time::{Duration, Instant};

use anyhow::Result;
use aws_sdk_s3::primitives::ByteStream;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use lib_provisioner::ControllerBuilder;
use lib_provisioner::api::{ObjectBucket, ObjectBucketClaim, ObjectBucketClaimSpec};
use lib_provisioner::cosi::CosiOptions;
use lib_provisioner::provisioner::MadeKind;
use lib_provisioner::sweep::{Audit, Decision};
use obc_tests::cosi_e2e::{
    ACCESS_CLASS, AccessKeys, CosiSuite, DELETE_CLASS, DRIVER, Kind, RETAIN_CLASS, access_keys,
    access_of, api, claim_of_class, create, status_str, wait_error, wait_ready,
};
use obc_tests::reliability::{
    PROVISIONER, RUSTFS_ADMIN_SECRET, SYSTEM_NAMESPACE, claim_bucket, claim_keys, create_class,
    wait_all_bound,
};
use obc_tests::setup::sample_provisioner_binary;
use obc_tests::wait_for;
use sample_provisioner::S3Provisioner;
use serde_json::json;
use tokio::sync::watch;

const NS: &str = "shop";
/// A per-claim StorageClass on the same store.
const OBC_CLASS: &str = "s3-per-claim";
const INTERVAL: Duration = Duration::from_secs(2);
const GRACE: Duration = Duration::from_secs(4);
/// Two sweeps past the grace, and room for a slow machine.
const SLACK: Duration = Duration::from_secs(20);

/// The suite, with the sample's controller running in this process (or
/// paused: see [`Swept::pause`]).
struct Swept {
    suite: CosiSuite,
    grace: Duration,
    running: Option<Running>,
}

/// A running controller: how to stop it, and its task.
struct Running {
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Running {
    fn start(client: &Client, grace: Duration) -> Result<Self> {
        let (stop, stopped) = watch::channel(false);
        let run = builder(client, grace)?.run(client.clone(), async move {
            let mut stopped = stopped;
            let _ = stopped.wait_for(|s| *s).await;
        });
        let task = tokio::spawn(async move {
            if let Err(e) = run.await {
                panic!("the controller stopped: {e}");
            }
        });
        Ok(Self { stop, task })
    }

    async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

fn builder(client: &Client, grace: Duration) -> Result<ControllerBuilder<S3Provisioner>> {
    let builder = ControllerBuilder::new(PROVISIONER, S3Provisioner::new(client.clone()))
        .cosi(CosiOptions::new(DRIVER)?)
        .sweep_interval(INTERVAL)
        .orphan_grace(grace);
    Ok(if std::env::var_os("OBC_TEST_SWEEP_OFF").is_some() {
        builder.without_sweep()
    } else {
        builder
    })
}

impl Swept {
    async fn start(tag: &str, grace: Duration) -> Result<Self> {
        let suite = CosiSuite::start("unused", tag).await?;
        let client = suite.admin.clone();
        Api::<Namespace>::all(client.clone())
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": NS}}))?,
            )
            .await?;
        let running = Some(Running::start(&client, grace)?);
        Ok(Self {
            suite,
            grace,
            running,
        })
    }

    /// Stops the controller, so that a tenant's requests that follow are
    /// all faster than it: it sees none of them (the worst case of the
    /// race, made certain; a running controller that happens to re-add its
    /// finalizer between a strip and a delete takes the ordinary path).
    async fn pause(&mut self) {
        if let Some(running) = self.running.take() {
            running.stop().await;
        }
    }

    /// Starts the controller again, as a restart would; returns when.
    fn resume(&mut self) -> Result<Instant> {
        anyhow::ensure!(self.running.is_none(), "the controller is running");
        self.running = Some(Running::start(self.client(), self.grace)?);
        Ok(Instant::now())
    }

    fn client(&self) -> &Client {
        &self.suite.admin
    }

    /// A claim of the Delete class and one read-write access to it; the
    /// access's keys, once they write.
    async fn grant(&self, claim: &str, access: &str) -> Result<AccessKeys> {
        let c = self.client();
        if api(c, Kind::BucketClaim, NS)
            .get_opt(claim)
            .await?
            .is_none()
        {
            create(
                c,
                Kind::BucketClaim,
                NS,
                claim,
                claim_of_class(DELETE_CLASS),
            )
            .await?;
        }
        let secret = format!("{access}-keys");
        let body = access_of(ACCESS_CLASS, &[(claim, "ReadWrite", &secret)]);
        create(c, Kind::BucketAccess, NS, access, body).await?;
        wait_ready(c, Kind::BucketAccess, NS, access, Duration::from_secs(60)).await?;
        let keys = access_keys(c, NS, &secret).await?;
        anyhow::ensure!(writes(&keys).await, "a fresh grant's keys must write");
        Ok(keys)
    }

    /// An ObjectBucketClaim of a per-claim StorageClass (reclaim policy
    /// Delete) on the same store, Bound; its keys, once they write.
    async fn obc_claim(&self, name: &str) -> Result<AccessKeys> {
        self.obc_claim_of(name, OBC_CLASS, "Delete").await
    }

    /// The same, of StorageClass `class` with reclaim policy `policy`.
    async fn obc_claim_of(&self, name: &str, class: &str, policy: &str) -> Result<AccessKeys> {
        let c = self.client();
        let endpoint = self.suite.store.endpoint().trim_end_matches('/').to_owned();
        create_class(
            c,
            class,
            PROVISIONER,
            policy,
            [
                ("endpoint", endpoint.as_str()),
                ("adminSecretName", RUSTFS_ADMIN_SECRET),
                ("adminSecretNamespace", SYSTEM_NAMESPACE),
            ],
        )
        .await?;
        let spec = ObjectBucketClaimSpec {
            storage_class_name: class.into(),
            generate_bucket_name: Some(name.into()),
            ..Default::default()
        };
        Api::<ObjectBucketClaim>::namespaced(c.clone(), NS)
            .create(&PostParams::default(), &ObjectBucketClaim::new(name, spec))
            .await?;
        wait_all_bound(c, NS, &[name.to_owned()], Duration::from_secs(60)).await?;
        let (key_id, secret) = claim_keys(c, NS, name).await?;
        let keys = AccessKeys {
            bucket: claim_bucket(c, NS, name).await?,
            endpoint,
            region: "us-east-1".into(),
            addressing_style: "path".into(),
            key_id,
            secret,
        };
        anyhow::ensure!(writes(&keys).await, "a fresh claim's keys must write");
        Ok(keys)
    }

    /// The audit, as an operator runs it (from the API, removing nothing).
    async fn audit(&self) -> Result<Audit> {
        Ok(builder(self.client(), self.grace)?
            .audit(self.client().clone())
            .await?)
    }

    /// `sample-provisioner audit` (with `--json` if `json`), under the
    /// provisioner's ServiceAccount: what it prints.
    async fn audit_command(&self, json: bool) -> Result<String> {
        let bin = sample_provisioner_binary()?;
        let mut cmd = tokio::process::Command::new(&bin);
        cmd.env("KUBECONFIG", &self.suite.launch.kubeconfig)
            .env("RUST_LOG", "warn")
            .args(["--cosi", "on", "--cosi-driver-name", DRIVER])
            .args(["--orphan-grace-seconds", &self.grace.as_secs().to_string()])
            .arg("audit");
        if json {
            cmd.arg("--json");
        }
        let out = cmd.output().await?;
        let stdout = String::from_utf8(out.stdout)?;
        anyhow::ensure!(
            out.status.success(),
            "{} audit failed: {}{stdout}",
            bin.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(stdout)
    }

    async fn stop(mut self) {
        self.pause().await;
        self.suite.store.stop().await;
    }
}

/// The reclaim policy `bucket`'s tags record, read with the root key.
async fn reclaim_tag(t: &Swept, bucket: &str) -> Result<Option<String>> {
    let tags = t
        .suite
        .root()
        .get_bucket_tagging()
        .bucket(bucket)
        .send()
        .await?;
    Ok(tags
        .tag_set()
        .iter()
        .find(|t| t.key() == sample_provisioner::store::RECLAIM_TAG)
        .map(|t| t.value().to_owned()))
}

/// Whether the keys still write their bucket.
async fn writes(keys: &AccessKeys) -> bool {
    keys.s3()
        .put_object()
        .bucket(&keys.bucket)
        .key("probe")
        .body(ByteStream::from_static(b"probe"))
        .send()
        .await
        .is_ok()
}

/// The tenant's fast strip: every finalizer gone, then every object
/// deleted, each batch sent at once, no wait in between (an object already
/// gone is no error: the tenant does not care).
async fn strip_and_delete(client: &Client, objects: &[(Option<Kind>, &str)]) -> Result<()> {
    let strip = Patch::Merge(json!({"metadata": {"finalizers": null}}));
    let pp = PatchParams::default();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    let gone_is_fine = |r: kube::Result<()>| match r {
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        other => other,
    };
    let patches = objects.iter().map(|(kind, name)| {
        let (secrets, strip, pp) = (&secrets, &strip, &pp);
        async move {
            match kind {
                Some(k) => api(client, *k, NS).patch(name, pp, strip).await.map(drop),
                None => secrets.patch(name, pp, strip).await.map(drop),
            }
        }
    });
    for r in futures::future::join_all(patches).await {
        gone_is_fine(r)?;
    }
    let deletes = objects.iter().map(|(kind, name)| {
        let secrets = &secrets;
        async move {
            let dp = DeleteParams::default();
            match kind {
                Some(k) => api(client, *k, NS).delete(name, &dp).await.map(drop),
                None => secrets.delete(name, &dp).await.map(drop),
            }
        }
    });
    for r in futures::future::join_all(deletes).await {
        gone_is_fine(r)?;
    }
    Ok(())
}

/// Waits until `keys` no longer write; fails after interval + grace + slack.
async fn wait_denied(keys: &AccessKeys, since: Instant, grace: Duration) -> Result<Duration> {
    let bound = INTERVAL + grace + SLACK;
    wait_for(bound, "the orphaned keys to be denied", || async {
        Ok((!writes(keys).await).then_some(()))
    })
    .await?;
    Ok(since.elapsed())
}

fn orphans(audit: &Audit, kind: MadeKind) -> Vec<String> {
    audit
        .plan
        .items
        .iter()
        .filter(|i| i.made.kind == kind && i.decision.is_orphan())
        .map(|i| i.made.name.clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_fast_stripped_bucket_access_loses_its_keys_and_a_live_grant_keeps_its_own() -> Result<()>
{
    let mut t = Swept::start("sweep-access", GRACE).await?;
    let result = async {
        let kept = t.grant("photos", "keeper").await?;
        let gone = t.grant("photos", "app").await?;
        let ledger = t.obc_claim("ledger").await?;
        let before = t.audit().await?;
        anyhow::ensure!(
            !before.has_orphans(),
            "nothing is orphaned yet:\n{before}"
        );
        t.pause().await;
        strip_and_delete(
            t.client(),
            &[(Some(Kind::BucketAccess), "app"), (None, "app-keys")],
        )
        .await?;
        anyhow::ensure!(writes(&gone).await, "the stripped access's keys write");
        // (c) The audit names the orphan before the sweep removes it.
        let audit = t.audit().await?;
        let users = orphans(&audit, MadeKind::Principal);
        anyhow::ensure!(
            users == [gone.key_id.clone()],
            "the audit must show exactly the stripped access's user as an orphan, not {users:?}:\n{audit}"
        );
        let resumed = t.resume()?;
        let took = wait_denied(&gone, resumed, t.grace).await?;
        println!("the stripped access's keys were denied {took:?} after the controller started");
        // (d) The live grant keeps working across several more sweeps.
        for _ in 0..3 {
            tokio::time::sleep(INTERVAL).await;
            anyhow::ensure!(writes(&kept).await, "a live grant's keys were cut off");
            anyhow::ensure!(writes(&ledger).await, "a live claim's keys were cut off");
        }
        let after = t.audit().await?;
        for kind in [MadeKind::Principal, MadeKind::Policy] {
            let left = orphans(&after, kind);
            anyhow::ensure!(left.is_empty(), "{kind}s still orphaned: {left:?}\n{after}");
        }
        let owned: Vec<_> = after
            .plan
            .items
            .iter()
            .filter(|i| i.decision == Decision::Owned && i.made.kind == MadeKind::Principal)
            .map(|i| i.made.name.clone())
            .collect();
        let mut expected = vec![kept.key_id.clone(), ledger.key_id.clone()];
        expected.sort();
        anyhow::ensure!(owned == expected, "owned users: {owned:?}\n{after}");
        Ok(())
    }
    .await;
    t.stop().await;
    result
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_fast_stripped_bucket_claim_and_its_accesses_lose_their_keys() -> Result<()> {
    let t = Swept::start("sweep-claim", GRACE).await?;
    let result = async {
        let kept = t.grant("other", "keeper").await?;
        let first = t.grant("photos", "app").await?;
        let second = t.grant("photos", "backup").await?;
        let started = Instant::now();
        strip_and_delete(
            t.client(),
            &[
                (Some(Kind::BucketAccess), "app"),
                (Some(Kind::BucketAccess), "backup"),
                (None, "app-keys"),
                (None, "backup-keys"),
                (Some(Kind::BucketClaim), "photos"),
            ],
        )
        .await?;
        for keys in [&first, &second] {
            let took = wait_denied(keys, started, t.grace).await?;
            println!("keys denied {took:?} after the strip");
        }
        anyhow::ensure!(writes(&kept).await, "a live grant's keys were cut off");
        // The claim's bucket goes with it (forceDelete), which denies the
        // keys before the sweep runs: the users themselves must go too.
        let bound = INTERVAL + t.grace + SLACK;
        let gone = wait_for(bound, "the orphaned users to be removed", || async {
            let after = t.audit().await?;
            Ok(orphans(&after, MadeKind::Principal)
                .is_empty()
                .then_some(()))
        })
        .await;
        if gone.is_err() {
            let after = t.audit().await?;
            let left = orphans(&after, MadeKind::Principal);
            anyhow::bail!("users still orphaned: {left:?}\n{after}");
        }
        println!("users removed {:?} after the strip", started.elapsed());
        Ok(())
    }
    .await;
    t.stop().await;
    result
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_audit_command_prints_the_orphan_before_the_sweep_removes_it_and_nothing_after()
-> Result<()> {
    // The controller is paused while the command runs twice, so that the
    // sweep cannot remove the orphan in between, whatever the grace.
    let mut t = Swept::start("sweep-audit", GRACE).await?;
    let result = async {
        let kept = t.grant("photos", "keeper").await?;
        let gone = t.grant("photos", "app").await?;
        t.pause().await;
        strip_and_delete(
            t.client(),
            &[(Some(Kind::BucketAccess), "app"), (None, "app-keys")],
        )
        .await?;
        let table = t.audit_command(false).await?;
        println!("{table}");
        let line = table
            .lines()
            .find(|l| l.contains(&gone.key_id))
            .unwrap_or_default();
        anyhow::ensure!(
            line.contains("orphan: removed after the grace period"),
            "the table must list the stripped access's user as an orphan:\n{table}"
        );
        anyhow::ensure!(
            table
                .lines()
                .any(|l| l.contains(&kept.key_id) && l.contains("owned")),
            "the live grant's user is owned:\n{table}"
        );
        let json: serde_json::Value = serde_json::from_str(&t.audit_command(true).await?)?;
        let orphan = json["items"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|i| i["name"] == gone.key_id.as_str())
            .cloned()
            .unwrap_or_default();
        anyhow::ensure!(
            orphan["decision"] == "waiting" && orphan["kind"] == "principal",
            "JSON: {json:#}"
        );
        let resumed = t.resume()?;
        wait_denied(&gone, resumed, t.grace).await?;
        let table = t.audit_command(false).await?;
        anyhow::ensure!(
            !table.contains(&gone.key_id) && !table.contains("orphan"),
            "nothing orphaned is left after the sweep:\n{table}"
        );
        Ok(())
    }
    .await;
    t.stop().await;
    result
}

/// Issue 36, item 2: buckets whose owners went without a teardown (an
/// administrator stripped the finalizers of the BucketClaims and Buckets
/// and deleted them, the controller not running) are deleted by the sweep
/// only where the store records `Delete`: a bucket of a Delete class goes,
/// data and all (the class sets forceDelete); a bucket of a Retain class
/// stays, and so does one made under Delete whose Bucket an administrator
/// switched to Retain before deleting it (the driver recorded that in the
/// store when it refused the deletion), and a Retain ObjectBucketClaim's
/// bucket whose Released ObjectBucket was deleted. A live claim's bucket
/// is untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn orphaned_buckets_go_only_where_the_store_records_delete() -> Result<()> {
    let mut t = Swept::start("sweep-buckets", GRACE).await?;
    let result = async {
        let c = t.client().clone();
        let mut buckets = std::collections::BTreeMap::new();
        for (claim, class) in [
            ("doomed", DELETE_CLASS),
            ("kept", RETAIN_CLASS),
            ("switched", DELETE_CLASS),
        ] {
            create(&c, Kind::BucketClaim, NS, claim, claim_of_class(class)).await?;
            let ready =
                wait_ready(&c, Kind::BucketClaim, NS, claim, Duration::from_secs(60)).await?;
            let bucket = status_str(&ready, "boundBucketName").unwrap();
            t.suite
                .root()
                .put_object()
                .bucket(&bucket)
                .key("data")
                .body(ByteStream::from_static(b"data"))
                .send()
                .await?;
            buckets.insert(claim, bucket);
        }
        let ledger = t.obc_claim("ledger").await?;
        // An ObjectBucketClaim of a Retain class, deleted: its ObjectBucket
        // is Released and the store records that the bucket is kept.
        let archive = t.obc_claim_of("archive", "s3-retain", "Retain").await?;
        let claims = Api::<ObjectBucketClaim>::namespaced(c.clone(), NS);
        claims.delete("archive", &DeleteParams::default()).await?;
        obc_tests::recording::wait_gone(&claims, "archive", Duration::from_secs(30)).await?;
        anyhow::ensure!(
            reclaim_tag(&t, &archive.bucket).await?.as_deref() == Some("Retain"),
            "a released bucket must record Retain"
        );

        // An administrator switches one Bucket to Retain and deletes it:
        // the driver records that in the store, then refuses.
        let switched = buckets["switched"].clone();
        api(&c, Kind::Bucket, NS)
            .patch(
                &switched,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"deletionPolicy": "Retain"}})),
            )
            .await?;
        api(&c, Kind::Bucket, NS)
            .delete(&switched, &DeleteParams::default())
            .await?;
        let refused = wait_error(&c, Kind::Bucket, NS, &switched, Duration::from_secs(30)).await?;
        anyhow::ensure!(refused.contains("Retain"), "refusal: {refused}");
        let reclaim = reclaim_tag(&t, &switched).await?;
        anyhow::ensure!(
            reclaim.as_deref() == Some("Retain"),
            "the store must record Retain for the switched bucket, not {reclaim:?}"
        );

        t.pause().await;
        let mut objects: Vec<(Option<Kind>, &str)> = Vec::new();
        for (claim, bucket) in &buckets {
            objects.push((Some(Kind::BucketClaim), claim));
            objects.push((Some(Kind::Bucket), bucket));
        }
        strip_and_delete(&c, &objects).await?;
        Api::<ObjectBucket>::all(c.clone())
            .delete(&format!("obc-{NS}-archive"), &DeleteParams::default())
            .await?;
        let audit = t.audit().await?;
        let decision = |name: &str| {
            audit
                .plan
                .items
                .iter()
                .find(|i| i.made.kind == MadeKind::Bucket && i.made.name == name)
                .map(|i| i.decision.clone())
        };
        anyhow::ensure!(
            matches!(decision(&buckets["doomed"]), Some(Decision::Waiting { .. })),
            "the Delete bucket waits out its grace:\n{audit}"
        );
        for kept in [&buckets["kept"], &switched, &archive.bucket] {
            anyhow::ensure!(
                decision(kept) == Some(Decision::ReportBucket),
                "{kept} is only reported:\n{audit}"
            );
        }
        anyhow::ensure!(decision(&ledger.bucket) == Some(Decision::Owned), "{audit}");

        let resumed = t.resume()?;
        let bound = INTERVAL + t.grace + SLACK;
        let doomed = buckets["doomed"].clone();
        wait_for(
            bound,
            "the orphaned Delete bucket to be deleted",
            || async { Ok((!t.suite.buckets().await?.contains(&doomed)).then_some(())) },
        )
        .await?;
        println!(
            "the orphaned Delete bucket went {:?} after the controller started",
            resumed.elapsed()
        );
        for _ in 0..2 {
            tokio::time::sleep(INTERVAL).await;
        }
        for kept in [&buckets["kept"], &switched] {
            let data = t
                .suite
                .root()
                .get_object()
                .bucket(kept)
                .key("data")
                .send()
                .await;
            anyhow::ensure!(data.is_ok(), "{kept} and its data must stay: {data:?}");
        }
        anyhow::ensure!(
            t.suite.buckets().await?.contains(&archive.bucket),
            "the released bucket must stay"
        );
        anyhow::ensure!(
            writes(&ledger).await,
            "a live claim's bucket must stay usable"
        );
        Ok(())
    }
    .await;
    t.stop().await;
    result
}
