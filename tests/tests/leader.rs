//! Leader election in this process against a real kube-apiserver: a
//! standby whose wall clock is an hour ahead never acts while the leader
//! renews, takes over within the lease once the leader stops, and (its
//! caches warm) reconciles at once.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, ensure};
use k8s_openapi::jiff::SignedDuration;
use lib_provisioner::ControllerBuilder;
use lib_provisioner::api::{ClaimPhase, ObjectBucketClaimSpec};
use obc_tests::TestEnv;
use obc_tests::lease::TestLease;
use obc_tests::recording::{
    PROVISIONER, Recorder, RunningController, create_claim, create_class, wait_phase,
};
use obc_tests::setup::start_with_crds;

const T: Duration = Duration::from_secs(30);
const SYSTEM: &str = "leader-system";
const LEASE_NAME: &str = "recorder";
const LEASE: Duration = Duration::from_secs(6);
const RENEW: Duration = Duration::from_secs(2);

const LEASE_OF: TestLease = TestLease {
    namespace: SYSTEM,
    name: LEASE_NAME,
    duration: LEASE,
};

fn free_addr() -> Result<SocketAddr> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?)
}

/// The sum of every sample of `metric` on the server at `addr`.
async fn metric(addr: SocketAddr, metric: &str) -> Result<f64> {
    let text = reqwest::get(format!("http://{addr}/metrics"))
        .await?
        .text()
        .await?;
    let mut sum = 0.0;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some(rest) = line.strip_prefix(metric) else {
            continue;
        };
        if !(rest.starts_with(' ') || rest.starts_with('{')) {
            continue;
        }
        let value = rest.rsplit(' ').next().context("a sample's value")?;
        sum += value.parse::<f64>()?;
    }
    Ok(sum)
}

fn spec() -> ObjectBucketClaimSpec {
    ObjectBucketClaimSpec {
        storage_class_name: "delete-class".into(),
        generate_bucket_name: Some("lead".into()),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_with_a_skewed_clock_never_acts_and_takes_over_when_the_leader_stops() {
    let env = start_with_crds()
        .await
        .expect("test environment starts with the CRDs");
    skewed_standby(&env)
        .await
        .expect("the skewed standby waits, then takes over");
}

async fn skewed_standby(env: &TestEnv) -> Result<()> {
    let client = &env.admin_client();
    env.ensure_namespace(SYSTEM).await?;
    env.ensure_namespace("apps").await?;
    create_class(client, "delete-class", "Delete", &[]).await?;

    let (a_calls, b_calls) = (Recorder::default(), Recorder::default());
    let (a_addr, b_addr) = (free_addr()?, free_addr()?);
    let a = RunningController::start_with(
        client.clone(),
        ControllerBuilder::new(PROVISIONER, a_calls.clone())
            .leader_election(LEASE_OF.election("a"))
            .serve_on(a_addr),
    );
    LEASE_OF.wait_holder(client, "a", T).await?;
    // b's clock is an hour ahead: by it, a's renewTime is always an hour
    // old. Comparing wall clocks, b would take the Lease at once.
    let b = RunningController::start_with(
        client.clone(),
        ControllerBuilder::new(PROVISIONER, b_calls.clone())
            .leader_election(
                LEASE_OF
                    .election("b")
                    .with_wall_clock_skew(SignedDuration::from_hours(1)),
            )
            .serve_on(b_addr),
    );

    let claims: Vec<String> = (0..4).map(|i| format!("c{i}")).collect();
    for name in &claims {
        create_claim(client, "apps", name, spec()).await?;
    }
    for name in &claims {
        wait_phase(client, "apps", name, ClaimPhase::Bound, T).await?;
    }

    // Three leases long, the Lease stays a's and b does nothing.
    let watched = Instant::now();
    while watched.elapsed() < LEASE * 3 {
        let who = LEASE_OF.holder(client).await?;
        ensure!(who.as_deref() == Some("a"), "the Lease moved to {who:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    ensure!(
        b_calls.calls().is_empty(),
        "the standby called the provisioner: {:?}",
        b_calls.calls()
    );
    ensure!(metric(b_addr, "obc_reconciles_total").await? == 0.0);
    ensure!(metric(b_addr, "obc_leader").await? == 0.0);
    ensure!(metric(a_addr, "obc_leader").await? == 1.0);
    // The standby's cache holds the claims already.
    let cached = metric(b_addr, "obc_claims").await?;
    ensure!(cached == 4.0, "the standby caches {cached} claims");

    // a stops renewing without giving the Lease up (its task is dropped,
    // as in a crash); a claim created meanwhile waits for b.
    drop(a);
    let stopped = Instant::now();
    create_claim(client, "apps", "after", spec()).await?;
    LEASE_OF.wait_holder(client, "b", T).await?;
    let takeover = stopped.elapsed();
    let took_over = Instant::now();
    wait_phase(client, "apps", "after", ClaimPhase::Bound, T).await?;
    let first_bind = took_over.elapsed();
    eprintln!(
        "takeover {:.2} s after the leader stopped; the waiting claim bound {:.2} s after that",
        takeover.as_secs_f64(),
        first_bind.as_secs_f64()
    );
    // a renewed at most one period before it stopped; b counts a full
    // lease from when it saw that renewal, and retries every period.
    ensure!(
        takeover >= LEASE - RENEW,
        "b took over {takeover:?} after the leader stopped: before the lease ran out"
    );
    ensure!(
        takeover <= LEASE + RENEW + Duration::from_secs(2),
        "b took over only {takeover:?} after the leader stopped"
    );
    ensure!(
        first_bind < Duration::from_secs(3),
        "the new leader took {first_bind:?} to bind a waiting claim (a cold start relists)"
    );
    ensure!(metric(b_addr, "obc_leader").await? == 1.0);
    ensure!(!b_calls.calls().is_empty(), "the new leader did not act");
    b.stop().await?;
    Ok(())
}
