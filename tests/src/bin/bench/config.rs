//! The command line: flags, their environment variables and defaults
//! ([`parse_config`]), and the bench-controller binary to run.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};

pub const USAGE: &str = "\
cargo run --release -p obc-tests --bin bench -- [--quick] [options]

  --quick              sanity run: 1,000 claims at restart, 100 one by one, bursts of 300
  --claims N           bound claims at the restart and memory figures (10,000)  [OBC_BENCH_CLAIMS]
  --latency-claims N   claims created one by one for bind latency (200)        [OBC_BENCH_LATENCY_CLAIMS]
  --burst N            claims created at once per concurrency (1,000)           [OBC_BENCH_BURST]
  --concurrency LIST   controller concurrencies to try (4,16,64)                [OBC_BENCH_CONCURRENCY]
  --raw N              ConfigMaps per raw create-rate baseline (2,000)          [OBC_BENCH_RAW]
  --controller PATH    the bench-controller binary (default: built next to this one)
                                                                                [OBC_BENCH_CONTROLLER]
  --warnings-only      the controller sends only Warning Events (EventLevel::WarningsOnly):
                       no Normal ones (Bound, BucketDeleted...)          [OBC_BENCH_WARNINGS_ONLY=1]
  --controller-manager run kube-controller-manager too (garbage collector...): the
                       writes counted are then the cluster's, not only the library's
                                                                                [OBC_BENCH_CONTROLLER_MANAGER=1]
At scale (alone: no other phase runs):
  --scale N            N bound claims seeded directly, then a restart over them,
                       memory per claim, bind latency while they are cached  [OBC_BENCH_SCALE]
COSI (after the OBC phases, on the same apiserver; also in --quick):
  --cosi               the COSI part only (no OBC phases)                       [OBC_BENCH_COSI=1]
  --no-cosi            the OBC phases only                                      [OBC_BENCH_COSI=0]
  --cosi-objects N     BucketClaims and BucketAccesses one by one (100; quick 20) [OBC_BENCH_COSI_OBJECTS]
  --cosi-burst N       claims and accesses at once (200; quick 30)              [OBC_BENCH_COSI_BURST]
  --cosi-loop-claims K claims tenant A's BucketAccess names (64; quick 16)      [OBC_BENCH_COSI_LOOP_CLAIMS]
  --cosi-tenant-claims M  tenant B's claims one by one, per measurement (50; quick 15)
                                                                                [OBC_BENCH_COSI_TENANT_CLAIMS]
  --cosi-loop-seconds T   tenant A's loop alone, for the cost per edit (15; quick 5)
                                                                                [OBC_BENCH_COSI_LOOP_SECONDS]
  --cosi-rounds N      the modes run N times in turn, each round against its own
                       in-process figures (1)                                   [OBC_BENCH_COSI_ROUNDS]
  --upstream-controller PATH, --upstream-sidecar PATH
                       upstream's COSI controller and sidecar (built by hand, see
                       docs/performance.md): also run the COSI part with them
                                                                                [OBC_BENCH_UPSTREAM_CONTROLLER, OBC_BENCH_UPSTREAM_SIDECAR]
See docs/performance.md.";

pub struct Config {
    pub quick: bool,
    pub controller_manager: bool,
    /// The controllers run with `--warnings-only`.
    pub warnings_only: bool,
    pub claims: usize,
    pub latency_claims: usize,
    pub burst: usize,
    pub concurrency: Vec<u16>,
    pub raw: usize,
    pub controller: Option<PathBuf>,
    /// Run the OBC phases.
    pub obc: bool,
    /// The COSI part, if it runs.
    pub cosi: Option<crate::cosi::CosiConfig>,
    /// `--scale N`: the at-scale part alone, with N claims.
    pub scale: Option<usize>,
}

pub fn parse_config() -> Result<Config> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    let flag = |name: &str, var: &str| -> Result<Option<String>> {
        if let Some(i) = args.iter().position(|a| a == name) {
            return args
                .get(i + 1)
                .cloned()
                .map(Some)
                .with_context(|| format!("{name} needs a value"));
        }
        Ok(std::env::var(var).ok().filter(|v| !v.is_empty()))
    };
    let number = |name: &str, var: &str, full: usize, quick_value: usize| -> Result<usize> {
        match flag(name, var)? {
            Some(v) => v
                .replace(['_', ','], "")
                .parse()
                .with_context(|| format!("{name}: {v:?} is not a number")),
            None => Ok(if quick { quick_value } else { full }),
        }
    };
    for (i, a) in args.iter().enumerate() {
        let known_flag = [
            "--claims",
            "--latency-claims",
            "--burst",
            "--concurrency",
            "--raw",
            "--controller",
            "--cosi-objects",
            "--cosi-burst",
            "--cosi-loop-claims",
            "--cosi-tenant-claims",
            "--cosi-loop-seconds",
            "--cosi-rounds",
            "--upstream-controller",
            "--upstream-sidecar",
            "--scale",
        ];
        let is_value = i > 0 && known_flag.contains(&args[i - 1].as_str());
        let switch = [
            "--quick",
            "--controller-manager",
            "--warnings-only",
            "--cosi",
            "--no-cosi",
        ]
        .contains(&a.as_str());
        if !is_value && !switch && !known_flag.contains(&a.as_str()) {
            if a == "-h" || a == "--help" {
                println!("{USAGE}");
                std::process::exit(0);
            }
            bail!("unknown argument {a:?} (see --help)");
        }
    }
    let concurrency = match flag("--concurrency", "OBC_BENCH_CONCURRENCY")? {
        Some(list) => list
            .split(',')
            .map(|c| {
                c.trim()
                    .parse::<u16>()
                    .with_context(|| format!("--concurrency: {c:?} is not a number"))
            })
            .collect::<Result<Vec<_>>>()?,
        None => vec![4, 16, 64],
    };
    if concurrency.is_empty() || concurrency.contains(&0) {
        bail!("--concurrency: give one or more numbers above 0");
    }
    // A switch is on when given, or when its variable is "1".
    let on = |flag: &str, var: &str| {
        args.iter().any(|a| a == flag) || std::env::var(var).is_ok_and(|v| v == "1")
    };
    let controller_manager = on("--controller-manager", "OBC_BENCH_CONTROLLER_MANAGER");
    let cosi_env = std::env::var("OBC_BENCH_COSI").ok();
    let cosi_only = args.iter().any(|a| a == "--cosi") || cosi_env.as_deref() == Some("1");
    let no_cosi = args.iter().any(|a| a == "--no-cosi") || cosi_env.as_deref() == Some("0");
    if cosi_only && no_cosi {
        bail!("--cosi and --no-cosi exclude each other");
    }
    let path = |name: &str, var: &str| -> Result<Option<PathBuf>> {
        let Some(p) = flag(name, var)? else {
            return Ok(None);
        };
        let p = PathBuf::from(p);
        if !p.is_file() {
            bail!("{name}: {} is not a file", p.display());
        }
        Ok(Some(p))
    };
    let upstream = match (
        path("--upstream-controller", "OBC_BENCH_UPSTREAM_CONTROLLER")?,
        path("--upstream-sidecar", "OBC_BENCH_UPSTREAM_SIDECAR")?,
    ) {
        (Some(controller), Some(sidecar)) => Some(crate::cosi::Upstream {
            controller,
            sidecar,
        }),
        (None, None) => None,
        _ => bail!("--upstream-controller and --upstream-sidecar go together"),
    };
    let cosi = (!no_cosi)
        .then(|| -> Result<crate::cosi::CosiConfig> {
            Ok(crate::cosi::CosiConfig {
                serial: number("--cosi-objects", "OBC_BENCH_COSI_OBJECTS", 100, 20)?,
                burst: number("--cosi-burst", "OBC_BENCH_COSI_BURST", 200, 30)?,
                tenant: crate::cosi::LoopSizes {
                    k: number("--cosi-loop-claims", "OBC_BENCH_COSI_LOOP_CLAIMS", 64, 16)?,
                    m: number(
                        "--cosi-tenant-claims",
                        "OBC_BENCH_COSI_TENANT_CLAIMS",
                        50,
                        15,
                    )?,
                    seconds: number("--cosi-loop-seconds", "OBC_BENCH_COSI_LOOP_SECONDS", 15, 5)?
                        as u64,
                },
                upstream,
                rounds: number("--cosi-rounds", "OBC_BENCH_COSI_ROUNDS", 1, 1)?,
            })
        })
        .transpose()?;
    if let Some(c) = &cosi
        && (c.serial == 0
            || c.burst == 0
            || c.tenant.k == 0
            || c.tenant.k > 128
            || c.tenant.m == 0
            || c.rounds == 0)
    {
        bail!(
            "the COSI sizes and rounds must be above 0 (and --cosi-loop-claims at most 128, COSI's limit)"
        );
    }
    let scale = flag("--scale", "OBC_BENCH_SCALE")?
        .map(|v| {
            v.replace(['_', ','], "")
                .parse::<usize>()
                .with_context(|| format!("--scale: {v:?} is not a number"))
        })
        .transpose()?;
    if scale.is_some_and(|n| n < 2) {
        bail!("--scale: give 2 claims or more");
    }
    let config = Config {
        obc: !cosi_only && scale.is_none(),
        cosi: cosi.filter(|_| scale.is_none()),
        scale,
        quick,
        controller_manager,
        warnings_only: on("--warnings-only", "OBC_BENCH_WARNINGS_ONLY"),
        claims: number("--claims", "OBC_BENCH_CLAIMS", 10_000, 1_000)?,
        latency_claims: number("--latency-claims", "OBC_BENCH_LATENCY_CLAIMS", 200, 100)?,
        burst: number("--burst", "OBC_BENCH_BURST", 1_000, 300)?,
        concurrency,
        raw: number("--raw", "OBC_BENCH_RAW", 2_000, 500)?,
        controller: flag("--controller", "OBC_BENCH_CONTROLLER")?.map(PathBuf::from),
    };
    if config.latency_claims == 0 || config.burst == 0 || config.raw == 0 {
        bail!("--latency-claims, --burst and --raw must be above 0");
    }
    Ok(config)
}

/// The bench-controller binary: the one given, else built by cargo (when run
/// through cargo) next to this binary, with the same profile.
pub fn controller_binary(config: &Config) -> Result<PathBuf> {
    if let Some(p) = &config.controller {
        if !p.is_file() {
            bail!("bench-controller not found at {}", p.display());
        }
        return Ok(p.clone());
    }
    let exe = std::env::current_exe().context("locating this binary")?;
    let sibling = exe
        .parent()
        .context("this binary has no directory")?
        .join("bench-controller");
    if let Ok(cargo) = std::env::var("CARGO") {
        let mut cmd = std::process::Command::new(cargo);
        cmd.args([
            "build",
            "-q",
            "-p",
            "obc-tests",
            "--bin",
            "bench-controller",
        ]);
        if !cfg!(debug_assertions) {
            cmd.arg("--release");
        }
        println!("building bench-controller: {cmd:?}");
        let status = cmd.status().context("running cargo build")?;
        if !status.success() {
            bail!("cargo build of bench-controller failed ({status})");
        }
    }
    if !sibling.is_file() {
        bail!(
            "{} is missing: run `cargo build --release -p obc-tests --bins`, or pass --controller PATH",
            sibling.display()
        );
    }
    Ok(sibling)
}
