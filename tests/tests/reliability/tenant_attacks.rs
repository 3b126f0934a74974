//! Tenant attacks: what a claim's owner controls (the claim's spec,
//! annotations and labels, the Secret and ConfigMap in their namespace, the
//! timing of their edits) is used to reach another tenant's bucket, key or
//! data. Every test counts its attacks and what they reached in the
//! [`Summary`](obc_tests::reliability::Summary) (`attacks`,
//! `foreign_buckets`, `foreign_revocations`, `data_lost`); each of the last
//! three must stay 0. The threat model they prove is `docs/security.md`.
//! `cosi` does the same through COSI's BucketClaims and BucketAccesses.

mod after_bind;
mod cosi;
mod provision;
mod store;

use anyhow::Result;
use obc_tests::reliability::{
    PROVISIONER, RUSTFS_ADMIN_SECRET, SYSTEM_NAMESPACE, create_class, register_secret,
};
use obc_tests::rustfs::RustFs;
use obc_tests::setup::create_admin_secret;

use super::Suite;

/// A class `name` of the sample on `store` (per-claim credentials,
/// ownership tags, forceDelete): the one a tenant may use. Returns the
/// store's endpoint.
async fn rustfs_class(suite: &Suite, store: &RustFs, name: &str) -> Result<String> {
    let (key, secret) = store.root_credentials();
    register_secret(&secret);
    create_admin_secret(
        &suite.admin,
        SYSTEM_NAMESPACE,
        RUSTFS_ADMIN_SECRET,
        &key,
        &secret,
    )
    .await?;
    let endpoint = store.endpoint().trim_end_matches('/').to_owned();
    let params = [
        ("endpoint", endpoint.as_str()),
        ("adminSecretName", RUSTFS_ADMIN_SECRET),
        ("adminSecretNamespace", SYSTEM_NAMESPACE),
        ("forceDelete", "true"),
    ];
    create_class(&suite.admin, name, PROVISIONER, "Delete", params).await?;
    Ok(endpoint)
}
