//! How every provisioner call runs, whichever API family makes it: under
//! a limit ([`limit`]: the provisioner timeout, or what is left of the
//! lease), timed into the metrics.

use std::future::Future;
use std::time::{Duration, Instant};

use tracing::debug;

use crate::core::leader::Leadership;
use crate::core::metrics::Metrics;
use crate::core::provisioner::ProvisionError;

mod limit;

use limit::CallLimit;
pub(crate) use limit::TimedOut;

/// How long a provisioner call may take unless
/// [`ControllerBuilder::provisioner_timeout`](crate::controller::ControllerBuilder::provisioner_timeout)
/// (or the gRPC driver's setting) says otherwise.
pub const DEFAULT_PROVISIONER_TIMEOUT: Duration = Duration::from_secs(60);

/// Runs a provisioner call under the provisioner `timeout`, cut to what is
/// left of the leader lease, recording its duration and result. A call cut
/// off is dropped (the contract asks calls to be safe to abandon) and
/// becomes a retryable error whose message says what to do.
pub(crate) async fn timed<T>(
    leadership: Option<&Leadership>,
    timeout: Duration,
    metrics: &Metrics,
    operation: &'static str,
    call: impl Future<Output = Result<T, ProvisionError>>,
) -> Result<T, ProvisionError> {
    let started = Instant::now();
    // Never past this replica's lease: a standby may lead after it.
    let limit = CallLimit::of(leadership, timeout, operation)?;
    // The marker the replica tests count: every call, failed ones too.
    debug!(
        act = "provisioner-call",
        operation, "calling the provisioner"
    );
    let result = tokio::time::timeout(limit.duration(), call)
        .await
        .unwrap_or_else(|_| Err(limit.exceeded(operation)));
    metrics.operation(operation, started.elapsed(), result.is_ok());
    result
}
