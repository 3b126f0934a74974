//! Turning object-store failures into [`ProvisionError`]s: retry what may
//! pass by itself, report the rest to the user with a hint.
//!
//! The rule: connection failures, timeouts, 5xx and throttling (429,
//! `SlowDown`) are retryable; any other 4xx that the caller did not handle
//! itself (404 on a bucket being deleted, say) is permanent.

use std::fmt;

use aws_sdk_s3::config::http::HttpResponse;
use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};
use lib_provisioner::ProvisionError;

/// What went wrong with one S3 call, reduced to what classification needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreFailure {
    /// The S3 operation (`CreateBucket`...).
    pub operation: &'static str,
    /// The bucket it was about.
    pub bucket: String,
    /// How the call failed.
    pub kind: FailureKind,
}

/// How an S3 call failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FailureKind {
    /// No response: connection refused, DNS, TLS, timeout.
    Transport(String),
    /// The request could not be built (a bad bucket name, say).
    Request(String),
    /// The store answered with an error.
    Service {
        /// HTTP status.
        status: u16,
        /// S3 error code, if the body carried one (`NoSuchBucket`...).
        code: Option<String>,
        /// S3 error message, if any.
        message: Option<String>,
    },
}

impl StoreFailure {
    /// Reads an SDK error.
    pub fn from_sdk<E>(
        operation: &'static str,
        bucket: &str,
        err: &SdkError<E, HttpResponse>,
    ) -> Self
    where
        E: ProvideErrorMetadata + std::error::Error + 'static,
    {
        let kind = match err {
            SdkError::ConstructionFailure(_) => FailureKind::Request(error_chain(err)),
            SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) => {
                FailureKind::Transport(error_chain(err))
            }
            // A response that could not be read (cut off, garbled): treat
            // like a dropped connection.
            SdkError::ResponseError(e) => match e.raw().status().as_u16() {
                status if status >= 400 => FailureKind::Service {
                    status,
                    code: None,
                    message: None,
                },
                _ => FailureKind::Transport(error_chain(err)),
            },
            SdkError::ServiceError(e) => FailureKind::Service {
                status: e.raw().status().as_u16(),
                code: e.err().code().map(str::to_owned),
                message: e.err().message().map(str::to_owned),
            },
            _ => FailureKind::Transport(error_chain(err)),
        };
        Self {
            operation,
            bucket: bucket.to_owned(),
            kind,
        }
    }

    /// The HTTP status, if the store answered.
    pub fn status(&self) -> Option<u16> {
        match &self.kind {
            FailureKind::Service { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The S3 error code, if the store sent one.
    pub fn code(&self) -> Option<&str> {
        match &self.kind {
            FailureKind::Service { code, .. } => code.as_deref(),
            _ => None,
        }
    }

    /// Whether the store said the bucket (or key) does not exist.
    pub fn is_not_found(&self) -> bool {
        self.status() == Some(404)
            || matches!(self.code(), Some("NoSuchBucket" | "NoSuchKey" | "NotFound"))
    }

    /// Whether the store does not implement the request at all (s3s-fs
    /// answers `NotImplemented`, HTTP 501): no retry will succeed, though
    /// [`is_retryable`](Self::is_retryable) counts every 5xx.
    pub fn is_not_implemented(&self) -> bool {
        self.code() == Some("NotImplemented") || self.status() == Some(501)
    }

    /// Whether the failure is about the bucket rather than a key in it.
    pub fn is_no_such_bucket(&self) -> bool {
        self.code() == Some("NoSuchBucket")
    }

    /// Whether the store refused the credentials or the action.
    pub fn is_access_denied(&self) -> bool {
        self.status() == Some(403)
            || matches!(
                self.code(),
                Some(
                    "AccessDenied"
                        | "InvalidAccessKeyId"
                        | "SignatureDoesNotMatch"
                        | "AllAccessDisabled"
                )
            )
    }

    /// Whether the store refused the credentials themselves (rather than
    /// the action): a wrong key, a bad signature, an expired token.
    pub fn is_bad_credentials(&self) -> bool {
        matches!(
            self.code(),
            Some("InvalidAccessKeyId" | "SignatureDoesNotMatch" | "InvalidToken" | "ExpiredToken")
        )
    }

    /// Whether retrying the same call later can succeed.
    pub fn is_retryable(&self) -> bool {
        match &self.kind {
            FailureKind::Transport(_) => true,
            FailureKind::Request(_) => false,
            FailureKind::Service { status, code, .. } => {
                *status >= 500
                    || *status == 429
                    || *status == 408
                    || matches!(
                        code.as_deref(),
                        Some(
                            "SlowDown"
                                | "Throttling"
                                | "ThrottlingException"
                                | "RequestTimeout"
                                | "InternalError"
                                | "ServiceUnavailable"
                                | "OperationAborted"
                        )
                    )
            }
        }
    }

    /// The [`ProvisionError`] the library gets.
    pub fn into_provision_error(self) -> ProvisionError {
        if self.is_retryable() {
            ProvisionError::retryable(self.to_string())
        } else {
            ProvisionError::permanent(self.to_string())
        }
    }
}

/// An error and its sources, `: `-separated, without repeats (the SDK's
/// own `DisplayErrorContext` appends a `Debug` dump, too long for a status).
pub fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut next = Some(err);
    while let Some(e) = next {
        let text = e.to_string();
        if !text.is_empty() && !parts.last().is_some_and(|last| last.contains(&text)) {
            parts.push(text);
        }
        next = e.source();
    }
    parts.join(": ")
}

impl fmt::Display for StoreFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self {
            operation,
            bucket,
            kind,
        } = self;
        write!(f, "S3 {operation} on bucket {bucket:?} failed: ")?;
        match kind {
            FailureKind::Transport(detail) => {
                write!(f, "the object store did not answer ({detail}); retrying")
            }
            FailureKind::Request(detail) => write!(f, "the request could not be built: {detail}"),
            FailureKind::Service {
                status,
                code,
                message,
            } => {
                write!(f, "HTTP {status}")?;
                if let Some(code) = code {
                    write!(f, " {code}")?;
                }
                if let Some(message) = message.as_deref().filter(|m| !m.is_empty()) {
                    write!(f, ": {message}")?;
                }
                if self.is_retryable() {
                    write!(f, "; retrying")
                } else if self.is_access_denied() {
                    write!(
                        f,
                        "; check that the admin Secret named by the class (the StorageClass, or COSI's BucketClass) holds valid credentials allowed to manage buckets"
                    )
                } else {
                    Ok(())
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service(status: u16, code: Option<&str>) -> StoreFailure {
        StoreFailure {
            operation: "CreateBucket",
            bucket: "b".into(),
            kind: FailureKind::Service {
                status,
                code: code.map(str::to_owned),
                message: Some("msg".into()),
            },
        }
    }

    #[test]
    fn transport_failures_and_5xx_are_retryable() {
        let down = StoreFailure {
            operation: "HeadBucket",
            bucket: "b".into(),
            kind: FailureKind::Transport("connection refused".into()),
        };
        assert!(down.is_retryable());
        assert!(down.clone().into_provision_error().is_retryable());
        assert!(down.to_string().contains("did not answer"), "{down}");
        for status in [500, 502, 503, 504] {
            assert!(
                service(status, None).into_provision_error().is_retryable(),
                "{status}"
            );
        }
        assert!(service(503, Some("SlowDown")).is_retryable());
    }

    #[test]
    fn throttling_is_retryable() {
        assert!(service(429, None).is_retryable());
        assert!(service(400, Some("RequestTimeout")).is_retryable());
    }

    #[test]
    fn other_4xx_are_permanent() {
        for (status, code) in [
            (400, Some("InvalidBucketName")),
            (409, Some("BucketAlreadyExists")),
            (400, None),
            (405, None),
        ] {
            let e = service(status, code).into_provision_error();
            assert!(!e.is_retryable(), "{status} {code:?}");
        }
        assert!(
            !StoreFailure {
                operation: "PutObject",
                bucket: "b".into(),
                kind: FailureKind::Request("bad".into()),
            }
            .is_retryable()
        );
    }

    #[test]
    fn access_denied_says_to_check_the_admin_secret() {
        for f in [
            service(403, Some("AccessDenied")),
            service(403, Some("InvalidAccessKeyId")),
            service(403, None),
        ] {
            assert!(f.is_access_denied());
            let e = f.into_provision_error();
            assert!(!e.is_retryable());
            assert!(e.to_string().contains("admin Secret"), "{e}");
        }
    }

    #[test]
    fn not_found_is_recognised_by_status_or_code() {
        assert!(service(404, None).is_not_found());
        assert!(service(404, Some("NoSuchBucket")).is_no_such_bucket());
        assert!(service(400, Some("NoSuchKey")).is_not_found());
        assert!(!service(403, None).is_not_found());
    }

    #[test]
    fn bad_credentials_are_told_from_a_refused_action() {
        assert!(service(403, Some("SignatureDoesNotMatch")).is_bad_credentials());
        assert!(service(403, Some("InvalidAccessKeyId")).is_bad_credentials());
        assert!(!service(403, Some("AccessDenied")).is_bad_credentials());
        assert!(!service(403, None).is_bad_credentials());
    }

    #[test]
    fn error_chain_joins_sources_once() {
        #[derive(Debug)]
        struct Outer(std::io::Error);
        impl fmt::Display for Outer {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("dispatch failure")
            }
        }
        impl std::error::Error for Outer {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let e = Outer(std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            "connection refused",
        ));
        assert_eq!(error_chain(&e), "dispatch failure: connection refused");
    }

    #[test]
    fn message_names_operation_bucket_status_and_code() {
        let text = service(400, Some("InvalidBucketName")).to_string();
        assert_eq!(
            text,
            "S3 CreateBucket on bucket \"b\" failed: HTTP 400 InvalidBucketName: msg"
        );
    }
}
