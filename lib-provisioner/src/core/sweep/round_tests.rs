//! One round against fake families and a fake store: a family that cannot
//! see stops the round before the store is asked anything; owners seen
//! only after the listing still count; the gauges follow the plan.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;

use super::*;
use crate::core::metrics::Metrics;
use crate::core::provisioner::{
    BucketAccess, BucketRequest, Made, MadeKind, ProvisionError, TeardownRequest,
};
use crate::core::sweep::plan::Decision;
use crate::core::sweep::source::{Snapshot, SweepClass};

/// A store holding one user per name in `users`, each naming its owner.
#[derive(Default)]
struct Store {
    users: Vec<(&'static str, &'static str)>,
    listed: AtomicUsize,
}

#[async_trait]
impl Provisioner for Store {
    async fn provision(&self, _: &BucketRequest) -> Result<BucketAccess, ProvisionError> {
        Err(ProvisionError::permanent("not in this test"))
    }
    async fn grant(&self, _: &BucketRequest) -> Result<BucketAccess, ProvisionError> {
        Err(ProvisionError::permanent("not in this test"))
    }
    async fn delete(&self, _: &TeardownRequest) -> Result<(), ProvisionError> {
        Ok(())
    }
    async fn revoke(&self, _: &TeardownRequest) -> Result<(), ProvisionError> {
        Ok(())
    }
    async fn inventory(&self, _: &InventoryRequest) -> Result<Vec<Made>, ProvisionError> {
        self.listed.fetch_add(1, Ordering::SeqCst);
        Ok(self
            .users
            .iter()
            .map(|(name, owner)| Made::new(MadeKind::Principal, "s", *name).owned_by(*owner))
            .collect())
    }
}

/// A family answering each snapshot in turn from `answers` (the last one
/// repeats).
struct Family {
    answers: Mutex<Vec<Result<Snapshot, String>>>,
}

#[async_trait]
impl SweepSource for Family {
    fn family(&self) -> &'static str {
        "fake"
    }
    async fn snapshot(&self) -> Result<Snapshot, String> {
        let mut answers = self.answers.lock().expect("lock");
        if answers.len() > 1 {
            answers.remove(0)
        } else {
            answers[0].clone()
        }
    }
}

fn seeing(owners: &[&str]) -> Result<Snapshot, String> {
    Ok(Snapshot {
        classes: vec![SweepClass {
            kind: "StorageClass".into(),
            name: "c".into(),
            parameters: BTreeMap::new(),
        }],
        owners: owners.iter().map(|o| (*o).to_owned()).collect(),
    })
}

fn runtime() -> Runtime {
    Runtime::standalone(Duration::from_secs(5), Arc::new(Metrics::new()))
}

#[tokio::test]
async fn a_family_that_cannot_see_stops_the_round_before_the_store_is_asked() {
    let store = Store::default();
    let ok = Arc::new(Family {
        answers: Mutex::new(vec![seeing(&[])]),
    });
    let blind = Arc::new(Family {
        answers: Mutex::new(vec![Err("the caches have not listed yet".into())]),
    });
    let sources: Vec<Arc<dyn SweepSource>> = vec![ok, blind];
    let got = observe(
        &runtime(),
        &store,
        &sources,
        &Sightings::new(),
        Duration::ZERO,
    )
    .await;
    let why = got.expect_err("no plan without every family");
    assert!(
        why.contains("fake: the caches have not listed yet"),
        "{why}"
    );
    assert_eq!(store.listed.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn an_owner_seen_only_after_the_listing_still_counts() {
    let store = Store {
        users: vec![("u-new", "new"), ("u-gone", "gone")],
        ..Store::default()
    };
    let family = Arc::new(Family {
        answers: Mutex::new(vec![seeing(&[]), seeing(&["new"])]),
    });
    let sources: Vec<Arc<dyn SweepSource>> = vec![family];
    let plan = observe(
        &runtime(),
        &store,
        &sources,
        &Sightings::new(),
        Duration::ZERO,
    )
    .await
    .expect("plan");
    let decisions: BTreeMap<_, _> = plan
        .items
        .iter()
        .map(|i| (i.made.name.as_str(), i.decision.clone()))
        .collect();
    assert_eq!(decisions["u-new"], Decision::Owned);
    assert!(matches!(decisions["u-gone"], Decision::Waiting { .. }));

    let metrics = Metrics::new();
    metrics.swept(&plan);
    let text = metrics.render();
    assert!(
        text.contains(r#"obc_store_orphans{store="s",kind="principal"} 1"#),
        "{text}"
    );
    assert!(
        text.contains(r#"obc_sweep_class_swept{class="StorageClass c"} 1"#),
        "{text}"
    );
}
