//! [`BucketAccess`]: what a provisioner returns, the endpoint and credentials.

use std::collections::BTreeMap;
use std::fmt;

use super::Endpoint;

/// Access to a bucket: where it is and the credentials for it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct BucketAccess {
    /// Connection details; `bucket_name` is filled in by the library.
    pub endpoint: Endpoint,
    /// Credentials, written only into the claim's Secret.
    pub credentials: Credentials,
    /// State the provisioner needs at teardown (stored in the ObjectBucket,
    /// which is readable cluster-wide: never put secrets here).
    pub additional_state: BTreeMap<String, String>,
}

impl BucketAccess {
    /// Access at `host:port` with the given credentials.
    ///
    /// ```
    /// use lib_provisioner::provisioner::{BucketAccess, Credentials};
    /// let access = BucketAccess::new("s3.local", 9000, Credentials::new("id", "secret"))
    ///     .with_region("eu-west-1");
    /// assert_eq!(access.endpoint.region, "eu-west-1");
    /// ```
    pub fn new(host: impl Into<String>, port: i32, credentials: Credentials) -> Self {
        Self {
            endpoint: Endpoint {
                bucket_host: host.into(),
                bucket_port: port,
                ..Default::default()
            },
            credentials,
            additional_state: BTreeMap::new(),
        }
    }

    /// Sets the region.
    pub fn with_region(mut self, region: impl Into<String>) -> Self {
        self.endpoint.region = region.into();
        self
    }

    /// Adds teardown state.
    pub fn with_state(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.additional_state.insert(key.into(), value.into());
        self
    }
}

/// An access key pair. Its `Debug` output never shows the secret.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Credentials {
    /// The access key id.
    pub access_key_id: String,
    /// The secret access key.
    pub secret_access_key: String,
}

impl Credentials {
    /// A key pair.
    pub fn new(access_key_id: impl Into<String>, secret_access_key: impl Into<String>) -> Self {
        Self {
            access_key_id: access_key_id.into(),
            secret_access_key: secret_access_key.into(),
        }
    }
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &"<redacted>")
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_the_secret() {
        let c = Credentials::new("AKID", "very-secret-value");
        let shown = format!("{c:?} {:?}", BucketAccess::new("h", 1, c.clone()));
        assert!(shown.contains("AKID"));
        assert!(!shown.contains("very-secret-value"), "{shown}");
    }
}
