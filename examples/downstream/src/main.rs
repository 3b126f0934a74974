//! A downstream provisioner: chooses its backend at run time and runs the
//! library's controller with it.
//!
//! `BACKEND=refuse` serves claims with a backend that refuses every bucket
//! (each claim shows why); anything else serves them from memory.

use std::time::Duration;

use async_trait::async_trait;
use lib_provisioner::provisioner::{
    BucketAccess, BucketRequest, ProvisionError, Provisioner, TeardownRequest,
};
use lib_provisioner::{ControllerBuilder, RunError};

mod memory;
use memory::Memory;

/// Refuses every bucket, saying why.
struct Refuse;

#[async_trait]
impl Provisioner for Refuse {
    async fn provision(&self, req: &BucketRequest) -> Result<BucketAccess, ProvisionError> {
        Err(ProvisionError::permanent(format!(
            "claim {} asks for bucket {}, but this backend creates none: use another StorageClass",
            req.claim, req.bucket_name
        ))
        .with_source(std::io::Error::other("read-only backend")))
    }
    async fn grant(&self, req: &BucketRequest) -> Result<BucketAccess, ProvisionError> {
        self.provision(req).await
    }
    async fn delete(&self, _: &TeardownRequest) -> Result<(), ProvisionError> {
        Ok(())
    }
    async fn revoke(&self, _: &TeardownRequest) -> Result<(), ProvisionError> {
        Ok(())
    }
}

fn backend(name: &str) -> Box<dyn Provisioner> {
    match name {
        "refuse" => Box::new(Refuse),
        _ => Box::new(Memory::default()),
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let client = kube::Client::try_default().await?;
    let provisioner = backend(&std::env::var("BACKEND").unwrap_or_default());
    let outcome = ControllerBuilder::new("example.com/downstream", provisioner)
        .provisioner_timeout(Duration::from_secs(20))
        .run(client, async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await;
    match outcome {
        Err(RunError::LostLease(why)) => {
            eprintln!("{why}: restarting as a standby");
            Ok(())
        }
        other => Ok(other?),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lib_provisioner::api::ReclaimPolicy;
    use lib_provisioner::provisioner::ClaimIdentity;

    #[tokio::test]
    async fn a_boxed_backend_serves_requests_built_with_the_public_constructors() {
        let claim = ClaimIdentity::new("shop", "photos", "uid-1").with_label("team", "web");
        let req = BucketRequest::new(claim.clone(), "photos-1", "memory")
            .with_reclaim_policy(ReclaimPolicy::Retain);
        let memory = backend("memory");
        let access = memory.provision(&req).await.expect("provisions");
        assert_eq!(access.credentials.access_key_id, "key-uid-1");
        assert_eq!(access.additional_state["reclaim"], "Retain");
        memory
            .delete(
                &TeardownRequest::new(claim, "photos-1", "memory")
                    .provisioned_as("obc-shop-photos"),
            )
            .await
            .expect("deletes");

        let err = backend("refuse")
            .provision(&req)
            .await
            .expect_err("refuses");
        assert!(!err.is_retryable());
        assert!(err.message().contains("shop/photos"), "{err}");
        assert!(std::error::Error::source(&err).is_some());
    }

    /// The conformance kit against the in-memory store: the provisioner,
    /// a probe of the store, and what the claims may ask for.
    #[tokio::test]
    async fn the_memory_backend_meets_the_contract() {
        use lib_provisioner::conformance::Kit;
        use std::collections::BTreeMap;

        let store = Memory::default();
        let probe = memory::probe::MemoryProbe(store.0.clone());
        let report = Kit::new(store, probe)
            .read_only_config(BTreeMap::from([("accessMode".into(), "read-only".into())]))
            .update_config(BTreeMap::from([("maxSize".into(), "1Gi".into())]))
            .run()
            .await;
        println!("{report}");
        assert!(report.passed(), "{report}");
    }

    /// The kit on variants of the in-memory store: a correct one passes,
    /// each flaw fails the scenario meant to catch it, naming the break.
    #[tokio::test]
    async fn the_kit_fails_each_flawed_variant_and_passes_the_correct_one() {
        use lib_provisioner::conformance::{Kit, Outcome, Scenario};
        use memory::variants::{Variant, Varied};
        use std::collections::BTreeMap;

        let kit = |variant: Variant, scenario: Scenario| {
            let store = Memory::default();
            let probe = memory::probe::MemoryProbe(store.0.clone());
            Kit::new(Varied(store, variant), probe)
                .read_only_config(BTreeMap::from([("accessMode".into(), "read-only".into())]))
                .update_config(BTreeMap::from([("maxSize".into(), "1Gi".into())]))
                .only([scenario])
        };
        for scenario in [Scenario::RotateRepeat, Scenario::RotateAbandoned] {
            let report = kit(Variant::RevokePreviousKeyOnly, scenario).run().await;
            assert!(report.passed(), "{report}");
        }
        let flaws = [
            (
                Variant::MintsKeyOnRepeat,
                Scenario::ProvisionRepeat,
                "principal key-",
            ),
            (
                Variant::RevokeKeepsKey,
                Scenario::TeardownRetain,
                "after they were revoked",
            ),
            (
                Variant::UpdateDoesNothing,
                Scenario::UpdateRepeat,
                "the store does not apply",
            ),
            (
                Variant::ReadOnlyWrites,
                Scenario::ScopeReadOnly,
                "can write bucket",
            ),
        ];
        for (variant, scenario, says) in flaws {
            let report = kit(variant, scenario)
                .revocation_grace(std::time::Duration::ZERO)
                .run()
                .await;
            let result = report.scenario(scenario).expect("ran");
            assert_eq!(result.outcome, Outcome::Failed, "{variant:?}:\n{report}");
            assert!(result.detail.contains(says), "{variant:?}:\n{report}");
        }
    }
}
