//! `/healthz` against a real kube-apiserver: it fails once every watch has
//! been dead for longer than the limit (the apiserver down), says why, and
//! answers ok again once the apiserver is back; a namespace the controller
//! may not read fails its own watches only, which neither fails `/healthz`
//! nor holds back the claims of the namespaces it may read.

use std::time::{Duration, Instant};

use lib_provisioner::ControllerBuilder;
use lib_provisioner::api::{ClaimPhase, ObjectBucketClaimSpec};
use obc_tests::recording::{
    PROVISIONER, Recorder, RunningController, create_claim, create_class_for, wait_phase,
};
use obc_tests::setup::{healthz, repo_file, start_with_crds};
use obc_tests::wait_for;

const T: Duration = Duration::from_secs(45);
const LIMIT: Duration = Duration::from_secs(3);

fn spec(prefix: &str) -> ObjectBucketClaimSpec {
    ObjectBucketClaimSpec {
        storage_class_name: "c".into(),
        generate_bucket_name: Some(prefix.into()),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_fails_while_the_apiserver_is_down_for_longer_than_the_limit() {
    let env = start_with_crds().await.expect("env");
    let client = env.admin_client();
    env.ensure_namespace("h").await.expect("ns");
    create_class_for(&client, "c", PROVISIONER, "Delete", &[])
        .await
        .expect("class");
    let port = obc_tests::testenv::free_port().expect("free port");
    let controller = RunningController::start_with(
        client.clone(),
        ControllerBuilder::new(PROVISIONER, Recorder::default())
            .serve_on(([127, 0, 0, 1], port).into())
            .dead_watch_limit(LIMIT),
    );
    create_claim(&client, "h", "before", spec("before"))
        .await
        .expect("claim");
    wait_phase(&client, "h", "before", ClaimPhase::Bound, T)
        .await
        .expect("binds");
    assert_eq!(healthz(port).await.map(|h| h.0), Some(200));

    // The outage starts when the stop begins: the watches may see the
    // connection go before the apiserver's process is reaped.
    let down = Instant::now();
    env.stop_apiserver().await;
    let (status, body) = wait_for(T, "/healthz to fail", || async {
        Ok(healthz(port).await.filter(|h| h.0 != 200))
    })
    .await
    .expect("/healthz fails while the apiserver is down");
    let failed_after = down.elapsed();
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("every watch has failed"), "{body}");
    assert!(
        failed_after >= LIMIT,
        "failed after {failed_after:?}, before the limit"
    );
    println!("/healthz failed {failed_after:.1?} into the outage (limit {LIMIT:?})");

    env.start_stopped_apiserver().await.expect("apiserver back");
    let back = Instant::now();
    wait_for(T, "/healthz to answer ok", || async {
        Ok(healthz(port).await.filter(|h| h.0 == 200))
    })
    .await
    .expect("/healthz ok once the apiserver is back");
    println!(
        "/healthz ok {:.1?} after the apiserver was back",
        back.elapsed()
    );
    create_claim(&client, "h", "after", spec("after"))
        .await
        .expect("claim");
    wait_phase(&client, "h", "after", ClaimPhase::Bound, T)
        .await
        .expect("binds after the outage");
    controller.stop().await.expect("stops");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_the_controller_may_not_read_fails_neither_healthz_nor_the_others() {
    let env = start_with_crds().await.expect("env");
    let admin = env.admin_client();
    for ns in ["team-a", "team-b"] {
        env.ensure_namespace(ns).await.expect("ns");
    }
    env.apply_yaml(&repo_file("deploy/namespace.yaml").expect("file"))
        .await
        .expect("namespace");
    // A Role in team-a only: the watches of team-b are refused.
    env.apply_yaml(&repo_file("deploy/rbac-namespaced.yaml").expect("file"))
        .await
        .expect("rbac");
    create_class_for(&admin, "c", PROVISIONER, "Delete", &[])
        .await
        .expect("class");
    let sa = env
        .service_account_client("obc-system", "sample-provisioner")
        .await
        .expect("sa client");
    let port = obc_tests::testenv::free_port().expect("free port");
    let controller = RunningController::start_with(
        sa,
        ControllerBuilder::new(PROVISIONER, Recorder::default())
            .namespaces(["team-a", "team-b"])
            .serve_on(([127, 0, 0, 1], port).into())
            .dead_watch_limit(LIMIT),
    );
    create_claim(&admin, "team-a", "c", spec("a"))
        .await
        .expect("claim");
    wait_phase(&admin, "team-a", "c", ClaimPhase::Bound, T)
        .await
        .expect("team-a's claim binds while team-b's watches are refused");
    tokio::time::sleep(LIMIT * 2).await;
    let health = healthz(port).await;
    assert_eq!(
        health.as_ref().map(|h| h.0),
        Some(200),
        "one namespace refused fails /healthz: {health:?}"
    );
    controller.stop().await.expect("stops");
}
