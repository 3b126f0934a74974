//! The provisioning path before bind against a real kube-apiserver, with
//! the recording provisioner (issue 25): a permanent failure after the
//! bucket was made keeps its record, a class switched before bind is
//! refused, and two claims asking for one bucket name at once never both
//! reach `provision`, with the name's record released when its claim goes
//! and taken over from a claim that died holding it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use lib_provisioner::api::{ClaimPhase, ObjectBucket, ObjectBucketClaim, ObjectBucketClaimSpec};
use lib_provisioner::{
    BucketAccess, BucketRequest, ControllerBuilder, ProvisionError, Provisioner, TeardownRequest,
};
use obc_tests::recording::{
    Call, PROVISIONER, Recorder, RunningController, create_claim, create_class, message,
    wait_event, wait_gone, wait_phase,
};
use obc_tests::setup::start_with_crds;
use obc_tests::{TestEnv, wait_for};
use serde_json::json;

const T: Duration = Duration::from_secs(30);
/// The provisioner's own namespace, where bucket names are held.
const SYSTEM_NS: &str = "obc-system";
const RESERVED: &str = "objectbucket.io/reserved";

/// Holds greenfield names in [`SYSTEM_NS`] (issue 25, item 6).
fn arbitrated<P: Provisioner>(builder: ControllerBuilder<P>) -> ControllerBuilder<P> {
    builder.bucket_name_records(SYSTEM_NS)
}

/// Says that a failed call created nothing (issue 25, item 11).
fn made_nothing(e: ProvisionError) -> ProvisionError {
    e.with_nothing_created()
}

/// One `provision` call as the store saw it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Provisioned {
    bucket: String,
    claim_uid: String,
    class: String,
}

/// The recording provisioner, plus who asked for what, and two failures
/// by bucket name: `made-*` fails for good after the bucket was created
/// (a quota the store refused), `refused-*` fails for good before anything
/// was created, and says so.
#[derive(Clone, Default)]
struct Probe {
    rec: Recorder,
    seen: Arc<Mutex<Vec<Provisioned>>>,
}

impl Probe {
    fn seen(&self) -> Vec<Provisioned> {
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

#[async_trait]
impl Provisioner for Probe {
    async fn provision(&self, req: &BucketRequest) -> Result<BucketAccess, ProvisionError> {
        self.seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Provisioned {
                bucket: req.bucket_name.clone(),
                claim_uid: req.claim.uid.clone(),
                class: req.storage_class_name.clone(),
            });
        if req.bucket_name.starts_with("refused-") {
            return Err(made_nothing(ProvisionError::permanent(
                "the store refused the bucket name before creating anything",
            )));
        }
        let access = self.rec.provision(req).await?;
        if req.bucket_name.starts_with("made-") {
            return Err(ProvisionError::permanent(
                "the store refused the quota after CreateBucket: remove maxSize",
            ));
        }
        Ok(access)
    }
    async fn grant(&self, req: &BucketRequest) -> Result<BucketAccess, ProvisionError> {
        self.rec.grant(req).await
    }
    async fn delete(&self, req: &TeardownRequest) -> Result<(), ProvisionError> {
        self.rec.delete(req).await
    }
    async fn revoke(&self, req: &TeardownRequest) -> Result<(), ProvisionError> {
        self.rec.revoke(req).await
    }
}

/// The environment with the CRDs, kube-controller-manager (garbage
/// collection), the provisioner's namespace and a controller running
/// `probe` with bucket names held there.
async fn setup(probe: &Probe) -> (TestEnv, Client, RunningController) {
    let env = start_with_crds().await.expect("test environment starts");
    env.start_controller_manager()
        .await
        .expect("kube-controller-manager starts");
    env.ensure_namespace(SYSTEM_NS).await.expect("namespace");
    let client = env.admin_client();
    let controller = RunningController::start_with(
        client.clone(),
        arbitrated(ControllerBuilder::new(PROVISIONER, probe.clone())),
    );
    (env, client, controller)
}

fn exact(class: &str, bucket: &str) -> ObjectBucketClaimSpec {
    ObjectBucketClaimSpec {
        storage_class_name: class.into(),
        bucket_name: Some(bucket.into()),
        ..Default::default()
    }
}

fn is_reserved(ob: &ObjectBucket) -> bool {
    ob.annotations().contains_key(RESERVED)
}

/// Item 11: the store failed for good after CreateBucket; the reservation
/// is the bucket's only record. It stays, and the claim's deletion tears
/// the bucket down even after its class was deleted first. A failure that
/// made nothing drops the reservation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reservation_stays_until_the_provisioner_says_nothing_was_made() {
    let probe = Probe::default();
    let (env, client, controller) = setup(&probe).await;
    env.ensure_namespace("apps").await.expect("namespace");
    create_class(&client, "late", "Delete", &[("endpoint", "late")])
        .await
        .expect("class");
    let obs: Api<ObjectBucket> = Api::all(client.clone());
    let claims: Api<ObjectBucketClaim> = Api::namespaced(client.clone(), "apps");

    create_claim(&client, "apps", "made", exact("late", "made-bucket"))
        .await
        .expect("claim");
    create_claim(&client, "apps", "refused", exact("late", "refused-bucket"))
        .await
        .expect("claim");
    let made = wait_phase(&client, "apps", "made", ClaimPhase::Failed, T)
        .await
        .expect("fails");
    assert!(
        message(&made).contains("refused the quota"),
        "{}",
        message(&made)
    );
    wait_phase(&client, "apps", "refused", ClaimPhase::Failed, T)
        .await
        .expect("fails");
    assert!(probe.rec.buckets().contains("made-bucket"));

    let reservation = obs.get_opt("obc-apps-made").await.expect("reads");
    assert!(
        reservation.as_ref().is_some_and(is_reserved),
        "the bucket made-bucket exists in the store, but its claim's reservation is {reservation:?}: nothing records it"
    );
    wait_for(T, "the refused claim's reservation to go", || async {
        Ok(obs
            .get_opt("obc-apps-refused")
            .await?
            .is_none()
            .then_some(()))
    })
    .await
    .expect("a failure that made nothing leaves no reservation");

    // The class goes first: the reservation recorded its parameters.
    Api::<k8s_openapi::api::storage::v1::StorageClass>::all(client.clone())
        .delete("late", &DeleteParams::default())
        .await
        .expect("class deleted");
    for name in ["made", "refused"] {
        claims
            .delete(name, &DeleteParams::default())
            .await
            .expect("delete");
    }
    for name in ["made", "refused"] {
        wait_gone(&claims, name, T).await.expect("claim gone");
    }
    wait_gone(&obs, "obc-apps-made", T)
        .await
        .expect("reservation gone");
    assert!(
        !probe.rec.buckets().contains("made-bucket"),
        "orphaned: {:?}, calls {:?}",
        probe.rec.buckets(),
        probe.rec.calls()
    );
    assert_eq!(
        probe
            .rec
            .count(|c| *c == Call::Delete("made-bucket".into())),
        1
    );
    controller.stop().await.expect("stops");
}

/// Item 2: the store is down while the claim waits with its ObjectBucket
/// reserved on class A; the user switches the claim to class B. Nothing
/// is provisioned on B: the claim is refused until switched back, then
/// bound on A, and torn down on A.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_class_switched_before_bind_is_refused_and_nothing_is_made_on_it() {
    let probe = Probe::default();
    let (env, client, controller) = setup(&probe).await;
    env.ensure_namespace("apps").await.expect("namespace");
    for (class, endpoint) in [("class-a", "store-a"), ("class-b", "store-b")] {
        create_class(&client, class, "Delete", &[("endpoint", endpoint)])
            .await
            .expect("class");
    }
    let obs: Api<ObjectBucket> = Api::all(client.clone());
    let claims: Api<ObjectBucketClaim> = Api::namespaced(client.clone(), "apps");
    probe.rec.fail(true, "the store is down");
    create_claim(&client, "apps", "switch", exact("class-a", "switch-bucket"))
        .await
        .expect("claim");
    let reserved = wait_for(T, "the reservation on class-a", || async {
        Ok(obs.get_opt("obc-apps-switch").await?.filter(is_reserved))
    })
    .await
    .expect("reserved");
    assert_eq!(reserved.spec.storage_class_name, "class-a");

    claims
        .patch(
            "switch",
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "storageClassName": "class-b" } })),
        )
        .await
        .expect("the class may be edited before bind");
    // Let the edit reach a pass, then the store answers again.
    tokio::time::sleep(Duration::from_secs(1)).await;
    probe.rec.heal();
    let outcome = wait_for(T, "the switched claim to settle", || async {
        let c = claims.get("switch").await?;
        let phase = c.status.as_ref().and_then(|s| s.phase);
        Ok(matches!(phase, Some(ClaimPhase::Bound | ClaimPhase::Failed)).then_some(c))
    })
    .await
    .expect("settles");
    let on_b: Vec<_> = probe
        .seen()
        .into_iter()
        .filter(|p| p.class == "class-b")
        .collect();
    let ob = obs.get("obc-apps-switch").await.expect("OB");
    assert!(
        on_b.is_empty(),
        "provisioned on class-b while ObjectBucket obc-apps-switch records {:?}: {on_b:?}; claim {:?}: {}",
        ob.spec.storage_class_name,
        outcome.status.as_ref().and_then(|s| s.phase),
        message(&outcome)
    );
    assert_eq!(
        outcome.status.and_then(|s| s.phase),
        Some(ClaimPhase::Failed)
    );
    let failed = claims.get("switch").await.expect("claim");
    assert!(
        message(&failed).contains("set spec.storageClassName back to \"class-a\""),
        "{}",
        message(&failed)
    );
    wait_event(&client, "apps", "switch", |r, _| r == "StorageClassChanged")
        .await
        .expect("a StorageClassChanged Event");

    // Switched back: bound on class-a.
    claims
        .patch(
            "switch",
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "storageClassName": "class-a" } })),
        )
        .await
        .expect("switch back");
    wait_phase(&client, "apps", "switch", ClaimPhase::Bound, T)
        .await
        .expect("binds on class-a");
    assert!(probe.seen().iter().all(|p| p.class == "class-a"));
    claims
        .delete("switch", &DeleteParams::default())
        .await
        .expect("delete");
    wait_gone(&claims, "switch", T).await.expect("gone");
    assert!(!probe.rec.buckets().contains("switch-bucket"));
    controller.stop().await.expect("stops");
}

/// How many name pairs race in [`two_claims_created_at_once_never_both_reach_provision`].
const PAIRS: usize = 12;

/// Item 6: pairs of claims in two namespaces asking for one exact bucket
/// name, each pair created at once: per name, one claim reaches
/// `provision`, the other is told the name is taken. Once the winner is
/// deleted its name's record goes, and the loser gets the bucket.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_claims_created_at_once_never_both_reach_provision() {
    let probe = Probe::default();
    let (env, client, controller) = setup(&probe).await;
    for ns in ["race-a", "race-b"] {
        env.ensure_namespace(ns).await.expect("namespace");
    }
    create_class(&client, "race", "Delete", &[])
        .await
        .expect("class");
    for i in 0..PAIRS {
        let (bucket, name) = (format!("race-{i}"), format!("c{i}"));
        let (a, b) = tokio::join!(
            create_claim(&client, "race-a", &name, exact("race", &bucket)),
            create_claim(&client, "race-b", &name, exact("race", &bucket)),
        );
        a.expect("claim a");
        b.expect("claim b");
    }
    let mut winners = Vec::new();
    let mut losers = Vec::new();
    for i in 0..PAIRS {
        let name = format!("c{i}");
        let mut settled = Vec::new();
        for ns in ["race-a", "race-b"] {
            let api: Api<ObjectBucketClaim> = Api::namespaced(client.clone(), ns);
            let c = wait_for(T, format!("{ns}/{name} to settle"), || async {
                let c = api.get(&name).await?;
                let phase = c.status.as_ref().and_then(|s| s.phase);
                Ok(matches!(phase, Some(ClaimPhase::Bound | ClaimPhase::Failed)).then_some(c))
            })
            .await
            .expect("settles");
            settled.push((ns, c));
        }
        for (ns, c) in settled {
            match c.status.as_ref().and_then(|s| s.phase) {
                Some(ClaimPhase::Bound) => winners.push((ns, name.clone())),
                _ => losers.push((ns, name.clone(), message(&c))),
            }
        }
    }
    let mut reached: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for p in probe.seen() {
        reached.entry(p.bucket).or_default().insert(p.claim_uid);
    }
    let doubled: Vec<_> = reached.iter().filter(|(_, uids)| uids.len() > 1).collect();
    assert!(
        doubled.is_empty(),
        "{} of {PAIRS} names reached provision for two claims: {doubled:?}",
        doubled.len()
    );
    assert_eq!(winners.len(), PAIRS, "losers: {losers:?}");
    for (ns, name, msg) in &losers {
        assert!(msg.contains("is already claimed by"), "{ns}/{name}: {msg}");
    }

    // The winners go: their names' records are released, and the losers,
    // retried, get the buckets.
    let leases: Api<Lease> = Api::namespaced(client.clone(), SYSTEM_NS);
    for (ns, name) in &winners {
        Api::<ObjectBucketClaim>::namespaced(client.clone(), ns)
            .delete(name, &DeleteParams::default())
            .await
            .expect("delete");
    }
    for (ns, name) in &winners {
        wait_gone(
            &Api::<ObjectBucketClaim>::namespaced(client.clone(), ns),
            name,
            T,
        )
        .await
        .expect("winner gone");
    }
    for (ns, name, _) in &losers {
        wait_phase(&client, ns, name, ClaimPhase::Bound, T)
            .await
            .expect("the loser binds once the name is free");
    }
    for (ns, name, _) in &losers {
        Api::<ObjectBucketClaim>::namespaced(client.clone(), ns)
            .delete(name, &DeleteParams::default())
            .await
            .expect("delete");
        wait_gone(
            &Api::<ObjectBucketClaim>::namespaced(client.clone(), ns),
            name,
            T,
        )
        .await
        .expect("gone");
    }
    for i in 0..PAIRS {
        let lease = format!("obc-bucket-race-{i}");
        assert!(
            leases.get_opt(&lease).await.expect("reads").is_none(),
            "{lease} outlived both claims"
        );
    }
    controller.stop().await.expect("stops");
}

/// Item 6: a name's record whose holder died without releasing it (its
/// finalizer stripped while the provisioner was down) does not hold the
/// name forever; a record of a live claim does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_held_by_a_claim_that_is_gone_is_taken_over() {
    let probe = Probe::default();
    let (env, client, controller) = setup(&probe).await;
    env.ensure_namespace("apps").await.expect("namespace");
    create_class(&client, "plain", "Delete", &[])
        .await
        .expect("class");
    let leases: Api<Lease> = Api::namespaced(client.clone(), SYSTEM_NS);
    let dead = Lease {
        metadata: ObjectMeta {
            name: Some("obc-bucket-orphan-name".into()),
            annotations: Some(BTreeMap::from([
                ("objectbucket.io/claim".to_owned(), "apps/dead".to_owned()),
                (
                    "objectbucket.io/bucket-name".to_owned(),
                    "orphan-name".to_owned(),
                ),
            ])),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some("uid-of-a-claim-long-gone".into()),
            ..Default::default()
        }),
    };
    leases
        .create(&PostParams::default(), &dead)
        .await
        .expect("stale record");
    let claim = create_claim(&client, "apps", "heir", exact("plain", "orphan-name"))
        .await
        .expect("claim");
    wait_phase(&client, "apps", "heir", ClaimPhase::Bound, T)
        .await
        .expect("binds: the dead claim's record does not hold the name");
    let record = leases.get("obc-bucket-orphan-name").await.expect("record");
    assert_eq!(
        record.spec.and_then(|s| s.holder_identity),
        claim.metadata.uid
    );

    // A live holder keeps it, whatever the other claim's timing.
    create_claim(&client, "apps", "late", exact("plain", "orphan-name"))
        .await
        .expect("claim");
    let late = wait_phase(&client, "apps", "late", ClaimPhase::Failed, T)
        .await
        .expect("refused");
    assert!(
        message(&late).contains("already claimed by"),
        "{}",
        message(&late)
    );
    let reached: BTreeSet<String> = probe
        .seen()
        .into_iter()
        .filter(|p| p.bucket == "orphan-name")
        .map(|p| p.claim_uid)
        .collect();
    assert_eq!(reached.len(), 1, "{reached:?}");
    controller.stop().await.expect("stops");
}

/// Item 6: a claim that took its name's Lease and died before reserving
/// its ObjectBucket (crash point `after-bucket-name-held`) binds after the
/// restart, even when an earlier-created claim asking for the same name was
/// prepared too: the Lease decides between them, not the caches' order of
/// creation (which would reject the holder while the Lease rejects the
/// other: both Failed for good).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_holder_of_a_name_binds_after_a_crash_before_its_reservation() {
    let probe = Probe::default();
    let (env, client, controller) = setup(&probe).await;
    env.ensure_namespace("apps").await.expect("namespace");
    let claims: Api<ObjectBucketClaim> = Api::namespaced(client.clone(), "apps");
    // Both prepared by an earlier pass (finalizer and label), the earlier
    // one first; the later one holds the Lease. Their class appears last.
    let mut uids = BTreeMap::new();
    for name in ["earlier", "holder"] {
        let mut c = ObjectBucketClaim::new(name, exact("appears-later", "held-name"));
        c.metadata.finalizers = Some(vec![lib_provisioner::api::FINALIZER.into()]);
        c.metadata.labels = Some(BTreeMap::from([(
            lib_provisioner::api::PROVISIONER_LABEL.to_owned(),
            "test.objectbucket.io-recorder".to_owned(),
        )]));
        let created = claims
            .create(&PostParams::default(), &c)
            .await
            .expect("claim");
        uids.insert(name, created.metadata.uid.unwrap_or_default());
        tokio::time::sleep(Duration::from_millis(1100)).await;
    }
    let record = Lease {
        metadata: ObjectMeta {
            name: Some("obc-bucket-held-name".into()),
            annotations: Some(BTreeMap::from([
                ("objectbucket.io/claim".to_owned(), "apps/holder".to_owned()),
                (
                    "objectbucket.io/bucket-name".to_owned(),
                    "held-name".to_owned(),
                ),
            ])),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(uids["holder"].clone()),
            ..Default::default()
        }),
    };
    Api::<Lease>::namespaced(client.clone(), SYSTEM_NS)
        .create(&PostParams::default(), &record)
        .await
        .expect("the holder's record");
    create_class(&client, "appears-later", "Delete", &[])
        .await
        .expect("class");
    let holder = wait_for(T, "apps/holder to settle", || async {
        let c = claims.get("holder").await?;
        let phase = c.status.as_ref().and_then(|s| s.phase);
        Ok(matches!(phase, Some(ClaimPhase::Bound | ClaimPhase::Failed)).then_some(c))
    })
    .await
    .expect("settles");
    assert_eq!(
        holder.status.as_ref().and_then(|s| s.phase),
        Some(ClaimPhase::Bound),
        "the Lease's holder: {}",
        message(&holder)
    );
    let earlier = wait_phase(&client, "apps", "earlier", ClaimPhase::Failed, T)
        .await
        .expect("the other is refused");
    assert!(
        message(&earlier).contains("already claimed by"),
        "{}",
        message(&earlier)
    );
    for name in ["earlier", "holder"] {
        claims
            .delete(name, &DeleteParams::default())
            .await
            .expect("delete");
    }
    for name in ["earlier", "holder"] {
        wait_gone(&claims, name, T).await.expect("gone");
    }
    controller.stop().await.expect("stops");
}
