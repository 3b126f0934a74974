//! One leader-election Lease seen from a test: who holds it, and waiting
//! until a given replica does.

use std::time::Duration;

use anyhow::Result;
use k8s_openapi::api::coordination::v1::Lease;
use kube::{Api, Client};
use lib_provisioner::leader::LeaderElection;

/// The Lease a test's replicas compete for, with the lease duration they use.
#[derive(Clone, Copy, Debug)]
pub struct TestLease {
    /// The Lease's namespace.
    pub namespace: &'static str,
    /// The Lease's name.
    pub name: &'static str,
    /// The lease duration every replica is given.
    pub duration: Duration,
}

impl TestLease {
    /// The election a replica named `identity` runs for this Lease.
    pub fn election(&self, identity: &str) -> LeaderElection {
        LeaderElection::new(self.namespace, self.name, identity).with_lease_duration(self.duration)
    }

    /// The current holder's identity, if the Lease exists and names one.
    pub async fn holder(&self, client: &Client) -> Result<Option<String>> {
        let lease = Api::<Lease>::namespaced(client.clone(), self.namespace)
            .get_opt(self.name)
            .await?;
        Ok(lease.and_then(|l| l.spec?.holder_identity))
    }

    /// Waits (up to `timeout`) until `who` holds the Lease.
    pub async fn wait_holder(&self, client: &Client, who: &str, timeout: Duration) -> Result<()> {
        crate::wait_for(timeout, format!("{who} to hold the Lease"), || async {
            Ok((self.holder(client).await?.as_deref() == Some(who)).then_some(()))
        })
        .await
    }
}
