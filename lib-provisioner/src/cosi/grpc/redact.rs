//! `Debug` for the messages that carry secrets (their derived one is
//! switched off in generation): the secret never reaches a log.

use std::fmt;

use super::proto::{AzureCredentialInfo, GcsCredentialInfo, S3CredentialInfo};

const REDACTED: &str = "<redacted>";

impl fmt::Debug for S3CredentialInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("S3CredentialInfo")
            .field("access_key_id", &self.access_key_id)
            .field("access_secret_key", &REDACTED)
            .finish()
    }
}

impl fmt::Debug for AzureCredentialInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AzureCredentialInfo")
            .field("access_token", &REDACTED)
            .field("expiry_timestamp", &self.expiry_timestamp)
            .finish()
    }
}

impl fmt::Debug for GcsCredentialInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GcsCredentialInfo")
            .field("access_id", &self.access_id)
            .field("access_secret", &REDACTED)
            .field("private_key_name", &self.private_key_name)
            .field("service_account", &self.service_account)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::super::proto::{CredentialInfo, DriverGrantBucketAccessResponse};
    use super::*;

    #[test]
    fn debug_never_shows_a_secret() {
        let response = DriverGrantBucketAccessResponse {
            account_id: "ba-1".into(),
            credentials: Some(CredentialInfo {
                s3: Some(S3CredentialInfo {
                    access_key_id: "AKID".into(),
                    access_secret_key: "s3-secret-value".into(),
                }),
                azure: Some(AzureCredentialInfo {
                    access_token: "sas-token-value".into(),
                    expiry_timestamp: String::new(),
                }),
                gcs: Some(GcsCredentialInfo {
                    access_secret: "hmac-secret-value".into(),
                    ..Default::default()
                }),
            }),
            ..Default::default()
        };
        let shown = format!("{response:?}");
        assert!(shown.contains("AKID"), "{shown}");
        for secret in ["s3-secret-value", "sas-token-value", "hmac-secret-value"] {
            assert!(!shown.contains(secret), "{shown}");
        }
    }
}
