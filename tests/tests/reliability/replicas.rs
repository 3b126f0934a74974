//! Two replicas sharing the Lease of `deploy/`: only the leader acts, it
//! hands over within the lease, and a frozen leader does not act on waking.

use std::time::{Duration, Instant};

use anyhow::{Result, ensure};
use k8s_openapi::api::coordination::v1::Lease;
use kube::Client;
use kube::api::Api;
use obc_tests::reliability::{
    Classes, Kind, Proc, Summary, acts, converge, count_operations, ensure_no_acts,
    register_claim_secrets, wait_all_bound, wait_all_gone,
};

use super::{MIXED, Suite, T, create, delete_claim, logs};

async fn holder(client: &Client) -> Result<Option<String>> {
    let lease = Api::<Lease>::namespaced(client.clone(), obc_tests::reliability::SYSTEM_NAMESPACE)
        .get_opt(obc_tests::reliability::LEASE_NAME)
        .await?;
    Ok(lease.and_then(|l| l.spec?.holder_identity))
}

async fn wait_holder(client: &Client, who: &str, timeout: Duration) -> Result<Duration> {
    let start = Instant::now();
    obc_tests::wait_for(timeout, format!("{who} to hold the Lease"), || async {
        Ok((holder(client).await?.as_deref() == Some(who)).then_some(()))
    })
    .await?;
    Ok(start.elapsed())
}

/// Lease duration of the two-replica tests; renewal every third of it.
const LEASE: u64 = 6;

fn renew_every() -> Duration {
    Duration::from_secs(LEASE) / 3
}

/// A candidate retries every renewal period, so it takes over at most one
/// period after the lease ran out; plus 2 s of scheduling slack.
fn handover_bound() -> Duration {
    Duration::from_secs(LEASE) + renew_every() + Duration::from_secs(2)
}

/// Successful provisions and grants a log records: blind to deletions and
/// to failed calls, so never the proof that a replica did not act (that is
/// [`ensure_no_acts`]).
fn ops(log: &str) -> usize {
    count_operations(log, "provision") + count_operations(log, "grant")
}

/// Every act (Kubernetes write or provisioner call, failed ones included)
/// a process logged after byte `from` of its log.
fn acts_since(p: &Proc, from: usize) -> usize {
    acts(p.log().get(from..).unwrap_or_default()).len()
}

/// Two replicas of the sample provisioner sharing the Lease of `deploy/`.
struct Replicas<'a> {
    suite: &'a Suite,
    ns: &'static str,
    classes: Classes,
    created: Vec<(String, Kind)>,
}

impl<'a> Replicas<'a> {
    async fn new(suite: &'a Suite, ns: &'static str) -> Result<Self> {
        let classes = suite.namespace(ns).await?;
        Ok(Self {
            suite,
            ns,
            classes,
            created: Vec::new(),
        })
    }

    fn start(&self, id: &str) -> Result<Proc> {
        let mut l = self.suite.launch(id);
        l.leader = Some((id.to_owned(), LEASE));
        l.start(logs())
    }

    /// Starts a replica and waits until it says it stands by.
    async fn start_standby(&self, id: &str) -> Result<Proc> {
        let p = self.start(id)?;
        obc_tests::wait_for(T, format!("{id} to stand by"), || async {
            Ok(p.log().contains("standing by").then_some(()))
        })
        .await?;
        Ok(p)
    }

    /// Creates `n` claims of mixed kinds; returns their names.
    async fn claims(&mut self, n: usize) -> Result<Vec<String>> {
        let mut names = Vec::new();
        for _ in 0..n {
            let i = self.created.len();
            let name = format!("h{i}");
            let kind = MIXED[i % MIXED.len()].clone();
            let spec = kind.spec(&self.classes, &format!("{}-{i}", self.ns));
            create(&self.suite.admin, self.ns, &name, spec).await?;
            self.created.push((name.clone(), kind));
            names.push(name);
        }
        Ok(names)
    }

    /// Deletes every claim created; checks that all is gone and agrees.
    async fn delete_all(&self, summary: &mut Summary) -> Result<()> {
        let client = &self.suite.admin;
        let mut x = self.suite.expect(&[self.ns]);
        let agr = converge(&self.suite.env, client, &x, T).await?;
        summary.check("before deletion", &agr)?;
        register_claim_secrets(client, &[self.ns]).await?;
        for (name, kind) in &self.created {
            x.deleted
                .push(delete_claim(client, self.ns, name, kind).await?);
        }
        let names: Vec<String> = self.created.iter().map(|(n, _)| n.clone()).collect();
        wait_all_gone(client, self.ns, &names, T).await?;
        let agr = converge(&self.suite.env, client, &x, T).await?;
        summary.check("after deletion", &agr)?;
        summary.note("claims", names.len());
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_never_both_act_and_hand_over_within_the_lease() {
    Suite::run("two replicas", &["ha"], two_replicas).await;
}

async fn two_replicas(suite: &Suite, summary: &mut Summary) -> Result<()> {
    let client = &suite.admin;
    let mut r = Replicas::new(suite, "ha").await?;
    let mut a = r.start("replica-a")?;
    wait_holder(client, "replica-a", T).await?;
    let mut b = r.start_standby("replica-b").await?;

    // 1. Only the leader acts.
    let first = r.claims(8).await?;
    wait_all_bound(client, r.ns, &first, T).await?;
    ensure_no_acts("the standby replica-b", &b.log())?;
    ensure!(
        ops(&a.log()) >= first.len(),
        "the leader logged {} operations for {} claims",
        ops(&a.log()),
        first.len()
    );
    let x = suite.expect(&[r.ns]);
    let agr = converge(&suite.env, client, &x, T).await?;
    summary.check("one leader", &agr)?;

    // 2. SIGKILL the leader: the standby takes over within the lease.
    let killed = Instant::now();
    a.kill().await;
    summary.counts.crashes += 1;
    let second = r.claims(6).await?;
    let handover = wait_holder(
        client,
        "replica-b",
        handover_bound() + Duration::from_secs(5),
    )
    .await?;
    wait_all_bound(client, r.ns, &second, T).await?;
    summary.note(
        "hand-over after SIGKILL",
        format!("{:.1}s", handover.as_secs_f64()),
    );
    summary.note(
        "claims served again after SIGKILL",
        format!("{:.1}s", killed.elapsed().as_secs_f64()),
    );
    ensure!(
        handover <= handover_bound(),
        "hand-over took {handover:?}, more than lease {LEASE}s + renew {:?} + 2s",
        renew_every()
    );
    let agr = converge(&suite.env, client, &x, T).await?;
    summary.check("after the SIGKILL hand-over", &agr)?;

    // 3. The killed replica comes back as a standby and does nothing.
    let a = r.start_standby("replica-a").await?;
    let third = r.claims(4).await?;
    wait_all_bound(client, r.ns, &third, T).await?;
    ensure_no_acts("the restarted standby replica-a", &a.log())?;

    // Everything is deleted by the leader; the standby neither writes nor
    // calls the provisioner, not even a failed teardown.
    let deletion = b.log().len();
    r.delete_all(summary).await?;
    ensure_no_acts("the standby replica-a during deletion", &a.log())?;
    // The same count does see a deletion's acts, in the leader's log (the
    // old count of successful provisions saw none of them).
    let deletion_log = b.log().get(deletion..).unwrap_or_default().to_owned();
    let leader_acts = acts(&deletion_log).len();
    summary.note("acts of the leader during deletion", leader_acts);
    ensure!(
        leader_acts > 0 && ensure_no_acts("replica-b", &deletion_log).is_err(),
        "the deletion's writes were not counted in the leader's log: the standby's count could not fail"
    );
    ensure!(
        ops(&deletion_log) == 0,
        "a deletion logged a successful provision"
    );
    ensure!(b.is_running(), "the leader exited: {}", b.log_tail(30));
    summary.counts.scenarios = 3;
    Ok(())
}

/// A leader frozen longer than its lease (a stop-the-world pause: SIGSTOP
/// here; a VM stall or a blocked runtime in production) must not act once
/// it wakes: the standby leads by then. Three rounds, with claims created
/// just before and just after the wake-up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_leader_does_not_act_after_it_wakes() {
    Suite::run("frozen leader", &["frozen"], frozen_leader).await;
}

async fn frozen_leader(suite: &Suite, summary: &mut Summary) -> Result<()> {
    let client = &suite.admin;
    let mut r = Replicas::new(suite, "frozen").await?;
    let mut leader = r.start("replica-a")?;
    wait_holder(client, "replica-a", T).await?;
    let mut standby = r.start_standby("replica-b").await?;
    let (mut leader_id, mut standby_id) = ("replica-a", "replica-b");
    let (mut woken_acts, mut woken_steps) = (0, 0);
    let mut slowest = Duration::ZERO;
    for round in 0..3 {
        leader.signal("STOP").await?;
        let frozen = Instant::now();
        summary.counts.crashes += 1;
        let handover = wait_holder(
            client,
            standby_id,
            handover_bound() + Duration::from_secs(5),
        )
        .await?;
        slowest = slowest.max(handover);
        let during = r.claims(4).await?;
        wait_all_bound(client, r.ns, &during, T).await?;
        tokio::time::sleep(Duration::from_secs(LEASE).saturating_sub(frozen.elapsed())).await;
        // Many claims still unprovisioned when it wakes: the new leader
        // works through them while the woken one reads its watch backlog.
        let mut around = r.claims(24).await?;
        let mark = leader.log().len();
        leader.signal("CONT").await?;
        around.extend(r.claims(8).await?);
        let exited = leader
            .wait_exit(renew_every() * 3 + Duration::from_secs(2))
            .await;
        wait_all_bound(client, r.ns, &around, T).await?;
        woken_acts += acts_since(&leader, mark);
        // Every step other than Done/Ignore is a write or a provisioner call.
        let log = leader.log();
        woken_steps += log
            .get(mark..)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("next step"))
            .filter(|l| !l.contains("step=Done") && !l.contains("step=Ignore"))
            .count();
        ensure!(
            exited.is_some() && leader.log().contains("lost the leader lease"),
            "round {round}: the woken ex-leader did not exit for its lost lease:\n{}",
            leader.log_tail(20)
        );
        // The woken one restarts as the standby; roles swap.
        let restarted = r.start_standby(leader_id).await?;
        leader = std::mem::replace(&mut standby, restarted);
        std::mem::swap(&mut leader_id, &mut standby_id);
    }
    summary.note(
        "slowest hand-over after a freeze",
        format!("{:.1}s", slowest.as_secs_f64()),
    );
    summary.note(
        "writes and provisioner calls by woken ex-leaders",
        woken_acts,
    );
    summary.note("write steps by woken ex-leaders", woken_steps);
    ensure!(slowest <= handover_bound(), "hand-over took {slowest:?}");
    r.delete_all(summary).await?;
    ensure!(
        woken_acts == 0 && woken_steps == 0,
        "woken ex-leaders made {woken_acts} writes and provisioner calls and took {woken_steps} write steps after a new leader took over"
    );
    summary.counts.scenarios = 3;
    Ok(())
}
