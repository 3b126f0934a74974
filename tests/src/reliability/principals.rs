//! Store users without a live owner, counted the test's own way: list the
//! store's users (MinIO admin API), list every live ObjectBucketClaim and
//! BucketAccess from the apiserver, and keep the users whose name derives
//! from none of their UIDs. Independent of the library's sweep, which it
//! checks.

use std::collections::BTreeSet;

use anyhow::Result;
use kube::api::{Api, DynamicObject, ListParams};
use kube::{Client, ResourceExt};
use lib_provisioner::api::ObjectBucketClaim;
use sample_provisioner::admin::AdminClient;
use sample_provisioner::credentials::per_principal::principal_user_name;
use sample_provisioner::credentials::{rotated_user_name, user_name};

use crate::cosi_e2e::Kind;

/// The users of the store `admin` reaches (its root key `root` excepted)
/// that no live claim or BucketAccess owns. A cluster without the COSI CRDs
/// has no BucketAccesses.
pub async fn ownerless_users(
    client: &Client,
    admin: &AdminClient,
    root: &str,
) -> Result<Vec<String>> {
    let mut owned = BTreeSet::new();
    let claims = Api::<ObjectBucketClaim>::all(client.clone())
        .list(&ListParams::default())
        .await?;
    for uid in claims.iter().filter_map(|c| c.uid()) {
        owned.insert(user_name(&uid));
        owned.insert(rotated_user_name(&uid));
    }
    let all_accesses =
        Api::<DynamicObject>::all_with(client.clone(), &Kind::BucketAccess.resource());
    if let Ok(accesses) = all_accesses.list(&ListParams::default()).await {
        for uid in accesses.iter().filter_map(|a| a.uid()) {
            owned.insert(principal_user_name(&uid));
            // What earlier versions' gRPC path named after the account.
            owned.insert(principal_user_name(&format!("ba-{uid}")));
        }
    }
    Ok(admin
        .list_users()
        .await?
        .into_keys()
        .filter(|u| u != root && !owned.contains(u))
        .collect())
}
