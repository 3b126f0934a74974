//! Leader election through a `coordination.k8s.io/v1` Lease.
//!
//! One replica holds the Lease and reconciles; the others wait, with their
//! caches filled. The holder renews every `renew_every`. A candidate never
//! compares the holder's `renewTime` with its own wall clock (the two hosts'
//! clocks may disagree by more than a lease): like client-go, it takes the
//! Lease only after it has seen the Lease unchanged (holder, `renewTime`,
//! `resourceVersion`) for a full `lease_duration` on its own monotonic
//! clock. Every write is a replace guarded by `resourceVersion`, so two
//! candidates can never both win. A holder that cannot renew before its own
//! lease would expire stops acting (the process exits), so the next leader
//! never overlaps with it.
//!
//! A holder can also be paused (a stop-the-world pause, a VM stall, SIGSTOP)
//! past its lease while a standby takes over. When it wakes, its queued
//! reconciles would act before its renewal loop notices. So the time of the
//! last renewal is kept on the monotonic clock (`Leadership`), and every
//! step that writes or calls the provisioner checks it first.
//!
//! ```
//! use std::time::Duration;
//! use lib_provisioner::leader::LeaderElection;
//! let election = LeaderElection::new("obc-system", "sample-provisioner", "pod-a")
//!     .with_lease_duration(Duration::from_secs(15));
//! assert_eq!(election.renew_every, Duration::from_secs(5));
//! ```

use std::time::Duration;

use jiff::SignedDuration;

// One concept per file, each using only the files above it:
// - `leadership`: the monotonic record of the last renewal, which every
//   step that acts (and `core::calls`, which bounds a call by it) checks;
// - `observer`: the clock rules by which a candidate finds a lease run out;
// - `attempt`: one guarded write to take or keep the Lease (and the wall
//   clock it writes);
// - `elector`: acquisition, renewal under a deadline, and release;
// - `gate`: the lease gate on the reconcilers' Kubernetes client.
mod attempt;
mod elector;
pub(crate) mod gate;
mod leadership;
mod observer;

pub(crate) use elector::Elector;
pub(crate) use leadership::Leadership;

/// Where and as whom to take part in the election.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct LeaderElection {
    /// Namespace of the Lease.
    pub namespace: String,
    /// Name of the Lease.
    pub lease_name: String,
    /// This replica's identity (its pod name, say).
    pub identity: String,
    /// How long a Lease stays valid without renewal.
    pub lease_duration: Duration,
    /// How often the holder renews (and candidates retry).
    pub renew_every: Duration,
    /// Added to the wall clock this replica writes into the Lease (tests
    /// only: a host whose clock is off).
    wall_clock_skew: SignedDuration,
}

impl LeaderElection {
    /// An election with a 15 s lease renewed every 5 s.
    pub fn new(
        namespace: impl Into<String>,
        lease_name: impl Into<String>,
        identity: impl Into<String>,
    ) -> Self {
        Self {
            namespace: namespace.into(),
            lease_name: lease_name.into(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(15),
            renew_every: Duration::from_secs(5),
            wall_clock_skew: SignedDuration::ZERO,
        }
    }

    /// Sets the lease duration, and renewal at a third of it.
    pub fn with_lease_duration(mut self, duration: Duration) -> Self {
        self.lease_duration = duration;
        self.renew_every = duration / 3;
        self
    }

    /// Makes this replica's wall clock read `skew` off (tests only: the
    /// election must not depend on clocks agreeing).
    #[doc(hidden)]
    pub fn with_wall_clock_skew(mut self, skew: SignedDuration) -> Self {
        self.wall_clock_skew = skew;
        self
    }
}
