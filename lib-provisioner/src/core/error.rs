//! The library's errors: [`RunError`], what [`ControllerBuilder::run`](crate::controller::ControllerBuilder::run)
//! returns, and [`Error`], why one reconcile did not finish (seen in logs
//! and metrics, never returned to the application).

use crate::core::provisioner::ProvisionError;

/// Why [`ControllerBuilder::run`](crate::controller::ControllerBuilder::run) stopped.
///
/// ```
/// # use lib_provisioner::RunError;
/// fn exit_code(err: &RunError) -> i32 {
///     match err {
///         // Not a failure: a standby leads now; restart as a standby.
///         RunError::LostLease(_) => 0,
///         _ => 1,
///     }
/// }
/// # assert_eq!(exit_code(&RunError::LostLease("obc (now held by b)".into())), 0);
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// Leader election lost its lease; the process must stop acting. Exit
    /// and let the Deployment restart the process as a standby.
    #[error("lost the leader lease {0}; stopping so that the new leader acts alone")]
    LostLease(String),
    /// The metrics/health server could not start: pick a free address.
    #[error("could not serve metrics and health on {addr}: {source}")]
    Serve {
        /// The address.
        addr: std::net::SocketAddr,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// Why a reconcile did not finish. Each variant says what to do about it.
///
/// Reconcile errors are retried by the library; they reach the application
/// only through logs, metrics (`kind()`), and the claim's status and Events.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A Kubernetes API call failed; retried with backoff. Check the
    /// controller's RBAC and the apiserver's health if it persists.
    #[error("Kubernetes API call failed while trying to {action}: {source}")]
    Kube {
        /// What the library was doing.
        action: &'static str,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// Another writer changed the object first (HTTP 409); the library
    /// re-reads and retries at once.
    #[error("conflict while trying to {action}: the object changed, retrying with a fresh read")]
    Conflict {
        /// What the library was doing.
        action: &'static str,
    },
    /// The claim was deleted while a pass worked on it (HTTP 404 on a claim
    /// write). Nothing to do for the claim; the ObjectBucket reconciler
    /// tears down whatever the pass created for it.
    #[error("the claim was deleted while trying to {action}")]
    ClaimGone {
        /// What the library was doing.
        action: &'static str,
    },
    /// This replica's leader lease ran out (it was paused, or could not
    /// renew): it must not write until it leads again.
    #[error(
        "not acting: this replica's leader lease ran out {0:?} ago; the process stops so that the new leader acts alone"
    )]
    NotLeading(std::time::Duration),
    /// The provisioner failed; the claim's status and events carry the message.
    #[error("provisioner {operation} failed: {source}")]
    Provisioner {
        /// provision, grant, delete or revoke.
        operation: &'static str,
        /// The provisioner's error.
        #[source]
        source: ProvisionError,
    },
    /// The claim cannot be served as written; its status says how to fix it.
    /// Retried slowly in case the cause is fixed elsewhere.
    #[error("claim is invalid: {0}")]
    InvalidClaim(String),
    /// The claim waits for something outside it (a StorageClass, an old
    /// ObjectBucket being released).
    #[error("claim is waiting: {0}")]
    Waiting(String),
    /// The object lacks a name or namespace, which the apiserver always sets.
    #[error("object has no {0}; was it built locally instead of read from the apiserver?")]
    MissingField(&'static str),
    /// A reconcile made more steps than any valid sequence needs: a bug.
    #[error("reconcile did not converge after {0} steps; please report this with the claim's YAML")]
    NoConvergence(usize),
    /// A pass took longer than its bound (a request hung on a connection the
    /// apiserver dropped, say): cut off and retried; every step is safe to
    /// repeat, as after a crash.
    #[error("the reconcile pass did not finish within {0:?}; it is retried")]
    PassTimedOut(std::time::Duration),
}

impl Error {
    pub(crate) fn kube(action: &'static str) -> impl FnOnce(kube::Error) -> Error {
        move |source| {
            if is_status(&source, 409) {
                Error::Conflict { action }
            } else {
                Error::Kube { action, source }
            }
        }
    }

    /// Like [`Error::kube`], for writes to the claim itself: 404 means the
    /// claim is gone ([`Error::ClaimGone`]).
    pub(crate) fn claim(action: &'static str) -> impl FnOnce(kube::Error) -> Error {
        move |source| {
            if is_status(&source, 404) {
                Error::ClaimGone { action }
            } else {
                Error::kube(action)(source)
            }
        }
    }

    /// A short machine-friendly name, used as a metrics label.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Kube { .. } => "kube",
            Self::Conflict { .. } => "conflict",
            Self::ClaimGone { .. } => "claim_gone",
            Self::NotLeading(_) => "not_leading",
            Self::Provisioner { .. } => "provisioner",
            Self::InvalidClaim(_) => "invalid_claim",
            Self::Waiting(_) => "waiting",
            Self::MissingField(_) => "missing_field",
            Self::NoConvergence(_) => "no_convergence",
            Self::PassTimedOut(_) => "pass_timed_out",
        }
    }
}

/// Whether a client error is an API status with this HTTP code.
pub(crate) fn is_status(err: &kube::Error, code: u16) -> bool {
    matches!(err, kube::Error::Api(status) if status.code == code)
}

/// The library's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
