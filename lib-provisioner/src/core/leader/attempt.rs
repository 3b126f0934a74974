//! One attempt to take or keep the Lease: a create, or a replace guarded
//! by `resourceVersion`, so two candidates can never both win.

use std::sync::Mutex;

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};
use tokio::time::Instant;

use crate::core::error::{Error, Result, is_status};
use crate::core::leader::LeaderElection;
use crate::core::leader::observer::{Observer, Record, ran_out};

/// Outcome of one attempt to take or keep the Lease.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Attempt {
    /// This replica holds it now (created, renewed or took it over).
    Held,
    /// Another replica holds it (named for the log).
    HeldByOther(String),
}

/// One write of the Lease in `api` as `cfg`'s identity: creates it, renews
/// it while ours, or takes it over once `observer` has seen it unchanged for
/// a whole lease ([`ran_out`]).
pub(super) async fn try_hold_once(
    api: &Api<Lease>,
    cfg: &LeaderElection,
    observer: &Mutex<Observer>,
) -> Result<Attempt> {
    let now = MicroTime(wall_clock(cfg));
    let duration_secs = i32::try_from(cfg.lease_duration.as_secs()).unwrap_or(i32::MAX);
    let Some(mut lease) = api
        .get_opt(&cfg.lease_name)
        .await
        .map_err(Error::kube("read the leader lease"))?
    else {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(cfg.lease_name.clone()),
                namespace: Some(cfg.namespace.clone()),
                ..Default::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(cfg.identity.clone()),
                lease_duration_seconds: Some(duration_secs),
                acquire_time: Some(now.clone()),
                renew_time: Some(now),
                lease_transitions: Some(0),
                ..Default::default()
            }),
        };
        return match api.create(&PostParams::default(), &lease).await {
            Ok(_) => Ok(Attempt::Held),
            Err(e) if is_status(&e, 409) => Ok(Attempt::HeldByOther(
                "a replica that just created it".into(),
            )),
            Err(e) => Err(Error::kube("create the leader lease")(e)),
        };
    };
    let unchanged_since = observer
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .observe(Record::of(&lease), Instant::now());
    let spec = lease.spec.get_or_insert_with(Default::default);
    let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
    let ours = holder.as_deref() == Some(cfg.identity.as_str());
    if !ours {
        if let Some(holder) = holder
            && !ran_out(spec, cfg.lease_duration, unchanged_since, Instant::now())
        {
            return Ok(Attempt::HeldByOther(holder));
        }
        spec.acquire_time = Some(now.clone());
        spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        spec.holder_identity = Some(cfg.identity.clone());
    }
    spec.renew_time = Some(now);
    spec.lease_duration_seconds = Some(duration_secs);
    match api
        .replace(&cfg.lease_name, &PostParams::default(), &lease)
        .await
    {
        Ok(_) => Ok(Attempt::Held),
        Err(e) if is_status(&e, 409) => Ok(Attempt::HeldByOther(
            "a replica that just renewed it".into(),
        )),
        Err(e) => Err(Error::kube("renew the leader lease")(e)),
    }
}

/// This replica's wall clock, as written into the Lease (`acquireTime`,
/// `renewTime`): skewed in tests, and never compared with another's.
fn wall_clock(cfg: &LeaderElection) -> Timestamp {
    let now = Timestamp::now();
    now.checked_add(cfg.wall_clock_skew).unwrap_or(now)
}

#[cfg(test)]
mod tests {
    use jiff::SignedDuration;

    use super::*;

    #[test]
    fn a_skewed_wall_clock_is_only_written() {
        let cfg = LeaderElection::new("ns", "lease", "me")
            .with_wall_clock_skew(SignedDuration::from_hours(1));
        let ahead = wall_clock(&cfg).duration_since(Timestamp::now());
        assert!(ahead > SignedDuration::from_mins(59), "{ahead:?}");
    }
}
