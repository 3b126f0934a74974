//! How long a provisioner call may run (the provisioner timeout, or what
//! is left of the leader lease), and the errors a call cut off becomes.

use std::time::Duration;

use crate::core::leader::Leadership;
use crate::core::provisioner::ProvisionError;

/// How long a provisioner call may run: the provisioner timeout, or less,
/// what is left of this replica's lease. A call must not outlive the lease:
/// a standby may take over once it ran out, and the two would then act on
/// the same claims.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CallLimit {
    /// The provisioner timeout.
    Timeout(Duration),
    /// The time left of the lease (shorter than the provisioner timeout).
    Lease(Duration),
}

impl CallLimit {
    /// The limit of a call of `operation` starting now; an error when the
    /// lease ran out already (the call must not even start).
    pub(crate) fn of(
        leadership: Option<&Leadership>,
        timeout: Duration,
        operation: &str,
    ) -> std::result::Result<Self, ProvisionError> {
        let Some(leadership) = leadership else {
            return Ok(Self::Timeout(timeout));
        };
        match leadership.remaining() {
            None => Err(lease_ran_out(operation)),
            Some(left) if left < timeout => Ok(Self::Lease(left)),
            Some(_) => Ok(Self::Timeout(timeout)),
        }
    }

    /// The duration of the limit.
    pub(crate) fn duration(self) -> Duration {
        match self {
            Self::Timeout(d) | Self::Lease(d) => d,
        }
    }

    /// The error a call cut off by this limit becomes.
    pub(crate) fn exceeded(self, operation: &str) -> ProvisionError {
        match self {
            Self::Timeout(d) => timed_out(operation, d),
            Self::Lease(_) => lease_ran_out(operation),
        }
    }
}

/// The error of a call abandoned, or never started, because the lease ran
/// out: retryable, by whichever replica leads next.
fn lease_ran_out(operation: &str) -> ProvisionError {
    ProvisionError::retryable(format!(
        "{operation} was abandoned: this replica's leader lease ran out, and another replica may lead now; the leader retries it"
    ))
}

/// The error a provisioner call cut off by the timeout becomes.
fn timed_out(operation: &str, limit: Duration) -> ProvisionError {
    ProvisionError::retryable(format!(
        "{operation} did not answer within {limit:?} and was abandoned; it is retried with backoff. If the store is slow rather than stuck, raise the provisioner timeout"
    ))
    .with_source(TimedOut)
}

/// The source of a [`timed_out`] error, so the claim's status can name it.
#[derive(Debug, thiserror::Error)]
#[error("provisioner call timed out")]
pub(crate) struct TimedOut;

#[cfg(test)]
mod tests {
    use tokio::time::Instant;

    use super::*;
    use crate::core::leader::LeaderElection;

    #[tokio::test(start_paused = true)]
    async fn a_provisioner_call_is_cut_to_what_is_left_of_the_lease() {
        let cfg =
            LeaderElection::new("ns", "lease", "me").with_lease_duration(Duration::from_secs(6));
        let leadership = Leadership::new(&cfg);
        let sixty = Duration::from_secs(60);
        assert!(
            CallLimit::of(Some(&leadership), sixty, "provision").is_err(),
            "never led: no call"
        );
        leadership.renewed(Instant::now());
        let limit = CallLimit::of(Some(&leadership), sixty, "provision").expect("leading");
        assert_eq!(limit, CallLimit::Lease(Duration::from_secs(5)));
        assert!(limit.exceeded("provision").is_retryable());
        let short = CallLimit::of(Some(&leadership), Duration::from_secs(2), "grant");
        assert_eq!(short.ok(), Some(CallLimit::Timeout(Duration::from_secs(2))));
        tokio::time::advance(Duration::from_secs(4)).await;
        let limit = CallLimit::of(Some(&leadership), sixty, "provision").expect("leading");
        assert_eq!(limit.duration(), Duration::from_secs(1));
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(
            CallLimit::of(Some(&leadership), sixty, "provision").is_err(),
            "ran out: the call does not start"
        );
        assert_eq!(
            CallLimit::of(None, sixty, "provision").ok(),
            Some(CallLimit::Timeout(sixty)),
            "without leader election only the timeout bounds it"
        );
    }
}
