//! The kit's probe for the test stores: the library's ready
//! [`S3Probe`](lib_provisioner::conformance::S3Probe) (real S3 requests as
//! the store's root), plus, on RustFS, its MinIO admin API for what S3
//! cannot say: the users and policies on the store, and a bucket's quota.

use std::collections::BTreeMap;

use async_trait::async_trait;
use lib_provisioner::Credentials;
use lib_provisioner::conformance::{ConfigReader, PrincipalLister, ProbeError, S3Probe};
use lib_provisioner::provisioner::{Made, MadeKind};
use obc_tests::testenv::S3_REGION;
use sample_provisioner::admin::AdminClient;

/// The probe of the store at `endpoint` with its root key; with the admin
/// API (`admin_api`), principals are listed and quotas read back.
pub fn s3_probe(endpoint: &str, root: &Credentials, own: &str, admin_api: bool) -> S3Probe {
    let probe = S3Probe::new(
        endpoint,
        root.clone(),
        sample_provisioner::http::s3_http_client(),
    )
    .ignore_bucket(own);
    if !admin_api {
        return probe;
    }
    let admin = AdminClient::new(endpoint, S3_REGION, root.clone()).unwrap();
    probe
        .with_lister(Admin {
            admin: admin.clone(),
            store: endpoint.to_owned(),
        })
        .with_config_reader(Admin {
            admin,
            store: endpoint.to_owned(),
        })
}

/// The store's admin API, as the kit's eyes.
struct Admin {
    admin: AdminClient,
    store: String,
}

fn failed(what: &str, e: impl std::fmt::Display) -> ProbeError {
    ProbeError::new(format!("admin API {what}: {e}"))
}

#[async_trait]
impl PrincipalLister for Admin {
    async fn list(&self) -> Result<Vec<Made>, ProbeError> {
        let users = self
            .admin
            .list_users()
            .await
            .map_err(|e| failed("list users", e))?;
        let policies = self
            .admin
            .list_canned_policies()
            .await
            .map_err(|e| failed("list policies", e))?;
        let principals = users
            .into_keys()
            .map(|u| Made::new(MadeKind::Principal, &self.store, u));
        let policies = policies
            .into_iter()
            .map(|p| Made::new(MadeKind::Policy, &self.store, p));
        Ok(principals.chain(policies).collect())
    }
}

/// `64Mi` as bytes (the sample's `maxSize` units).
fn bytes(size: &str) -> Option<u64> {
    let units = [("Ki", 1u64 << 10), ("Mi", 1 << 20), ("Gi", 1 << 30)];
    for (suffix, unit) in units {
        if let Some(n) = size.strip_suffix(suffix) {
            return n.parse::<u64>().ok().map(|n| n * unit);
        }
    }
    size.parse().ok()
}

#[async_trait]
impl ConfigReader for Admin {
    async fn applied(
        &self,
        bucket: &str,
        config: &BTreeMap<String, String>,
    ) -> Result<Option<bool>, ProbeError> {
        let Some(want) = config.get("maxSize").and_then(|s| bytes(s)) else {
            return Ok(None);
        };
        let quota = self
            .admin
            .bucket_quota(bucket)
            .await
            .map_err(|e| failed("bucket quota", e))?;
        Ok(Some(quota.quota == want))
    }
}
