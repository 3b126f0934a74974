//! Who serves COSI in a mode, and starting and stopping those processes:
//! this project's controller in-process (binding and driver roles), or
//! upstream's controller and sidecar (built by hand, see
//! docs/performance.md) driving `bench-controller`'s gRPC driver, or this
//! project's binding role beside upstream's sidecar and the gRPC driver.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::process::{Child, Command};

use crate::DEFAULT_CONCURRENCY;
use crate::ctl::Controller;
use crate::run::Run;

/// The driver the in-process mode serves.
pub const INPROCESS_DRIVER: &str = "inproc.bench.objectbucket.io";
/// The driver `bench-controller --cosi-grpc` serves behind upstream's sidecar.
pub const GRPC_DRIVER: &str = "grpc.bench.objectbucket.io";
/// A driver nobody's BucketClass names: the in-process binding role runs
/// for every driver, its driver role for this one, which has no Buckets.
const UNUSED_DRIVER: &str = "unused.bench.objectbucket.io";

/// Who serves COSI.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `bench-controller --cosi`: binding and driver roles in one process.
    InProcess,
    /// Upstream's controller and sidecar, the no-op provisioner behind
    /// `bench-controller`'s gRPC driver.
    Upstream,
    /// This project's binding role; upstream's sidecar in front of the
    /// gRPC driver.
    OursBehindSidecar,
}

impl Mode {
    /// A short name for headers, namespaces and classes.
    pub fn name(self) -> &'static str {
        match self {
            Self::InProcess => "inprocess",
            Self::Upstream => "upstream",
            Self::OursBehindSidecar => "sidecar",
        }
    }

    /// What runs, in words.
    pub fn describe(self) -> &'static str {
        match self {
            Self::InProcess => "this project in-process (binding + driver role, one process)",
            Self::Upstream => {
                "upstream's controller + upstream's sidecar + this project's gRPC driver (no-op)"
            }
            Self::OursBehindSidecar => {
                "this project's binding role + upstream's sidecar + this project's gRPC driver (no-op)"
            }
        }
    }

    /// The driver its classes name.
    pub fn driver(self) -> &'static str {
        match self {
            Self::InProcess => INPROCESS_DRIVER,
            Self::Upstream | Self::OursBehindSidecar => GRPC_DRIVER,
        }
    }

    /// Whether deletions run to the end. Not with upstream's sidecar at
    /// `ee00c269`: its Bucket deletion is a stub (the Bucket's finalizer
    /// stays, so nothing is deleted in the store), and with upstream's
    /// controller a deleted BucketAccess keeps its finalizer for good. The
    /// deletion phases are then skipped, and the benchmark removes what is
    /// left by stripping finalizers.
    pub fn deletes_complete(self) -> bool {
        self == Self::InProcess
    }
}

/// Upstream's two binaries.
#[derive(Clone, Debug)]
pub struct Upstream {
    pub controller: PathBuf,
    pub sidecar: PathBuf,
}

/// The processes of a running mode.
pub struct Serving {
    /// `bench-controller` (in-process COSI, or the gRPC driver).
    pub ctl: Controller,
    /// Upstream's processes, if any: (name, child).
    upstream: Vec<(&'static str, Child)>,
}

impl Serving {
    /// Starts what `mode` needs; returns once `bench-controller` is ready
    /// and upstream's processes had 3 s to list their caches (the phases
    /// start with a warm-up object anyway).
    pub async fn start(run: &mut Run, mode: Mode, upstream: Option<&Upstream>) -> Result<Self> {
        let socket = run.env.dir().join(format!("cosi-{}.sock", mode.name()));
        let socket_arg = socket.to_string_lossy().into_owned();
        let args: Vec<&str> = match mode {
            Mode::InProcess => vec!["--cosi", INPROCESS_DRIVER],
            Mode::Upstream => vec![
                "--cosi-grpc",
                &socket_arg,
                "--cosi-grpc-driver",
                GRPC_DRIVER,
            ],
            Mode::OursBehindSidecar => vec![
                "--cosi",
                UNUSED_DRIVER,
                "--cosi-grpc",
                &socket_arg,
                "--cosi-grpc-driver",
                GRPC_DRIVER,
            ],
        };
        let ctl = run.controller_with(DEFAULT_CONCURRENCY, &args).await?;
        let mut serving = Self {
            ctl,
            upstream: Vec::new(),
        };
        if mode == Mode::InProcess {
            return Ok(serving);
        }
        let up = upstream.context("this mode needs upstream's binaries")?;
        wait_for_socket(&socket).await?;
        if mode == Mode::Upstream {
            let child = spawn_upstream(run, &up.controller, "controller", &socket)?;
            serving.upstream.push(("upstream controller", child));
        }
        let child = spawn_upstream(run, &up.sidecar, "sidecar", &socket)?;
        serving.upstream.push(("upstream sidecar", child));
        tokio::time::sleep(Duration::from_secs(3)).await;
        serving.check_running()?;
        Ok(serving)
    }

    /// Fails if an upstream process exited.
    pub fn check_running(&mut self) -> Result<()> {
        for (name, child) in &mut self.upstream {
            if let Some(status) = child.try_wait()? {
                anyhow::bail!("{name} exited ({status}); see its log in the environment directory");
            }
        }
        Ok(())
    }

    /// Kills every process of the mode.
    pub async fn stop(mut self) -> Result<()> {
        for (_, child) in &mut self.upstream {
            let _ = child.kill().await;
        }
        self.ctl.stop().await
    }
}

async fn wait_for_socket(socket: &Path) -> Result<()> {
    for _ in 0..500 {
        if socket.exists() {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    anyhow::bail!(
        "the gRPC driver's socket {} did not appear",
        socket.display()
    )
}

/// Starts one of upstream's binaries with the admin kubeconfig, metrics and
/// probes off, no leader election, its log beside the controllers'.
fn spawn_upstream(run: &Run, bin: &Path, what: &str, socket: &Path) -> Result<Child> {
    let log = run.env.dir().join(format!("upstream-{what}.log"));
    let mut cmd = Command::new(bin);
    cmd.arg("--kubeconfig")
        .arg(run.env.kubeconfig_path())
        .args([
            "--metrics-bind-address",
            "0",
            "--health-probe-bind-address",
            "0",
        ])
        .args(["--zap-devel=false", "--zap-log-level", "info"])
        .env("COSI_ENDPOINT", format!("unix://{}", socket.display()));
    obc_tests::setup::spawn_provisioner(&mut cmd, run.env.kubeconfig_path(), "info", &log)
        .with_context(|| format!("starting upstream's {what} ({})", bin.display()))
}
