//! The signed HTTP calls of [`AdminClient`].

use std::fmt;
use std::time::{Duration, SystemTime};

use aws_sigv4::http_request::{
    PayloadChecksumKind, PercentEncodingMode, SignableBody, SignableRequest, SigningSettings,
    UriPathNormalizationMode, sign,
};
use aws_sigv4::sign::v4;
use lib_provisioner::Credentials;
use reqwest::Method;
use serde::de::DeserializeOwned;

use super::crypto::{self, PayloadError};
use super::{BucketQuota, UserInfo, Users};

/// The admin API's path prefix.
const PREFIX: &str = "/minio/admin/v3";

/// Why an admin call failed. [`AdminError::is_retryable`] tells whether
/// trying again may help.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    /// The endpoint is not a URL the client can use.
    #[error("admin endpoint {endpoint:?} is not usable: {detail}")]
    Endpoint {
        /// The endpoint given.
        endpoint: String,
        /// What is wrong with it.
        detail: String,
    },
    /// No answer: connection refused, timeout, TLS.
    #[error("admin API call {operation} could not reach the store: {detail}")]
    Transport {
        /// The admin operation (`add-user`...).
        operation: &'static str,
        /// The transport error.
        detail: String,
    },
    /// The store answered with an error.
    #[error("admin API call {operation} failed with HTTP {status}{}: {message}", code.as_deref().map(|c| format!(" {c}")).unwrap_or_default())]
    Service {
        /// The admin operation.
        operation: &'static str,
        /// HTTP status.
        status: u16,
        /// The error code (`XMinioAdminNoSuchUser`, `AccessDenied`...).
        code: Option<String>,
        /// The store's message.
        message: String,
    },
    /// An encrypted body could not be produced or read.
    #[error("admin API call {operation}: {source}")]
    Payload {
        /// The admin operation.
        operation: &'static str,
        /// What failed.
        #[source]
        source: PayloadError,
    },
    /// A response body was not what the API documents.
    #[error("admin API call {operation} returned a body that is not the expected JSON: {detail}")]
    Decode {
        /// The admin operation.
        operation: &'static str,
        /// The parse error.
        detail: String,
    },
    /// The request could not be signed.
    #[error("admin API call {operation} could not be signed: {detail}")]
    Signing {
        /// The admin operation.
        operation: &'static str,
        /// The signer's error.
        detail: String,
    },
}

impl AdminError {
    /// Whether a later attempt may succeed: no answer, 5xx, throttling.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Transport { .. } => true,
            Self::Service { status, .. } => *status >= 500 || *status == 429,
            _ => false,
        }
    }

    /// Whether the store said the named thing does not exist.
    pub fn is_not_found(&self) -> bool {
        match self {
            Self::Service { status, code, .. } => {
                *status == 404
                    || code.as_deref().is_some_and(|c| {
                        c.starts_with("XMinioAdminNoSuch") || c.starts_with("NoSuch")
                    })
            }
            _ => false,
        }
    }

    /// Whether the admin credentials were refused (wrong key or secret, or
    /// not an admin).
    pub fn is_denied(&self) -> bool {
        matches!(
            self,
            Self::Service {
                status: 401 | 403,
                ..
            }
        )
    }
}

/// A client for one store's admin API, with the admin's credentials.
#[derive(Clone)]
pub struct AdminClient {
    http: reqwest::Client,
    endpoint: String,
    region: String,
    credentials: Credentials,
}

impl fmt::Debug for AdminClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdminClient")
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("credentials", &self.credentials)
            .finish_non_exhaustive()
    }
}

impl AdminClient {
    /// A client for the store at `endpoint` (`http(s)://host:port`),
    /// signing for `region` with the admin `credentials`.
    pub fn new(endpoint: &str, region: &str, credentials: Credentials) -> Result<Self, AdminError> {
        let bad = |detail: String| AdminError::Endpoint {
            endpoint: endpoint.to_owned(),
            detail,
        };
        let url = url::Url::parse(endpoint).map_err(|e| bad(e.to_string()))?;
        if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
            return Err(bad("expected http(s)://host[:port]".into()));
        }
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(60))
            .build()
            .map_err(|e| bad(e.to_string()))?;
        Ok(Self {
            http,
            endpoint: endpoint.trim_end_matches('/').to_owned(),
            region: region.to_owned(),
            credentials,
        })
    }

    /// Creates user `access_key` with `secret_key`, enabled; an existing
    /// user gets the new secret (so repeating the call is safe).
    pub async fn add_user(&self, access_key: &str, secret_key: &str) -> Result<(), AdminError> {
        const OP: &str = "add-user";
        let body = serde_json::json!({ "secretKey": secret_key, "status": "enabled" });
        let sealed = self.seal(OP, &body)?;
        self.call(OP, Method::PUT, &[("accessKey", access_key)], sealed)
            .await
            .map(drop)
    }

    /// Deletes user `access_key`. `Ok(false)`: there was none.
    pub async fn remove_user(&self, access_key: &str) -> Result<bool, AdminError> {
        let query = [("accessKey", access_key)];
        present(
            self.call("remove-user", Method::DELETE, &query, vec![])
                .await,
        )
    }

    /// The user `access_key`, if it exists.
    pub async fn user_info(&self, access_key: &str) -> Result<Option<UserInfo>, AdminError> {
        const OP: &str = "user-info";
        match self
            .call(OP, Method::GET, &[("accessKey", access_key)], vec![])
            .await
        {
            Ok(body) => decode(OP, &body).map(Some),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// All users (the response is encrypted with the admin secret).
    pub async fn list_users(&self) -> Result<Users, AdminError> {
        const OP: &str = "list-users";
        let sealed = self.call(OP, Method::GET, &[], vec![]).await?;
        let plain =
            crypto::decrypt(&self.credentials.secret_access_key, &sealed).map_err(|source| {
                AdminError::Payload {
                    operation: OP,
                    source,
                }
            })?;
        decode(OP, &plain)
    }

    /// Creates or replaces canned policy `name`.
    pub async fn add_canned_policy(
        &self,
        name: &str,
        policy: &serde_json::Value,
    ) -> Result<(), AdminError> {
        let body = policy.to_string().into_bytes();
        self.call("add-canned-policy", Method::PUT, &[("name", name)], body)
            .await
            .map(drop)
    }

    /// Deletes canned policy `name`. `Ok(false)`: the store said there was
    /// none (RustFS answers success either way).
    pub async fn remove_canned_policy(&self, name: &str) -> Result<bool, AdminError> {
        let query = [("name", name)];
        present(
            self.call("remove-canned-policy", Method::DELETE, &query, vec![])
                .await,
        )
    }

    /// The names of all canned policies.
    pub async fn list_canned_policies(&self) -> Result<Vec<String>, AdminError> {
        const OP: &str = "list-canned-policies";
        let body = self.call(OP, Method::GET, &[], vec![]).await?;
        let map: serde_json::Map<String, serde_json::Value> = decode(OP, &body)?;
        Ok(map.into_iter().map(|(name, _)| name).collect())
    }

    /// Makes canned policy `policy` the one attached to user `access_key`
    /// (replacing any other; repeating it is a no-op).
    pub async fn set_user_policy(&self, access_key: &str, policy: &str) -> Result<(), AdminError> {
        let query = [
            ("policyName", policy),
            ("userOrGroup", access_key),
            ("isGroup", "false"),
        ];
        self.call("set-user-or-group-policy", Method::PUT, &query, vec![])
            .await
            .map(drop)
    }

    /// Sets `bucket`'s quota (a quota of 0 bytes removes it).
    pub async fn set_bucket_quota(
        &self,
        bucket: &str,
        quota: &BucketQuota,
    ) -> Result<(), AdminError> {
        const OP: &str = "set-bucket-quota";
        let body = serde_json::to_vec(quota).map_err(|e| AdminError::Decode {
            operation: OP,
            detail: e.to_string(),
        })?;
        self.call(OP, Method::PUT, &[("bucket", bucket)], body)
            .await
            .map(drop)
    }

    /// `bucket`'s quota (0 bytes: none).
    pub async fn bucket_quota(&self, bucket: &str) -> Result<BucketQuota, AdminError> {
        const OP: &str = "get-bucket-quota";
        let body = self
            .call(OP, Method::GET, &[("bucket", bucket)], vec![])
            .await?;
        if body.iter().all(u8::is_ascii_whitespace) {
            return Ok(BucketQuota::default());
        }
        decode(OP, &body)
    }

    fn seal(
        &self,
        operation: &'static str,
        body: &serde_json::Value,
    ) -> Result<Vec<u8>, AdminError> {
        crypto::encrypt(
            &self.credentials.secret_access_key,
            body.to_string().as_bytes(),
        )
        .map_err(|source| AdminError::Payload { operation, source })
    }

    /// One signed request; the body of a 2xx answer.
    async fn call(
        &self,
        operation: &'static str,
        method: Method,
        query: &[(&str, &str)],
        body: Vec<u8>,
    ) -> Result<Vec<u8>, AdminError> {
        let url = self.url(operation, query);
        let headers = self.sign(operation, &method, &url, &body)?;
        let mut request = self.http.request(method, &url).body(body);
        for (name, value) in headers {
            request = request.header(name, value);
        }
        let transport = |e: reqwest::Error| AdminError::Transport {
            operation,
            detail: error_chain(&e),
        };
        let response = request.send().await.map_err(transport)?;
        let status = response.status().as_u16();
        let body = response.bytes().await.map_err(transport)?.to_vec();
        if (200..300).contains(&status) {
            Ok(body)
        } else {
            Err(service_error(operation, status, &body))
        }
    }

    fn url(&self, operation: &str, query: &[(&str, &str)]) -> String {
        let mut url = format!("{}{PREFIX}/{operation}", self.endpoint);
        for (i, (key, value)) in query.iter().enumerate() {
            url.push(if i == 0 { '?' } else { '&' });
            url.push_str(&encode(key));
            url.push('=');
            url.push_str(&encode(value));
        }
        url
    }

    /// The SigV4 headers for the request (service `s3`, payload hashed).
    fn sign(
        &self,
        operation: &'static str,
        method: &Method,
        url: &str,
        body: &[u8],
    ) -> Result<Vec<(String, String)>, AdminError> {
        let failed = |detail: String| AdminError::Signing { operation, detail };
        let identity = aws_credential_types::Credentials::new(
            &self.credentials.access_key_id,
            &self.credentials.secret_access_key,
            None,
            None,
            "storageclass-admin-secret",
        )
        .into();
        let mut settings = SigningSettings::default();
        settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
        settings.percent_encoding_mode = PercentEncodingMode::Single;
        settings.uri_path_normalization_mode = UriPathNormalizationMode::Disabled;
        let params = v4::SigningParams::builder()
            .identity(&identity)
            .region(&self.region)
            .name("s3")
            .time(SystemTime::now())
            .settings(settings)
            .build()
            .map_err(|e| failed(e.to_string()))?
            .into();
        let signable = SignableRequest::new(
            method.as_str(),
            url,
            std::iter::empty(),
            SignableBody::Bytes(body),
        )
        .map_err(|e| failed(e.to_string()))?;
        let (instructions, _) = sign(signable, &params)
            .map_err(|e| failed(e.to_string()))?
            .into_parts();
        Ok(instructions
            .headers()
            .map(|(name, value)| (name.to_owned(), value.to_owned()))
            .collect())
    }
}

/// `Ok(true)` for success, `Ok(false)` when the store said "no such".
fn present(result: Result<Vec<u8>, AdminError>) -> Result<bool, AdminError> {
    match result {
        Ok(_) => Ok(true),
        Err(e) if e.is_not_found() => Ok(false),
        Err(e) => Err(e),
    }
}

fn decode<T: DeserializeOwned>(operation: &'static str, body: &[u8]) -> Result<T, AdminError> {
    serde_json::from_slice(body).map_err(|e| AdminError::Decode {
        operation,
        detail: e.to_string(),
    })
}

/// Reads an error answer: MinIO sends JSON (`{"Code", "Message"}`), S3-style
/// stores XML (`<Code>`, `<Message>`).
fn service_error(operation: &'static str, status: u16, body: &[u8]) -> AdminError {
    let text = String::from_utf8_lossy(body);
    let (code, message) = match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(json) => (
            json.get("Code").and_then(|c| c.as_str()).map(str::to_owned),
            json.get("Message")
                .and_then(|m| m.as_str())
                .map(str::to_owned),
        ),
        Err(_) => (xml_element(&text, "Code"), xml_element(&text, "Message")),
    };
    let message = message.unwrap_or_else(|| {
        let trimmed = text.trim();
        if trimmed.is_empty() {
            "(no message)".to_owned()
        } else {
            trimmed.chars().take(300).collect()
        }
    });
    AdminError::Service {
        operation,
        status,
        code,
        message,
    }
}

fn xml_element(text: &str, name: &str) -> Option<String> {
    let open = format!("<{name}>");
    let start = text.find(&open)? + open.len();
    let len = text[start..].find(&format!("</{name}>"))?;
    Some(text[start..start + len].to_owned())
}

/// Percent-encodes a query component (RFC 3986 unreserved kept), as SigV4
/// canonicalises it.
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_read_from_json_and_xml() {
        let json =
            br#"{"Code":"XMinioAdminNoSuchUser","Message":"The specified user does not exist."}"#;
        let e = service_error("remove-user", 404, json);
        assert!(e.is_not_found() && !e.is_retryable());
        assert!(e.to_string().contains("XMinioAdminNoSuchUser"), "{e}");
        let xml = b"<?xml version=\"1.0\"?><Error><Code>AccessDenied</Code><Message>Access Denied.</Message></Error>";
        let e = service_error("add-user", 403, xml);
        assert!(e.is_denied() && !e.is_not_found());
        assert_eq!(
            e.to_string(),
            "admin API call add-user failed with HTTP 403 AccessDenied: Access Denied."
        );
        assert!(service_error("list-users", 503, b"").is_retryable());
    }

    #[test]
    fn queries_are_encoded_as_sigv4_expects() {
        let client = AdminClient::new(
            "http://127.0.0.1:9000/",
            "us-east-1",
            Credentials::new("a", "b"),
        )
        .expect("valid");
        assert_eq!(
            client.url("add-user", &[("accessKey", "obc a/b"), ("x", "~")]),
            "http://127.0.0.1:9000/minio/admin/v3/add-user?accessKey=obc%20a%2Fb&x=~"
        );
        assert!(AdminClient::new("ftp://h", "r", Credentials::new("a", "b")).is_err());
        let debug = format!("{client:?}");
        assert!(!debug.contains("\"b\""), "{debug}");
    }
}
