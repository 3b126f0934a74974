//! One mode's phases with objects one by one (claim → readyToUse, access →
//! granted with its Secret, access deletion, claim deletion) and in a burst.

use std::time::{Duration, Instant};

use anyhow::Result;
use kube::Client;
use obc_tests::cosi_e2e::Kind;

use super::count::{Cost, others, print_cost, wait_quiet};
use super::modes::Mode;
use super::objects::{
    Tracks, access_name, claim_name, create_access, create_claim, delete, each, resource,
};
use crate::CREATORS;
use crate::ctl::Controller;
use crate::latency::{Timeline, wall_clock};
use crate::report::{header, loadavg, ms, out, percentile};
use crate::run::Run;

/// p50, p95, p99.
pub type Tails = [Duration; 3];

fn tails(mut v: Vec<Duration>) -> Tails {
    v.sort();
    [0.50, 0.95, 0.99].map(|q| percentile(&v, q))
}

fn show(what: &str, t: &Tails) -> String {
    format!(
        "{what}: p50 {:.1} ms, p95 {:.1} ms, p99 {:.1} ms",
        ms(t[0]),
        ms(t[1]),
        ms(t[2])
    )
}

/// What the one-by-one phases measured.
#[derive(Clone, Debug, Default)]
pub struct Serial {
    pub claim_ready: Tails,
    pub access_ready: Tails,
    pub access_gone: Tails,
    pub claim_gone: Tails,
    pub per_claim: Cost,
    pub per_grant: Cost,
    pub per_access_delete: Cost,
    pub per_claim_delete: Cost,
    pub load: String,
}

const QUIET: Duration = Duration::from_secs(2);
const QUIET_MAX: Duration = Duration::from_secs(120);

/// A claim and an access made ready and deleted before the counts start:
/// the first object of a process pays for connections and caches.
pub async fn warm_up(client: &Client, tracks: &Tracks, mode: Mode, ns: &str) -> Result<()> {
    let (c, a) = ("warm-up".to_owned(), "warm-up".to_owned());
    create_claim(client, mode, ns, &c).await?;
    tracks.claim_ready(ns, &c).await?;
    create_access(client, mode, ns, &a, std::slice::from_ref(&c)).await?;
    tracks.access_ready(ns, &a).await?;
    if !mode.deletes_complete() {
        return Ok(());
    }
    delete(client, Kind::BucketAccess, ns, &a).await?;
    tracks.access_gone(ns, &a).await?;
    delete(client, Kind::BucketClaim, ns, &c).await?;
    tracks.claims.gone(ns, &c, super::objects::T).await?;
    Ok(())
}

/// `n` claims, then `n` accesses (one per claim), one by one; then the
/// accesses deleted one by one, then the claims.
pub async fn serial(run: &Run, tracks: &Tracks, mode: Mode, ns: &str, n: usize) -> Result<Serial> {
    let client = &run.client;
    let claims: Vec<String> = (0..n).map(claim_name).collect();
    let accesses: Vec<String> = (0..n).map(access_name).collect();
    let mut s = Serial::default();

    header(&format!(
        "COSI [{}]: {n} BucketClaims one by one -> readyToUse",
        mode.name()
    ));
    wait_quiet(run, QUIET, QUIET_MAX).await?;
    let snap = run.api.snapshot().await?;
    let (mut lat, mut timeline) = (Vec::new(), Timeline::default());
    for c in &claims {
        let (t0, wall) = (Instant::now(), wall_clock());
        create_claim(client, mode, ns, c).await?;
        lat.push(tracks.claim_ready(ns, c).await?.duration_since(t0));
        timeline.push(&format!("{ns}/{c}"), wall, lat[lat.len() - 1]);
    }
    timeline.write(&format!("{ns}-claims"))?;
    s.claim_ready = tails(lat);
    out(format!(
        "    {}",
        show(
            "claim created -> readyToUse (seen by a watch)",
            &s.claim_ready
        )
    ));
    wait_quiet(run, QUIET, QUIET_MAX).await?;
    let delta = run.api.snapshot().await?.since(&snap);
    let r = others(&delta, &[(&resource(Kind::BucketClaim), "POST", n as f64)]);
    s.per_claim = print_cost(
        "requests per BucketClaim (the benchmark's creates taken out)",
        &r,
        n,
    );

    header(&format!(
        "COSI [{}]: {n} BucketAccesses one by one (one claim each) -> accessGranted with its Secret",
        mode.name()
    ));
    let snap = run.api.snapshot().await?;
    let (mut lat, mut timeline) = (Vec::new(), Timeline::default());
    for (a, c) in accesses.iter().zip(&claims) {
        let (t0, wall) = (Instant::now(), wall_clock());
        create_access(client, mode, ns, a, std::slice::from_ref(c)).await?;
        lat.push(tracks.access_ready(ns, a).await?.duration_since(t0));
        timeline.push(&format!("{ns}/{a}"), wall, lat[lat.len() - 1]);
    }
    timeline.write(&format!("{ns}-accesses"))?;
    s.access_ready = tails(lat);
    out(format!(
        "    {}",
        show(
            "access created -> readyToUse and Secret written",
            &s.access_ready
        )
    ));
    wait_quiet(run, QUIET, QUIET_MAX).await?;
    let delta = run.api.snapshot().await?.since(&snap);
    let r = others(&delta, &[(&resource(Kind::BucketAccess), "POST", n as f64)]);
    s.per_grant = print_cost(
        "requests per grant (the benchmark's creates taken out)",
        &r,
        n,
    );

    if !mode.deletes_complete() {
        out(
            "    deletions not measured: upstream's sidecar (and controller) at ee00c269 do not finish them",
        );
        s.load = loadavg();
        return Ok(s);
    }
    header(&format!(
        "COSI [{}]: the {n} BucketAccesses deleted one by one",
        mode.name()
    ));
    let snap = run.api.snapshot().await?;
    let mut lat = Vec::new();
    for a in &accesses {
        let t0 = Instant::now();
        delete(client, Kind::BucketAccess, ns, a).await?;
        lat.push(tracks.access_gone(ns, a).await?.duration_since(t0));
    }
    s.access_gone = tails(lat);
    out(format!(
        "    {}",
        show("access deleted -> it and its Secret gone", &s.access_gone)
    ));
    wait_quiet(run, QUIET, QUIET_MAX).await?;
    let delta = run.api.snapshot().await?.since(&snap);
    let r = others(
        &delta,
        &[(&resource(Kind::BucketAccess), "DELETE", n as f64)],
    );
    s.per_access_delete = print_cost(
        "requests per access deletion (the benchmark's deletes taken out)",
        &r,
        n,
    );

    header(&format!(
        "COSI [{}]: the {n} BucketClaims deleted one by one",
        mode.name()
    ));
    let snap = run.api.snapshot().await?;
    let mut lat = Vec::new();
    for c in &claims {
        let t0 = Instant::now();
        delete(client, Kind::BucketClaim, ns, c).await?;
        lat.push(
            tracks
                .claims
                .gone(ns, c, super::objects::T)
                .await?
                .duration_since(t0),
        );
    }
    s.claim_gone = tails(lat);
    out(format!(
        "    {}",
        show("claim deleted -> gone", &s.claim_gone)
    ));
    wait_quiet(run, QUIET, QUIET_MAX).await?;
    let delta = run.api.snapshot().await?.since(&snap);
    let r = others(
        &delta,
        &[(&resource(Kind::BucketClaim), "DELETE", n as f64)],
    );
    s.per_claim_delete = print_cost(
        "requests per claim deletion (the benchmark's deletes taken out)",
        &r,
        n,
    );
    s.load = loadavg();
    out(format!("    load average {}", s.load));
    Ok(s)
}

/// What the burst measured.
#[derive(Clone, Debug, Default)]
pub struct Burst {
    /// First create to the last claim ready.
    pub claims: Duration,
    /// First create to the last access granted (with its Secret).
    pub accesses: Duration,
    /// First delete to the last access, claim and Secret gone.
    pub deleted: Duration,
    /// Requests per (claim + access) pair, creation to idle.
    pub per_pair: Cost,
    pub load: String,
}

/// `n` claims at once, then `n` accesses at once; then everything deleted
/// at once, and checked gone.
pub async fn burst(
    run: &Run,
    ctl: &Controller,
    tracks: &Tracks,
    mode: Mode,
    ns: &str,
    n: usize,
) -> Result<Burst> {
    let client = &run.client;
    let claims: Vec<String> = (0..n).map(claim_name).collect();
    let accesses: Vec<String> = (0..n).map(access_name).collect();
    header(&format!(
        "COSI [{}]: burst of {n} BucketClaims at once, then {n} BucketAccesses at once ({CREATORS} creates in flight)",
        mode.name()
    ));
    wait_quiet(run, QUIET, QUIET_MAX).await?;
    let snap = run.api.snapshot().await?;
    let cpu0 = run.cpu(Some(ctl));
    let t0 = Instant::now();
    each(&claims, CREATORS, |c| async move {
        create_claim(client, mode, ns, &c).await
    })
    .await?;
    let timeout = Duration::from_secs(120.max(n as u64));
    let last = tracks.claims.all_ready(ns, &claims, timeout).await?;
    let claims_took = last.duration_since(t0);
    let t1 = Instant::now();
    each(&claims, CREATORS, |c| async move {
        let i: usize = c.trim_start_matches("bc-").parse()?;
        create_access(client, mode, ns, &access_name(i), std::slice::from_ref(&c)).await
    })
    .await?;
    tracks.accesses.all_ready(ns, &accesses, timeout).await?;
    let secrets: Vec<String> = accesses
        .iter()
        .map(|a| super::objects::secret_name(a))
        .collect();
    let last = tracks.secrets.all_ready(ns, &secrets, timeout).await?;
    let accesses_took = last.duration_since(t1);
    let load = loadavg();
    wait_quiet(run, QUIET, QUIET_MAX).await?;
    let cpu1 = run.cpu(Some(ctl));
    let delta = run.api.snapshot().await?.since(&snap);
    out(format!(
        "    all {n} claims ready {:.2} s after the first create ({:.1}/s); all {n} accesses granted {:.2} s after theirs ({:.1}/s); load average {load}",
        claims_took.as_secs_f64(),
        n as f64 / claims_took.as_secs_f64(),
        accesses_took.as_secs_f64(),
        n as f64 / accesses_took.as_secs_f64()
    ));
    out(format!(
        "    {} (controller = bench-controller; upstream's processes count as other processes)",
        cpu1.describe_since(&cpu0, run.cores)
    ));
    let own = [
        (resource(Kind::BucketClaim), "POST", n as f64),
        (resource(Kind::BucketAccess), "POST", n as f64),
    ];
    let own: Vec<(&str, &str, f64)> = own.iter().map(|(r, v, n)| (r.as_str(), *v, *n)).collect();
    let per_pair = print_cost("requests per claim + access pair", &others(&delta, &own), n);

    if !mode.deletes_complete() {
        return Ok(Burst {
            claims: claims_took,
            accesses: accesses_took,
            deleted: Duration::ZERO,
            per_pair,
            load,
        });
    }
    let t2 = Instant::now();
    // Accesses first, claims once no access names them (the order a user
    // is told to follow; a claim still named by an access is refused).
    each(&accesses, CREATORS, |a| async move {
        delete(client, Kind::BucketAccess, ns, &a).await
    })
    .await?;
    let waited = tracks.accesses.none_left(ns, "", timeout).await;
    let accesses_gone = left(client, Kind::BucketAccess, waited, ns).await?;
    each(&claims, CREATORS, |c| async move {
        delete(client, Kind::BucketClaim, ns, &c).await
    })
    .await?;
    let waited = tracks.claims.none_left(ns, "", timeout).await;
    let gone = [
        accesses_gone,
        left(client, Kind::BucketClaim, waited, ns).await?,
        tracks.secrets.none_left(ns, "", timeout).await?,
    ];
    let deleted = gone.into_iter().max().unwrap_or(t2).duration_since(t2);
    out(format!(
        "    deleted at once: every access, claim and Secret gone {:.2} s after the first delete",
        deleted.as_secs_f64()
    ));
    Ok(Burst {
        claims: claims_took,
        accesses: accesses_took,
        deleted,
        per_pair,
        load,
    })
}

/// `waited`, or its error with the status of each object of `kind` left
/// in `ns`.
async fn left(client: &Client, kind: Kind, waited: Result<Instant>, ns: &str) -> Result<Instant> {
    let Err(e) = waited else {
        return waited;
    };
    let list = obc_tests::cosi_e2e::api(client, kind, ns)
        .list(&Default::default())
        .await?;
    let states: Vec<String> = list
        .items
        .iter()
        .map(|o| {
            format!(
                "{}: finalizers {:?}, deleting {}, status {}",
                o.metadata.name.clone().unwrap_or_default(),
                o.metadata.finalizers,
                o.metadata.deletion_timestamp.is_some(),
                o.data["status"]
            )
        })
        .collect();
    Err(e.context(format!("{kind:?}s left in {ns}: {}", states.join("; "))))
}

/// Fails unless nothing is left: claims, accesses and Secrets in
/// `namespaces`, and Buckets.
pub async fn check_clean(tracks: &Tracks, namespaces: &[&str]) -> Result<()> {
    for ns in namespaces {
        for t in [&tracks.claims, &tracks.accesses, &tracks.secrets] {
            t.none_left(ns, "", Duration::from_secs(60)).await?;
        }
    }
    let left = tracks.buckets.live("", "");
    tracks
        .buckets
        .none_left("", "", Duration::from_secs(60))
        .await
        .map_err(|e| e.context(format!("Buckets left after cleanup: {left:?}")))?;
    Ok(())
}
