//! Provisioner calls under the library's timeout, against a real
//! kube-apiserver: a store that never answers neither pins a claim nor
//! holds shutdown, and the claim binds once the store answers again.

use std::time::{Duration, Instant};

use kube::api::Api;
use lib_provisioner::ControllerBuilder;
use lib_provisioner::api::{ClaimPhase, ObjectBucketClaim, ObjectBucketClaimSpec};
use obc_tests::recording::{
    Call, PROVISIONER, Recorder, RunningController, create_claim, create_class, message,
    wait_event, wait_phase,
};
use obc_tests::setup::start_with_crds;
use obc_tests::wait_for;

const T: Duration = Duration::from_secs(30);

fn spec(class: &str, prefix: &str) -> ObjectBucketClaimSpec {
    ObjectBucketClaimSpec {
        storage_class_name: class.into(),
        generate_bucket_name: Some(prefix.into()),
        ..Default::default()
    }
}

/// The claim's `Bound` condition reason.
fn reason(claim: &ObjectBucketClaim) -> String {
    claim
        .status
        .as_ref()
        .and_then(|s| {
            s.conditions
                .iter()
                .find(|c| c.type_ == lib_provisioner::BOUND_CONDITION)
        })
        .map(|c| c.reason.clone())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_provisioner_call_is_cut_off_and_the_claim_recovers() {
    let env = start_with_crds()
        .await
        .expect("test environment starts with the CRDs");
    let client = env.admin_client();
    env.ensure_namespace("hung").await.expect("ns");
    create_class(&client, "c", "Delete", &[])
        .await
        .expect("class");
    let rec = Recorder::default();
    rec.hang();
    let limit = Duration::from_secs(1);
    let controller = RunningController::start_with(
        client.clone(),
        ControllerBuilder::new(PROVISIONER, rec.clone()).provisioner_timeout(limit),
    );
    create_claim(&client, "hung", "a", spec("c", "hung"))
        .await
        .expect("claim");

    // Cut off: the claim says so, stays Pending, and is retried.
    let claims: Api<ObjectBucketClaim> = Api::namespaced(client.clone(), "hung");
    let pending = wait_for(T, "the claim to show the timeout", || async {
        let claim = claims.get("a").await?;
        Ok((reason(&claim) == "ProvisionerTimeout").then_some(claim))
    })
    .await
    .expect("timeout shown");
    assert_eq!(
        pending.status.as_ref().and_then(|s| s.phase),
        Some(ClaimPhase::Pending)
    );
    assert!(
        message(&pending).contains("did not answer within 1s"),
        "{}",
        message(&pending)
    );
    wait_for(T, "a retry after the first cut-off call", || async {
        Ok((rec.hung() >= 2).then_some(()))
    })
    .await
    .expect("retried");
    wait_event(&client, "hung", "a", |r, note| {
        r == "ProvisionerTimeout" && note.contains("did not answer within")
    })
    .await
    .expect("a ProvisionerTimeout Event");
    assert!(rec.buckets().is_empty(), "no call finished while hung");

    // The store answers again: the claim binds, with one bucket.
    rec.answer();
    wait_phase(&client, "hung", "a", ClaimPhase::Bound, T)
        .await
        .expect("binds once the store answers");
    assert_eq!(rec.buckets().len(), 1, "{:?}", rec.buckets());
    assert_eq!(rec.count(|c| matches!(c, Call::Provision(_))), 1);

    // Shutdown does not wait on a hung call past the timeout.
    rec.hang();
    let hung_before = rec.hung();
    create_claim(&client, "hung", "b", spec("c", "hung"))
        .await
        .expect("claim");
    wait_for(T, "the second claim's call to hang", || async {
        Ok((rec.hung() > hung_before).then_some(()))
    })
    .await
    .expect("hangs");
    let started = Instant::now();
    tokio::time::timeout(T, controller.stop())
        .await
        .expect("shutdown is not held by the hung call")
        .expect("stops cleanly");
    let took = started.elapsed();
    println!("shutdown with a hung call took {took:?} (timeout {limit:?})");
    rec.answer();
}
