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

mod cache;
mod client;
pub mod crypto;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use self::cache::AdminClients;
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
