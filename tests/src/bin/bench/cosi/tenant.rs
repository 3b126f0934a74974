//! Issue 36 item 6, measured: tenant A edits (annotates) one BucketAccess
//! naming K claims in a tight loop, while tenant B creates claims one by
//! one. What one edit costs the apiserver, and B's latency against B's
//! latency without the loop, and against a loop of the same edits on a
//! ConfigMap no controller watches (the share of the slowdown that is the
//! edits' own apiserver work, not the controller's).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::Result;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use obc_tests::cosi_e2e::{self, Kind};

use super::count::{Cost, others, print_cost, wait_quiet};
use super::modes::Mode;
use super::objects::{Tracks, annotate, claim_name, create_access, create_claim, delete, each};
use super::phases::Tails;
use crate::CREATORS;
use crate::report::{header, loadavg, ms, out, percentile};
use crate::run::Run;

/// The sizes of the tenant loop.
#[derive(Clone, Copy, Debug)]
pub struct Sizes {
    /// Claims tenant A's access names.
    pub k: usize,
    /// Claims tenant B creates one by one, per measurement.
    pub m: usize,
    /// How long A loops alone (for the cost per edit).
    pub seconds: u64,
}

/// What the tenant loop measured.
#[derive(Clone, Debug, Default)]
pub struct TenantLoop {
    /// A's edits per second, looping alone.
    pub edit_rate: f64,
    /// Requests per edit, the edit itself taken out.
    pub per_edit: Cost,
    /// B's claim → readyToUse without a loop, during A's BucketAccess loop,
    /// during the same loop on a ConfigMap.
    pub b_quiet: Tails,
    pub b_loop: Tails,
    pub b_control: Tails,
    pub load: String,
}

const ACCESS: &str = "many";
const CONTROL: &str = "control";

/// Runs the tenant loop in `ns_a` and `ns_b`.
pub async fn tenant_loop(
    run: &Run,
    tracks: &Tracks,
    mode: Mode,
    (ns_a, ns_b): (&str, &str),
    sizes: Sizes,
) -> Result<TenantLoop> {
    let client = &run.client;
    let Sizes { k, m, seconds } = sizes;
    header(&format!(
        "COSI [{}]: tenant loop: A edits one BucketAccess naming {k} claims in a loop; B creates {m} claims one by one",
        mode.name()
    ));
    let a_claims: Vec<String> = (0..k).map(claim_name).collect();
    each(&a_claims, CREATORS, |c| async move {
        create_claim(client, mode, ns_a, &c).await
    })
    .await?;
    tracks
        .claims
        .all_ready(ns_a, &a_claims, super::objects::T * 2)
        .await?;
    create_access(client, mode, ns_a, ACCESS, &a_claims).await?;
    tracks.access_ready(ns_a, ACCESS).await?;
    let cm: ConfigMap = serde_json::from_value(serde_json::json!({"metadata": {"name": CONTROL}}))?;
    Api::<ConfigMap>::namespaced(client.clone(), ns_a)
        .create(&PostParams::default(), &cm)
        .await?;
    let access_api = cosi_e2e::api(client, Kind::BucketAccess, ns_a);
    let cm_api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), ns_a, &ApiResource::erase::<ConfigMap>(&()));
    let mut t = TenantLoop::default();
    let mut next = 0usize;

    wait_quiet(run, Duration::from_secs(2), Duration::from_secs(120)).await?;
    t.b_quiet = b_claims(run, tracks, mode, ns_b, &mut next, m).await?;
    out(format!("    B without a loop: {}", show(&t.b_quiet)));

    // A alone: the cost of one edit.
    wait_quiet(run, Duration::from_secs(2), Duration::from_secs(120)).await?;
    let snap = run.api.snapshot().await?;
    let stop = AtomicBool::new(false);
    let edits = AtomicUsize::new(0);
    let started = Instant::now();
    let stopper = async {
        tokio::time::sleep(Duration::from_secs(seconds)).await;
        stop.store(true, Ordering::Relaxed);
        Ok(())
    };
    tokio::try_join!(edit_loop(&access_api, ACCESS, &stop, &edits), stopper)?;
    let looped = started.elapsed();
    wait_quiet(run, Duration::from_secs(2), Duration::from_secs(300)).await?;
    let settled = started.elapsed();
    let delta = run.api.snapshot().await?.since(&snap);
    let e = edits.load(Ordering::Relaxed);
    t.edit_rate = e as f64 / looped.as_secs_f64();
    out(format!(
        "    A alone: {e} edits in {:.1} s ({:.0}/s); the apiserver was quiet again {:.1} s after the loop began",
        looped.as_secs_f64(),
        t.edit_rate,
        settled.as_secs_f64()
    ));
    let r = others(
        &delta,
        &[(
            &super::objects::resource(Kind::BucketAccess),
            "PATCH",
            e as f64,
        )],
    );
    t.per_edit = print_cost(
        "requests per tenant-A edit (the edit itself taken out)",
        &r,
        e.max(1),
    );

    // B during A's loop on the BucketAccess, then on a ConfigMap.
    for (target, api, into) in [
        (ACCESS, &access_api, &mut t.b_loop),
        (CONTROL, &cm_api, &mut t.b_control),
    ] {
        wait_quiet(run, Duration::from_secs(2), Duration::from_secs(300)).await?;
        let stop = AtomicBool::new(false);
        let edits = AtomicUsize::new(0);
        let b = async {
            let r = b_claims(run, tracks, mode, ns_b, &mut next, m).await;
            stop.store(true, Ordering::Relaxed);
            r
        };
        let (_, tails) = tokio::try_join!(edit_loop(api, target, &stop, &edits), b)?;
        *into = tails;
        out(format!(
            "    B while A edits {} ({} edits): {}",
            if target == ACCESS {
                "its BucketAccess"
            } else {
                "a ConfigMap (control)"
            },
            edits.load(Ordering::Relaxed),
            show(into)
        ));
    }
    t.load = loadavg();
    out(format!(
        "    B's p50 / p95 during the loop against without it: {:.2} / {:.2} (control loop on a ConfigMap: {:.2} / {:.2}); load average {}",
        ratio(t.b_loop[0], t.b_quiet[0]),
        ratio(t.b_loop[1], t.b_quiet[1]),
        ratio(t.b_control[0], t.b_quiet[0]),
        ratio(t.b_control[1], t.b_quiet[1]),
        t.load
    ));

    if !mode.deletes_complete() {
        return Ok(t);
    }
    // Cleanup.
    wait_quiet(run, Duration::from_secs(2), Duration::from_secs(300)).await?;
    delete(client, Kind::BucketAccess, ns_a, ACCESS).await?;
    tracks
        .accesses
        .gone(ns_a, ACCESS, super::objects::T)
        .await?;
    Api::<ConfigMap>::namespaced(client.clone(), ns_a)
        .delete(CONTROL, &Default::default())
        .await?;
    each(&a_claims, CREATORS, |c| async move {
        delete(client, Kind::BucketClaim, ns_a, &c).await
    })
    .await?;
    let b_all: Vec<String> = (0..next).map(claim_name).collect();
    each(&b_all, CREATORS, |c| async move {
        delete(client, Kind::BucketClaim, ns_b, &c).await
    })
    .await?;
    Ok(t)
}

/// `a / b`.
pub fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64().max(1e-9)
}

fn show(t: &Tails) -> String {
    format!(
        "claim -> readyToUse p50 {:.1} ms, p95 {:.1} ms",
        ms(t[0]),
        ms(t[1])
    )
}

/// Tenant A's loop: one annotation edit after another until `stop`.
async fn edit_loop(
    api: &Api<DynamicObject>,
    name: &str,
    stop: &AtomicBool,
    edits: &AtomicUsize,
) -> Result<()> {
    while !stop.load(Ordering::Relaxed) {
        let i = edits.fetch_add(1, Ordering::Relaxed);
        annotate(api, name, i).await?;
    }
    Ok(())
}

/// Tenant B: `m` claims one by one, numbered from `*next`.
async fn b_claims(
    run: &Run,
    tracks: &Tracks,
    mode: Mode,
    ns: &str,
    next: &mut usize,
    m: usize,
) -> Result<Tails> {
    let mut lat = Vec::with_capacity(m);
    for _ in 0..m {
        let c = claim_name(*next);
        *next += 1;
        let t0 = Instant::now();
        create_claim(&run.client, mode, ns, &c).await?;
        // B's latency is the figure, and a tenant loop may stretch it far:
        // only a claim never ready in 5 minutes fails the run.
        let ready = tracks.claims.ready(ns, &c, Duration::from_secs(300));
        lat.push(ready.await?.duration_since(t0));
    }
    lat.sort();
    Ok([0.50, 0.95, 0.99].map(|q| percentile(&lat, q)))
}
