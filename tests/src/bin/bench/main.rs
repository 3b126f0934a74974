//! Benchmarks of the library against the real local control plane (etcd +
//! kube-apiserver of the test environment), with the controller in its own
//! process (`bench-controller`) and a provisioner that does nothing, so the
//! figures are the library's and the apiserver's, not an object store's.
//!
//! ```text
//! cargo run --release -p obc-tests --bin bench             # full run (10,000 claims at restart)
//! cargo run --release -p obc-tests --bin bench -- --quick  # sanity run (1,000)
//! ```
//!
//! What it measures, and what bounds each figure: docs/performance.md.
//! Options (flags, or the environment variables in brackets):
//!
//! * `--claims N` [`OBC_BENCH_CLAIMS`]: bound claims at the restart (10,000; quick 1,000)
//! * `--latency-claims N` [`OBC_BENCH_LATENCY_CLAIMS`]: claims created one by one (200; quick 100)
//! * `--burst N` [`OBC_BENCH_BURST`]: claims created at once per concurrency (1,000; quick 300)
//! * `--concurrency 4,16,64` [`OBC_BENCH_CONCURRENCY`]: controller concurrencies to try
//! * `--raw N` [`OBC_BENCH_RAW`]: ConfigMaps per raw-create baseline (2,000; quick 500)
//! * `--controller-manager` [`OBC_BENCH_CONTROLLER_MANAGER=1`]: run
//!   kube-controller-manager too, so the API writes are the cluster's (its
//!   garbage collector's deletes of the claims' Secrets and ConfigMaps among
//!   them), not only the library's
//! * `--controller PATH` [`OBC_BENCH_CONTROLLER`]: the bench-controller binary (default:
//!   built with cargo next to this binary)
//! * COSI (issues 36 and 37, module [`cosi`]): after the OBC phases, on the
//!   same apiserver, in full and quick runs; `--cosi` runs it alone,
//!   `--no-cosi` leaves it out; sizes `--cosi-objects`, `--cosi-burst`,
//!   `--cosi-loop-claims`, `--cosi-tenant-claims`, `--cosi-loop-seconds`;
//!   `--cosi-rounds N` runs the modes N times in turn;
//!   `--upstream-controller PATH --upstream-sidecar PATH` compare with
//!   upstream's COSI controller and sidecar (see `scripts/bench-cosi-upstream`)
//! * `--scale N` [`OBC_BENCH_SCALE`]: alone, N bound claims seeded directly
//!   (module [`seed`]), a restart over them, memory per claim and bind
//!   latency while they are cached (module [`at_scale`])

mod apiserver;
mod at_scale;
mod baseline;
mod claims;
mod config;
mod cosi;
mod ctl;
mod latency;
mod prom;
mod report;
mod run;
mod scale;
mod seed;
mod throughput;

use std::collections::BTreeMap;
use std::time::Instant;

use anyhow::Result;
use obc_tests::setup::{create_class, start_with_crds};

use apiserver::Apiserver;
use baseline::RECORD_CRD;
use claims::Tracker;
use config::{Config, controller_binary, parse_config};
use report::{Summary, header, machine, out, print_summary};
use run::Run;

/// The provisioner name `bench-controller` serves.
const PROVISIONER: &str = "bench.objectbucket.io/noop";
/// The library's default concurrency: used where concurrency is not the subject.
const DEFAULT_CONCURRENCY: u16 = 4;
/// How many claims the benchmark creates at once (its own client).
const CREATORS: usize = 32;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .init();
    let config = parse_config()?;
    let bin = controller_binary(&config)?;
    let started = Instant::now();

    header("machine");
    for l in machine() {
        out(format!("    {l}"));
    }
    if cfg!(debug_assertions) {
        out("    WARNING: debug build; run with --release for representative figures");
    }
    out(format!(
        "    mode: {}; latency claims {}, burst {}, concurrency {:?}, raw ConfigMaps {}, restart claims {}",
        if config.quick { "quick" } else { "full" },
        config.latency_claims,
        config.burst,
        config.concurrency,
        config.raw,
        config.claims
    ));
    if let Some(c) = &config.cosi {
        out(format!(
            "    COSI: {} round(s); {} objects one by one, burst {}, tenant loop: {} claims in A's access, {} B claims per measurement, A alone {} s; upstream: {}{}",
            c.rounds,
            c.serial,
            c.burst,
            c.tenant.k,
            c.tenant.m,
            c.tenant.seconds,
            c.upstream
                .as_ref()
                .map_or("not given".to_owned(), |u| format!(
                    "{} + {}",
                    u.controller.display(),
                    u.sidecar.display()
                )),
            if config.obc { "" } else { " (COSI part only)" }
        ));
    }

    let env = start_with_crds().await?;
    out(format!(
        "    test environment: kube-apiserver {} (etcd --unsafe-no-fsync), ready in {:.1?}",
        env.apiserver_url(),
        env.startup_timings().total
    ));
    let client = env.admin_client();
    create_class(
        &client,
        claims::CLASS,
        PROVISIONER,
        "Delete",
        BTreeMap::<String, String>::new(),
    )
    .await?;
    env.install_crds(RECORD_CRD).await?;
    if config.controller_manager {
        // After the CRDs: its garbage collector discovers resource types at start.
        let took = env.start_controller_manager().await?;
        out(format!(
            "    kube-controller-manager ({}): ready in {:.1?}; its writes are counted below",
            obc_tests::testenv::CONTROLLERS.join(", "),
            took.healthz + took.garbage_collector
        ));
    }
    for ns in ["bench-serial"] {
        env.ensure_namespace(ns).await?;
    }
    let api = Apiserver::new(&env)?;
    let tracker = Tracker::spawn(client.clone()).await?;
    let (apiserver_pid, etcd_pid) = ctl::control_plane_pids(env.dir());
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut run = Run {
        env,
        client,
        api,
        tracker,
        bin,
        apiserver_pid,
        etcd_pid,
        cores,
        logs: 0,
        controller_args: if config.warnings_only {
            vec!["--warnings-only"]
        } else {
            Vec::new()
        },
    };
    // On Ctrl-C or SIGTERM the phases are dropped and `run` with them, so
    // the control plane and the controllers it started are torn down.
    let outcome = tokio::select! {
        outcome = phases(&mut run, &config) => outcome,
        signal = interrupted() => Err(signal),
    };
    run.tracker.stop();
    let summary = match outcome {
        Ok(s) => s,
        Err(e) => {
            out(format!(
                "benchmark failed; controller logs were in {} (set OBC_KEEP_TESTENV=1 to keep them)",
                run.env.dir().display()
            ));
            return Err(e);
        }
    };
    if let Some(summary) = &summary {
        print_summary(summary);
    }
    out(format!(
        "\nbenchmark took {:.0} s",
        started.elapsed().as_secs_f64()
    ));
    Ok(())
}

/// The OBC phases, COSI's and `--scale`'s, as configured; the OBC summary
/// if the OBC phases ran.
async fn phases(run: &mut Run, config: &Config) -> Result<Option<Summary>> {
    let summary = match config.obc {
        true => Some(benchmark(run, config).await?),
        false => None,
    };
    if let Some(c) = &config.cosi {
        cosi::cosi(run, c).await?;
    }
    if let Some(n) = config.scale {
        let s = at_scale::at_scale(run, n, config.latency_claims).await?;
        at_scale::print_summary(&s);
    }
    Ok(summary)
}

/// Resolves on the first Ctrl-C or SIGTERM, with the error to end on.
async fn interrupted() -> anyhow::Error {
    use tokio::signal::unix::{SignalKind, signal};
    let term = async {
        match signal(SignalKind::terminate()) {
            Ok(mut s) => s.recv().await,
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => anyhow::anyhow!("interrupted (Ctrl-C)"),
        _ = term => anyhow::anyhow!("interrupted (SIGTERM)"),
    }
}

/// The phases in order: memory with no claim, bind latency, deletes,
/// throughput per concurrency, fill-up, restart, memory breakdown.
async fn benchmark(run: &mut Run, config: &Config) -> Result<Summary> {
    let latency::Baseline {
        mut ctl,
        mem0,
        probe0,
    } = latency::memory_baseline(run).await?;
    let n = config.latency_claims;
    let provision = latency::bind_latency(run, &mut ctl, n).await?;
    let writes_delete = latency::deletes(run, ctl, n, provision.counts).await?;
    let (throughput, existing) = throughput::throughput(run, config, provision.writes).await?;
    let total = scale::fill_up(run, config, existing).await?;
    let restart = scale::restart(run, total, &mem0).await?;
    scale::memory_breakdown(run, total, (&probe0, &mem0, &restart.mem_n), true).await?;
    Ok(Summary {
        p50: provision.p50,
        p95: provision.p95,
        p99: provision.p99,
        writes_provision: provision.writes,
        writes_delete,
        throughput,
        restart_claims: total,
        restart_idle: restart.idle.after,
        restart_provisions: restart.provisions,
        restart_writes: restart.writes,
        mem0,
        mem_n: restart.mem_n,
    })
}
