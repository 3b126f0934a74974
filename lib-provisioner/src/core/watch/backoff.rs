//! How a failed watch is retried.

/// Retries of a failed watch: 250 ms doubling to 2 s. kube-runtime's
/// default grows to 30 s, so after an apiserver outage the watches (and
/// every claim waiting on them) came back up to half a minute after the API
/// did; a reconnect every 2 s costs a down apiserver nothing.
pub(crate) fn watch_backoff() -> WatchBackoff {
    WatchBackoff::default()
}

/// 250 ms doubling to 2 s, with up to 25% jitter; reset by the stream once a
/// watch delivers again.
#[derive(Debug)]
pub(crate) struct WatchBackoff {
    next: std::time::Duration,
}

impl WatchBackoff {
    const MIN: std::time::Duration = std::time::Duration::from_millis(250);
    const MAX: std::time::Duration = std::time::Duration::from_secs(2);
}

impl Default for WatchBackoff {
    fn default() -> Self {
        Self { next: Self::MIN }
    }
}

impl Iterator for WatchBackoff {
    type Item = std::time::Duration;

    fn next(&mut self) -> Option<Self::Item> {
        let delay = self.next;
        self.next = (self.next * 2).min(Self::MAX);
        let jitter = rand::random_range(0.0..0.25);
        Some(delay.mul_f64(1.0 + jitter))
    }
}

impl kube::runtime::utils::Backoff for WatchBackoff {
    fn reset(&mut self) {
        self.next = Self::MIN;
    }
}
