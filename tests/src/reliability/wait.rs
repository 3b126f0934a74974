//! Waiting for the cluster: until it agrees with the store ([`converge`]),
//! until claims are Bound ([`wait_all_bound`]) or gone ([`wait_all_gone`]).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};
use lib_provisioner::api::{ClaimPhase, ObjectBucketClaim};

use super::agreement::{Agreement, Expectations, agreement};
use crate::testenv::TestEnv;

/// Polls [`agreement`] until it holds or `timeout` passes, and returns the
/// last reading (check [`Agreement::ok`], or use
/// [`Summary::check`](super::Summary::check)).
pub async fn converge(
    env: &TestEnv,
    client: &Client,
    x: &Expectations,
    timeout: Duration,
) -> Result<Agreement> {
    let deadline = Instant::now() + timeout;
    loop {
        match agreement(env, client, x).await {
            Ok(a) if a.ok() || Instant::now() >= deadline => return Ok(a),
            Err(e) if Instant::now() >= deadline => return Err(e),
            _ => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
}

/// Waits until every claim in `ns` named in `names` is Bound.
pub async fn wait_all_bound(
    client: &Client,
    ns: &str,
    names: &[String],
    timeout: Duration,
) -> Result<()> {
    let api: Api<ObjectBucketClaim> = Api::namespaced(client.clone(), ns);
    let wanted: BTreeSet<&String> = names.iter().collect();
    let deadline = Instant::now() + timeout;
    loop {
        let list = api.list(&ListParams::default()).await;
        if let Ok(list) = &list {
            let pending: Vec<String> = list
                .items
                .iter()
                .filter(|c| wanted.contains(&c.name_any()))
                .filter(|c| c.status.as_ref().and_then(|s| s.phase) != Some(ClaimPhase::Bound))
                .map(|c| {
                    format!(
                        "{} ({:?}: {})",
                        c.name_any(),
                        c.status.as_ref().and_then(|s| s.phase),
                        c.status
                            .as_ref()
                            .and_then(|s| s.message.clone())
                            .unwrap_or_default()
                    )
                })
                .collect();
            let present = list
                .items
                .iter()
                .filter(|c| wanted.contains(&c.name_any()))
                .count();
            if pending.is_empty() && present == wanted.len() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                bail!(
                    "{} of {} claims in {ns} not Bound after {timeout:?}: {pending:?}",
                    pending.len() + wanted.len() - present,
                    wanted.len()
                );
            }
        } else if Instant::now() >= deadline {
            bail!("listing claims in {ns}: {list:?}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits until none of `names` exists in `ns`.
pub async fn wait_all_gone(
    client: &Client,
    ns: &str,
    names: &[String],
    timeout: Duration,
) -> Result<()> {
    let api: Api<ObjectBucketClaim> = Api::namespaced(client.clone(), ns);
    let wanted: BTreeSet<&String> = names.iter().collect();
    let deadline = Instant::now() + timeout;
    loop {
        if let Ok(list) = api.list(&ListParams::default()).await {
            let left: Vec<String> = list
                .items
                .iter()
                .filter(|c| wanted.contains(&c.name_any()))
                .map(|c| {
                    format!(
                        "{} ({})",
                        c.name_any(),
                        c.status
                            .as_ref()
                            .and_then(|s| s.message.clone())
                            .unwrap_or_default()
                    )
                })
                .collect();
            if left.is_empty() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                bail!("claims in {ns} not gone after {timeout:?}: {left:?}");
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
