//! Helm on the node's apiserver.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};

use super::images::{repo, run};
use super::{CHART, NAMESPACE, RELEASE};
use crate::testenv::{HELM_BINARY, resolve_binary_from_env};

/// Helm (the one `scripts/install-testenv` builds) with its own empty
/// configuration, talking to the node's apiserver.
pub struct Helm {
    bin: PathBuf,
    home: tempfile::TempDir,
    kubeconfig: PathBuf,
}

impl Helm {
    /// Helm for the cluster of `kubeconfig`; fails when helm is not built.
    pub fn new(kubeconfig: &Path) -> Result<Helm> {
        Ok(Helm {
            bin: resolve_binary_from_env(&HELM_BINARY)?,
            home: tempfile::tempdir()?,
            kubeconfig: kubeconfig.to_path_buf(),
        })
    }

    /// `helm ARGS --kubeconfig ...` from the repository root; its stdout.
    pub fn run(&self, args: &[&str]) -> Result<String> {
        let home = self.home.path();
        run(std::process::Command::new(&self.bin)
            .args(args)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .current_dir(repo())
            .env("HELM_CACHE_HOME", home.join("cache"))
            .env("HELM_CONFIG_HOME", home.join("config"))
            .env("HELM_DATA_HOME", home.join("data")))
        .with_context(|| format!("helm {}", args.first().copied().unwrap_or_default()))
    }

    /// `helm install` (or `upgrade`, with `--reuse-values`) of the chart as
    /// [`RELEASE`] in [`NAMESPACE`] with `--set` values.
    pub fn install(&self, verb: &str, values: &[String]) -> Result<String> {
        let mut args = vec![verb, RELEASE, CHART, "--namespace", NAMESPACE];
        match verb {
            "install" => args.push("--create-namespace"),
            "upgrade" => args.push("--reuse-values"),
            _ => bail!("helm {verb}: install or upgrade"),
        }
        for v in values {
            args.extend(["--set", v.as_str()]);
        }
        self.run(&args)
    }
}
