//! The COSI part (`--cosi`, issues 36 and 37): on the same apiserver as
//! the OBC phases, for each mode ([`modes::Mode`]: this project
//! in-process, and when upstream's binaries are given, upstream's
//! controller + sidecar and this project's binding role behind upstream's
//! sidecar, both driving the no-op provisioner over gRPC): claims and
//! accesses one by one, a burst, requests per object, and the tenant loop.
//! The figures are printed per mode and side by side at the end, as ratios
//! against the in-process mode. See docs/performance.md, "COSI".

mod count;
mod modes;
mod objects;
mod phases;
mod tenant;
mod track;

use anyhow::{Context, Result};
use obc_tests::cosi_e2e::install_cosi_crds;

use crate::report::{header, ms, out};
use crate::run::Run;
use modes::{Mode, Serving};
use objects::Tracks;
use phases::{Burst, Serial};
use tenant::TenantLoop;

pub use modes::Upstream;
pub use tenant::Sizes as LoopSizes;

/// The COSI part's sizes and upstream's binaries.
#[derive(Clone, Debug)]
pub struct CosiConfig {
    /// Claims (and accesses) one by one.
    pub serial: usize,
    /// Claims (and accesses) in the burst.
    pub burst: usize,
    pub tenant: LoopSizes,
    pub upstream: Option<Upstream>,
    /// How many times the modes run, in turn (a mode's figures may depend
    /// on its place in the run: the second round says whether they do).
    pub rounds: usize,
}

/// One mode's figures.
pub struct ModeFigures {
    pub mode: Mode,
    /// Which round of the modes, from 1.
    pub round: usize,
    pub serial: Serial,
    pub burst: Burst,
    pub tenant: TenantLoop,
}

/// Runs the COSI part; fails on any object not ready or not gone in time.
pub async fn cosi(run: &mut Run, config: &CosiConfig) -> Result<Vec<ModeFigures>> {
    header("COSI: setup");
    install_cosi_crds(&run.env).await?;
    run.env.ensure_namespace("bench-cosi-no-obc").await?;
    let tracks = Tracks::spawn(&run.client).await?;
    let mut modes = vec![Mode::InProcess];
    if config.upstream.is_some() {
        modes.extend([Mode::Upstream, Mode::OursBehindSidecar]);
    } else {
        out(
            "    upstream's controller and sidecar not given (--upstream-controller, --upstream-sidecar): in-process mode only",
        );
    }
    let mut figures = Vec::new();
    for round in 1..=config.rounds {
        for &mode in &modes {
            let result = one_mode(run, &tracks, (mode, round), config).await;
            figures.push(result.with_context(|| format!("COSI mode {}", label(mode, round)))?);
        }
    }
    tracks.stop();
    print_summary(&figures);
    Ok(figures)
}

/// A mode's name, with its round after the first.
fn label(mode: Mode, round: usize) -> String {
    match round {
        1 => mode.name().to_owned(),
        n => format!("{}#{n}", mode.name()),
    }
}

async fn one_mode(
    run: &mut Run,
    tracks: &Tracks,
    (mode, round): (Mode, usize),
    config: &CosiConfig,
) -> Result<ModeFigures> {
    header(&format!(
        "COSI [{}]: {}",
        label(mode, round),
        mode.describe()
    ));
    if round == 1 {
        objects::create_classes(&run.client, mode).await?;
    }
    let ns = |what: &str| match round {
        1 => format!("cosi-{}-{what}", mode.name()),
        n => format!("cosi-{}-r{n}-{what}", mode.name()),
    };
    let (serial_ns, burst_ns, a_ns, b_ns) =
        (ns("serial"), ns("burst"), ns("tenant-a"), ns("tenant-b"));
    for n in [&serial_ns, &burst_ns, &a_ns, &b_ns] {
        run.env.ensure_namespace(n).await?;
    }
    let namespaces = [&*serial_ns, &*burst_ns, &*a_ns, &*b_ns];
    let mut serving = Serving::start(run, mode, config.upstream.as_ref()).await?;
    let result = async {
        phases::warm_up(&run.client, tracks, mode, &serial_ns).await?;
        let serial = phases::serial(run, tracks, mode, &serial_ns, config.serial).await?;
        let burst = phases::burst(run, &serving.ctl, tracks, mode, &burst_ns, config.burst).await?;
        let tenant = tenant::tenant_loop(run, tracks, mode, (&a_ns, &b_ns), config.tenant).await?;
        if mode.deletes_complete() {
            // While the controller still runs: the tenant loop's last
            // deletions may be under way.
            phases::check_clean(tracks, &namespaces).await?;
        }
        serving.check_running()?;
        Ok::<_, anyhow::Error>(ModeFigures {
            mode,
            round,
            serial,
            burst,
            tenant,
        })
    }
    .await;
    serving.stop().await?;
    if !mode.deletes_complete() {
        let n = objects::strip_all(&run.client, &namespaces).await?;
        out(format!(
            "    {n} objects deleted by the benchmark with their finalizers removed (upstream's deletion does not finish)"
        ));
    }
    let figures = result?;
    if !mode.deletes_complete() {
        phases::check_clean(tracks, &namespaces).await?;
    }
    out(format!(
        "    COSI [{}]: everything ready, and everything gone after cleanup",
        label(mode, round)
    ));
    Ok(figures)
}

/// The figures side by side, and each against the in-process mode of the
/// same round.
fn print_summary(figures: &[ModeFigures]) {
    header("COSI summary (ratio: the mode's figure / in-process's, same run and round)");
    let base = |f: &ModeFigures| {
        figures
            .iter()
            .find(|b| b.mode == Mode::InProcess && b.round == f.round)
    };
    let names: Vec<String> = figures.iter().map(|f| label(f.mode, f.round)).collect();
    out(format!("    {:<52} {}", "figure", names.join(" | ")));
    let row = |label: &str, get: &dyn Fn(&ModeFigures) -> f64, unit: &str| {
        let cells: Vec<String> = figures
            .iter()
            .map(|f| {
                let v = get(f);
                match base(f).filter(|b| b.mode != f.mode) {
                    Some(b) => format!("{v:.1}{unit} (x{:.2})", v / get(b).max(1e-9)),
                    None => format!("{v:.1}{unit}"),
                }
            })
            .collect();
        out(format!("    {label:<52} {}", cells.join(" | ")));
    };
    let s = |f: &ModeFigures| f.serial.clone();
    row(
        "claim -> readyToUse p50",
        &|f| ms(s(f).claim_ready[0]),
        " ms",
    );
    row(
        "claim -> readyToUse p95",
        &|f| ms(s(f).claim_ready[1]),
        " ms",
    );
    row(
        "claim -> readyToUse p99",
        &|f| ms(s(f).claim_ready[2]),
        " ms",
    );
    row(
        "access -> granted + Secret p50",
        &|f| ms(s(f).access_ready[0]),
        " ms",
    );
    row(
        "access -> granted + Secret p95",
        &|f| ms(s(f).access_ready[1]),
        " ms",
    );
    row(
        "access -> granted + Secret p99",
        &|f| ms(s(f).access_ready[2]),
        " ms",
    );
    row(
        "access deleted -> gone p50",
        &|f| ms(s(f).access_gone[0]),
        " ms",
    );
    row(
        "claim deleted -> gone p50",
        &|f| ms(s(f).claim_gone[0]),
        " ms",
    );
    row(
        "requests per BucketClaim: reads",
        &|f| s(f).per_claim.reads,
        "",
    );
    row(
        "requests per BucketClaim: writes",
        &|f| s(f).per_claim.writes,
        "",
    );
    row("requests per grant: reads", &|f| s(f).per_grant.reads, "");
    row("requests per grant: writes", &|f| s(f).per_grant.writes, "");
    row(
        "requests per access deletion: reads",
        &|f| s(f).per_access_delete.reads,
        "",
    );
    row(
        "requests per access deletion: writes",
        &|f| s(f).per_access_delete.writes,
        "",
    );
    row(
        "requests per claim deletion: reads",
        &|f| s(f).per_claim_delete.reads,
        "",
    );
    row(
        "requests per claim deletion: writes",
        &|f| s(f).per_claim_delete.writes,
        "",
    );
    row(
        "burst: all claims ready",
        &|f| f.burst.claims.as_secs_f64(),
        " s",
    );
    row(
        "burst: all accesses granted",
        &|f| f.burst.accesses.as_secs_f64(),
        " s",
    );
    row(
        "burst: all deleted at once -> gone",
        &|f| f.burst.deleted.as_secs_f64(),
        " s",
    );
    row(
        "burst: requests per claim + access",
        &|f| f.burst.per_pair.total(),
        "",
    );
    row(
        "tenant A: requests per edit (reads)",
        &|f| f.tenant.per_edit.reads,
        "",
    );
    row(
        "tenant A: requests per edit (writes)",
        &|f| f.tenant.per_edit.writes,
        "",
    );
    row("tenant A: edits per second", &|f| f.tenant.edit_rate, "");
    row(
        "tenant B p50 during loop / without",
        &|f| tenant::ratio(f.tenant.b_loop[0], f.tenant.b_quiet[0]),
        "",
    );
    row(
        "tenant B p95 during loop / without",
        &|f| tenant::ratio(f.tenant.b_loop[1], f.tenant.b_quiet[1]),
        "",
    );
    row(
        "tenant B p50 during ConfigMap loop / without",
        &|f| tenant::ratio(f.tenant.b_control[0], f.tenant.b_quiet[0]),
        "",
    );
    for f in figures {
        out(format!(
            "    [{}] load average after the one-by-one phases {}, after the burst {}, after the tenant loop {}",
            label(f.mode, f.round),
            f.serial.load,
            f.burst.load,
            f.tenant.load
        ));
    }
}
