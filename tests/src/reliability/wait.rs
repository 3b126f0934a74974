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
    wait_claims(client, ns, names, timeout, "Bound", |claims, wanted| {
        let pending = claims
            .iter()
            .filter(|c| c.status.as_ref().and_then(|s| s.phase) != Some(ClaimPhase::Bound))
            .map(|c| {
                let phase = c.status.as_ref().and_then(|s| s.phase);
                format!("{} ({phase:?}: {})", c.name_any(), message(c))
            });
        let missing = wanted
            .iter()
            .filter(|n| claims.iter().all(|c| c.name_any() != n.as_str()))
            .map(|n| format!("{n} (absent)"));
        pending.chain(missing).collect()
    })
    .await
}

/// Waits until none of `names` exists in `ns`.
pub async fn wait_all_gone(
    client: &Client,
    ns: &str,
    names: &[String],
    timeout: Duration,
) -> Result<()> {
    wait_claims(client, ns, names, timeout, "gone", |claims, _| {
        claims
            .iter()
            .map(|c| format!("{} ({})", c.name_any(), message(c)))
            .collect()
    })
    .await
}

/// Lists the claims of `ns` every 200 ms until `not_yet` (given the claims
/// named in `names` that exist, and those names) finds none that is not
/// yet `what`; fails with what it found once `timeout` passes, or with the
/// list's error if listing still fails then.
async fn wait_claims(
    client: &Client,
    ns: &str,
    names: &[String],
    timeout: Duration,
    what: &str,
    not_yet: impl Fn(&[ObjectBucketClaim], &BTreeSet<&String>) -> Vec<String>,
) -> Result<()> {
    let api: Api<ObjectBucketClaim> = Api::namespaced(client.clone(), ns);
    let wanted: BTreeSet<&String> = names.iter().collect();
    let deadline = Instant::now() + timeout;
    loop {
        let list = api.list(&ListParams::default()).await;
        if let Ok(list) = &list {
            let named: Vec<ObjectBucketClaim> = list
                .items
                .iter()
                .filter(|c| wanted.contains(&c.name_any()))
                .cloned()
                .collect();
            let left = not_yet(&named, &wanted);
            if left.is_empty() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                bail!(
                    "{} of {} claims in {ns} not {what} after {timeout:?}: {left:?}",
                    left.len(),
                    wanted.len()
                );
            }
        } else if Instant::now() >= deadline {
            bail!("listing claims in {ns}: {list:?}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn message(claim: &ObjectBucketClaim) -> String {
    claim
        .status
        .as_ref()
        .and_then(|s| s.message.clone())
        .unwrap_or_default()
}
