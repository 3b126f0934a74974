//! What the apiserver served during a COSI phase, as reads (GET, LIST) and
//! writes per object, with the benchmark's own requests taken out; and
//! waiting until nobody sends it anything.

use std::time::{Duration, Instant};

use anyhow::{Result, bail};

use crate::apiserver::ApiSnapshot;
use crate::prom::{Requests, WRITE_VERBS};
use crate::report::{is_apiserver_own, out, print_requests};
use crate::run::Run;

/// `apiserver_request_total`'s name for a COSI resource.
pub fn cosi(plural: &str) -> String {
    format!("{plural} (objectstorage.k8s.io)")
}

/// Reads and writes per object of a phase.
#[derive(Clone, Copy, Debug, Default)]
pub struct Cost {
    pub reads: f64,
    pub writes: f64,
}

impl Cost {
    pub fn total(&self) -> f64 {
        self.reads + self.writes
    }
}

/// The requests of a phase by clients other than the benchmark:
/// `own` lists the benchmark's (resource, verb, count).
pub fn others(delta: &ApiSnapshot, own: &[(&str, &str, f64)]) -> Requests {
    let mut r = delta.requests.filter(|k| !is_apiserver_own(k));
    for (resource, verb, n) in own {
        r.subtract(resource, verb, *n);
    }
    r
}

/// Prints reads and writes per object (writes by resource and verb, reads
/// by resource) and returns them.
pub fn print_cost(title: &str, r: &Requests, per: usize) -> Cost {
    let (reads, writes) = split(r);
    let cost = Cost {
        reads: reads.total() / per as f64,
        writes: writes.total() / per as f64,
    };
    out(format!(
        "    {title}: {:.2} requests per object = {:.2} reads (GET/LIST) + {:.2} writes",
        cost.total(),
        cost.reads,
        cost.writes
    ));
    print_requests(&writes, per);
    let parts: Vec<String> = reads
        .by_resource_verb()
        .iter()
        .map(|((res, verb), n)| format!("{res} {verb} {:.2}", n / per as f64))
        .collect();
    out(format!(
        "    reads per object: {}",
        if parts.is_empty() {
            "none".into()
        } else {
            parts.join(", ")
        }
    ));
    cost
}

/// Reads (GET, LIST) and writes; watches are neither.
fn split(r: &Requests) -> (Requests, Requests) {
    let reads = r.filter(|k| k.verb == "GET" || k.verb == "LIST");
    let writes = r.filter(|k| WRITE_VERBS.contains(&k.verb.as_str()));
    (reads, writes)
}

/// Waits until no client but the apiserver itself has sent a request for
/// `quiet` (reads and writes; watches excluded), so that a phase's counts
/// hold the tail of its work.
pub async fn wait_quiet(run: &Run, quiet: Duration, timeout: Duration) -> Result<()> {
    let started = Instant::now();
    let count = |s: &ApiSnapshot| {
        s.requests
            .filter(|k| !is_apiserver_own(k) && k.verb != "WATCH")
            .total()
    };
    let mut last = count(&run.api.snapshot().await?);
    let mut since = Instant::now();
    loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let now = count(&run.api.snapshot().await?);
        if (now - last).abs() > 0.5 {
            last = now;
            since = Instant::now();
        } else if since.elapsed() >= quiet {
            return Ok(());
        }
        if started.elapsed() > timeout {
            bail!("the apiserver still got requests after {timeout:?}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prom::Key;

    #[test]
    fn own_requests_and_leases_are_taken_out_and_watches_are_neither() {
        let mut r = Requests::default();
        for (resource, verb, n) in [
            (cosi("bucketclaims"), "POST", 10.0),
            (cosi("bucketclaims"), "GET", 7.0),
            (cosi("buckets"), "LIST", 1.0),
            (cosi("buckets"), "WATCH", 3.0),
            ("secrets".to_owned(), "PATCH", 2.0),
            ("leases (coordination.k8s.io)".to_owned(), "PUT", 5.0),
        ] {
            let key = Key {
                resource,
                verb: verb.into(),
                code: "201".into(),
            };
            r.0.insert(key, n);
        }
        let delta = ApiSnapshot {
            requests: r,
            seconds: Requests::default(),
            timed: Requests::default(),
        };
        let theirs = others(&delta, &[(&cosi("bucketclaims"), "POST", 8.0)]);
        let (reads, writes) = split(&theirs);
        assert_eq!(reads.total(), 8.0, "GET and LIST");
        assert_eq!(
            writes.total(),
            4.0,
            "2 claim POSTs left and 2 Secret PATCHes; no lease"
        );
    }
}
