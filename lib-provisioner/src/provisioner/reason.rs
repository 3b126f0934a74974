//! [`ErrorReason`]: what a [`ProvisionError`] is about, for callers that
//! answer in another API's terms (COSI's gRPC codes, a BucketAccess status).

use super::{AccessMode, ErrorKind, ProvisionError};

/// Why a request failed, beside whether to retry ([`ErrorKind`]). Callers
/// that speak another API map it: the COSI gRPC driver answers
/// `OUT_OF_RANGE`, `INVALID_ARGUMENT`, `NOT_FOUND` and `ALREADY_EXISTS`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorReason {
    /// The provisioner cannot give one principal one credential for
    /// several buckets (kind [`ErrorKind::Unsupported`]).
    MultiBucketUnsupported,
    /// The provisioner cannot give this mode (kind
    /// [`ErrorKind::Unsupported`]).
    UnsupportedAccessMode(AccessMode),
    /// The bucket (or account) asked for does not exist, yet may appear
    /// (kind [`ErrorKind::Retryable`]).
    NotFound,
    /// It exists and belongs to someone else or is incompatible with the
    /// request (kind [`ErrorKind::Permanent`]).
    AlreadyExists,
}

impl ProvisionError {
    /// One principal cannot get one credential for several buckets here.
    /// Not retried; say what the user can do instead.
    ///
    /// ```
    /// use lib_provisioner::provisioner::{ErrorKind, ErrorReason, ProvisionError};
    /// let err = ProvisionError::multi_bucket_unsupported("ask for one bucket per BucketAccess");
    /// assert_eq!(err.kind(), ErrorKind::Unsupported);
    /// assert_eq!(err.reason(), Some(ErrorReason::MultiBucketUnsupported));
    /// ```
    pub fn multi_bucket_unsupported(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unsupported, message).with_reason(ErrorReason::MultiBucketUnsupported)
    }

    /// The provisioner cannot give `mode`. Not retried.
    ///
    /// ```
    /// use lib_provisioner::provisioner::{AccessMode, ErrorReason, ProvisionError};
    /// let err = ProvisionError::unsupported_access_mode(AccessMode::WriteOnly, "use ReadWrite");
    /// assert_eq!(err.reason(), Some(ErrorReason::UnsupportedAccessMode(AccessMode::WriteOnly)));
    /// assert!(!err.is_retryable());
    /// ```
    pub fn unsupported_access_mode(mode: AccessMode, message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unsupported, message)
            .with_reason(ErrorReason::UnsupportedAccessMode(mode))
    }

    /// What was asked for does not exist (yet): retried.
    ///
    /// ```
    /// use lib_provisioner::provisioner::{ErrorReason, ProvisionError};
    /// let err = ProvisionError::not_found("bucket photos does not exist: create it on the store");
    /// assert!(err.is_retryable());
    /// assert_eq!(err.reason(), Some(ErrorReason::NotFound));
    /// ```
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Retryable, message).with_reason(ErrorReason::NotFound)
    }

    /// It exists, and is someone else's or incompatible: permanent.
    ///
    /// ```
    /// use lib_provisioner::provisioner::{ErrorReason, ProvisionError};
    /// let err = ProvisionError::already_exists("bucket photos belongs to another claim");
    /// assert!(!err.is_retryable());
    /// assert_eq!(err.reason(), Some(ErrorReason::AlreadyExists));
    /// ```
    pub fn already_exists(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Permanent, message).with_reason(ErrorReason::AlreadyExists)
    }

    /// Says what the error is about (the kind, and so the retry, stays).
    pub fn with_reason(mut self, reason: ErrorReason) -> Self {
        self.reason = Some(reason);
        self
    }

    /// What the error is about, if the provisioner said.
    pub fn reason(&self) -> Option<ErrorReason> {
        self.reason
    }
}
