//! [`ProvisionError`]: how a provisioner says what failed and whether to retry.

use std::time::Duration;

/// Whether a [`ProvisionError`] can pass without a change by the user.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The request cannot succeed as written (bad parameters, a name owned by
    /// someone else): the claim is marked Failed with the message, which
    /// should say how to fix it. The library still retries, slowly, in case
    /// the cause is fixed elsewhere (a class or Secret edited).
    Permanent,
    /// A passing fault (store unreachable, throttled, a call that timed out):
    /// the claim stays Pending with the message and is retried with backoff.
    Retryable,
    /// The provisioner does not implement the operation (the default
    /// [`update`](super::Provisioner::update)): not retried; the claim says
    /// so, and keeps working as it was.
    Unsupported,
}

/// A boxed error that caused a [`ProvisionError`].
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A provisioner's failure, telling the library whether to retry.
///
/// The message is what the claim's status and Event show: say what is wrong
/// and how to fix it. The cause (say, the S3 SDK's error) goes into
/// [`with_source`](Self::with_source), so logs keep the whole chain.
///
/// ```
/// use std::time::Duration;
/// use lib_provisioner::provisioner::ProvisionError;
///
/// let err = ProvisionError::permanent("parameter endpoint is missing: add it to the StorageClass");
/// assert!(!err.is_retryable());
///
/// let io = std::io::Error::other("connection reset");
/// let err = ProvisionError::retryable("the store did not answer")
///     .with_source(io)
///     .with_retry_after(Duration::from_secs(30));
/// assert_eq!(err.retry_after(), Some(Duration::from_secs(30)));
/// assert_eq!(std::error::Error::source(&err).map(|s| s.to_string()).as_deref(), Some("connection reset"));
/// ```
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct ProvisionError {
    kind: ErrorKind,
    message: String,
    retry_after: Option<Duration>,
    nothing_created: bool,
    /// Set through [`with_reason`](Self::with_reason) (in `reason.rs`).
    pub(super) reason: Option<super::ErrorReason>,
    #[source]
    source: Option<BoxError>,
}

impl ProvisionError {
    /// A failure the user must fix.
    pub fn permanent(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Permanent, message)
    }

    /// An operation the provisioner does not implement: not retried.
    ///
    /// ```
    /// use lib_provisioner::provisioner::{ErrorKind, ProvisionError};
    /// let err = ProvisionError::unsupported("rotation is not supported by this store");
    /// assert_eq!(err.kind(), ErrorKind::Unsupported);
    /// assert!(!err.is_retryable());
    /// ```
    pub fn unsupported(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unsupported, message)
    }

    /// A passing fault: retried with backoff.
    pub fn retryable(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Retryable, message)
    }

    /// A failure of the given kind.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            retry_after: None,
            nothing_created: false,
            reason: None,
            source: None,
        }
    }

    /// Keeps the error that caused this one (shown in logs, not on the claim).
    pub fn with_source(mut self, source: impl Into<BoxError>) -> Self {
        self.source = Some(source.into());
        self
    }

    /// Asks the library to retry no sooner than `after` (say, what a
    /// throttling store answered). Backoff still applies when it is longer.
    pub fn with_retry_after(mut self, after: Duration) -> Self {
        self.retry_after = Some(after);
        self
    }

    /// Says that the failed call created nothing in the store: no bucket, no
    /// credentials, nothing a teardown would have to remove (a request
    /// refused before any write, say). Only then does the library drop the
    /// ObjectBucket it reserved for the claim before calling
    /// [`provision`](super::Provisioner::provision) or
    /// [`grant`](super::Provisioner::grant) when the error is permanent.
    /// Without it the reservation stays, as the record that something may
    /// exist, and the claim's deletion runs the teardown (Delete or Revoke)
    /// against it: say it only when it is certain.
    ///
    /// ```
    /// use lib_provisioner::provisioner::ProvisionError;
    /// let refused = ProvisionError::permanent("parameter endpoint is missing: add it to the StorageClass")
    ///     .with_nothing_created();
    /// assert!(refused.nothing_created());
    /// // Refused after CreateBucket: the bucket exists; the record must stay.
    /// let after = ProvisionError::permanent("the store refused the quota: remove maxSize");
    /// assert!(!after.nothing_created());
    /// ```
    pub fn with_nothing_created(mut self) -> Self {
        self.nothing_created = true;
        self
    }

    /// Whether the provisioner said the call created nothing
    /// ([`with_nothing_created`](Self::with_nothing_created)).
    pub fn nothing_created(&self) -> bool {
        self.nothing_created
    }

    /// Whether retrying the same request can succeed without a change.
    pub fn is_retryable(&self) -> bool {
        self.kind == ErrorKind::Retryable
    }

    /// Permanent or retryable.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The message for the claim's status and Event.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The earliest retry the provisioner asked for, if any.
    pub fn retry_after(&self) -> Option<Duration> {
        self.retry_after
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_source_chain_is_kept_and_not_repeated_in_the_message() {
        let err = ProvisionError::retryable("could not create bucket b")
            .with_source(std::io::Error::other("connection refused"));
        assert_eq!(err.to_string(), "could not create bucket b");
        let source = std::error::Error::source(&err).map(ToString::to_string);
        assert_eq!(source.as_deref(), Some("connection refused"));
        assert!(err.is_retryable());
        assert_eq!(err.retry_after(), None);
    }
}
