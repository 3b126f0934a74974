//! A client for MinIO's admin API (`/minio/admin/v3`), as far as a bucket
//! provisioner needs it: users, canned policies and their attachment, and
//! bucket quotas. Stores that implement the API (MinIO, RustFS) then give
//! each claim its own credentials.
//!
//! Requests are signed with SigV4 by the AWS SDK's own signer
//! (`aws-sigv4`); secrets in request and response bodies travel in the
//! admin API's encrypted payload format ([`crypto`]).
//!
//! # Example
//!
//! ```no_run
//! # async fn demo() -> Result<(), sample_provisioner::admin::AdminError> {
//! use lib_provisioner::Credentials;
//! use sample_provisioner::admin::AdminClient;
//!
//! let admin = AdminClient::new("http://127.0.0.1:9000", "us-east-1", Credentials::new("root", "secret"))?;
//! admin.add_canned_policy("only-b", &serde_json::json!({
//!     "Version": "2012-10-17",
//!     "Statement": [{"Effect": "Allow", "Action": ["s3:*"], "Resource": ["arn:aws:s3:::b/*"]}],
//! })).await?;
//! admin.add_user("user-b", "a-long-random-secret").await?;
//! admin.set_user_policy("user-b", "only-b").await?;
//! # Ok(()) }
//! ```

mod client;
pub mod crypto;

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use lib_provisioner::Credentials;
use serde::{Deserialize, Serialize};

pub use self::client::{AdminClient, AdminError};

/// A user as the admin API reports it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct UserInfo {
    /// Canned policies attached, comma-separated (empty if none).
    #[serde(rename = "policyName", default)]
    pub policy_name: String,
    /// `enabled` or `disabled`.
    #[serde(default)]
    pub status: String,
}

impl UserInfo {
    /// The attached policy names.
    pub fn policies(&self) -> impl Iterator<Item = &str> {
        self.policy_name
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
    }
}

/// The users of a store, by access key.
pub type Users = BTreeMap<String, UserInfo>;

/// A bucket's quota.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BucketQuota {
    /// Hard limit on the bucket's size in bytes; 0: none.
    #[serde(default)]
    pub quota: u64,
    /// `hard` (the only kind MinIO still has).
    #[serde(rename = "quotatype", default = "hard")]
    pub kind: QuotaKind,
}

/// How a quota is enforced.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum QuotaKind {
    /// Writes beyond the limit are refused.
    #[default]
    #[serde(rename = "hard")]
    Hard,
}

fn hard() -> QuotaKind {
    QuotaKind::Hard
}

impl BucketQuota {
    /// A hard limit of `bytes` (0 clears the quota).
    pub fn hard(bytes: u64) -> Self {
        Self {
            quota: bytes,
            kind: QuotaKind::Hard,
        }
    }
}

/// Admin clients kept for reuse, one per endpoint, region and admin key
/// pair; past [`AdminClients::MAX`] the cache starts over (rotated keys).
#[derive(Debug, Default)]
pub struct AdminClients {
    clients: Mutex<HashMap<ClientKey, AdminClient>>,
}

/// What a client is built from. Holds a secret: `Debug` shows the endpoint
/// only.
#[derive(Clone, PartialEq, Eq, Hash)]
struct ClientKey(String, String, String, String);

impl std::fmt::Debug for ClientKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("ClientKey")
            .field(&self.0)
            .finish_non_exhaustive()
    }
}

impl AdminClients {
    /// Clients kept at most.
    pub const MAX: usize = 64;

    /// The client for `endpoint` and `region` with `credentials`.
    pub fn get(
        &self,
        endpoint: &str,
        region: &str,
        credentials: &Credentials,
    ) -> Result<AdminClient, AdminError> {
        let key = ClientKey(
            endpoint.to_owned(),
            region.to_owned(),
            credentials.access_key_id.clone(),
            credentials.secret_access_key.clone(),
        );
        // A poisoned lock only means another thread panicked mid-insert.
        let mut clients = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(client) = clients.get(&key) {
            return Ok(client.clone());
        }
        if clients.len() >= Self::MAX {
            clients.clear();
        }
        let client = AdminClient::new(endpoint, region, credentials.clone())?;
        clients.insert(key, client.clone());
        Ok(client)
    }
}
