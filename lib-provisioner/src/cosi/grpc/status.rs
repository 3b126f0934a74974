//! [`status_of`]: a [`ProvisionError`] as the gRPC status COSI expects.

use tonic::{Code, Status};

use crate::core::provisioner::{ErrorKind, ErrorReason, ProvisionError};

/// The status a COSI sidecar acts on: the error's message (which the
/// contract keeps free of secrets; it lands in the object's
/// `status.error`), no details. The code follows COSI's table:
///
/// | error | code | sidecar |
/// |---|---|---|
/// | [`ErrorReason::MultiBucketUnsupported`] | `OUT_OF_RANGE` | gives up |
/// | [`ErrorReason::UnsupportedAccessMode`] | `INVALID_ARGUMENT` | gives up |
/// | [`ErrorReason::NotFound`] | `NOT_FOUND` | retries |
/// | [`ErrorReason::AlreadyExists`] | `ALREADY_EXISTS` | gives up |
/// | other [`ErrorKind::Permanent`] (bad parameters) | `INVALID_ARGUMENT` | gives up |
/// | other [`ErrorKind::Unsupported`] | `UNIMPLEMENTED` | gives up |
/// | other [`ErrorKind::Retryable`] | `UNAVAILABLE` | retries |
pub fn status_of(err: &ProvisionError) -> Status {
    let code = match err.reason() {
        Some(ErrorReason::MultiBucketUnsupported) => Code::OutOfRange,
        Some(ErrorReason::UnsupportedAccessMode(_)) => Code::InvalidArgument,
        Some(ErrorReason::NotFound) => Code::NotFound,
        Some(ErrorReason::AlreadyExists) => Code::AlreadyExists,
        None => match err.kind() {
            ErrorKind::Permanent => Code::InvalidArgument,
            ErrorKind::Unsupported => Code::Unimplemented,
            ErrorKind::Retryable => Code::Unavailable,
        },
    };
    Status::new(code, err.message())
}

/// The status of a failed teardown (`DriverDeleteBucket`,
/// `DriverRevokeBucketAccess`): as [`status_of`], except that a permanent
/// error without a reason (a bucket that still holds objects, say) is
/// `FAILED_PRECONDITION`, which the sidecar retries with backoff: once the
/// user fixes the cause, the deletion goes on by itself, as the library's
/// own teardowns do. `INVALID_ARGUMENT` would end the sidecar's retries.
pub(super) fn teardown_status_of(err: &ProvisionError) -> Status {
    match (err.reason(), err.kind()) {
        (None, ErrorKind::Permanent) => Status::failed_precondition(err.message()),
        _ => status_of(err),
    }
}

/// `INVALID_ARGUMENT` for a request the driver refuses before calling the
/// provisioner.
pub(super) fn invalid(message: impl Into<String>) -> Status {
    Status::invalid_argument(message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::provisioner::AccessMode;

    #[test]
    fn each_error_gets_the_code_cosi_names() {
        let cases = [
            (
                ProvisionError::multi_bucket_unsupported("m"),
                Code::OutOfRange,
            ),
            (
                ProvisionError::unsupported_access_mode(AccessMode::WriteOnly, "m"),
                Code::InvalidArgument,
            ),
            (ProvisionError::not_found("m"), Code::NotFound),
            (ProvisionError::already_exists("m"), Code::AlreadyExists),
            (ProvisionError::permanent("m"), Code::InvalidArgument),
            (ProvisionError::unsupported("m"), Code::Unimplemented),
            (ProvisionError::retryable("m"), Code::Unavailable),
        ];
        for (err, code) in cases {
            let status = status_of(&err);
            assert_eq!(status.code(), code, "{err:?}");
            assert_eq!(status.message(), "m");
            assert!(status.details().is_empty());
        }
    }

    #[test]
    fn a_teardown_refused_for_now_is_retried() {
        let not_empty = ProvisionError::permanent("bucket b is not empty: empty it");
        assert_eq!(
            teardown_status_of(&not_empty).code(),
            Code::FailedPrecondition
        );
        let retry = ProvisionError::retryable("store down");
        assert_eq!(teardown_status_of(&retry).code(), Code::Unavailable);
        let unsupported = ProvisionError::unsupported("no");
        assert_eq!(teardown_status_of(&unsupported).code(), Code::Unimplemented);
    }
}
