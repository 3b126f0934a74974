//! The provisioner's container process as the host sees it (`/proc`): what
//! the kubelet and runc made of the chart's securityContext, not what the
//! Pod spec asked for.

use std::fs;

use anyhow::{Context as _, Result, ensure};

/// The image's entrypoint: only container processes run it from this path.
pub const ENTRYPOINT: &str = "/usr/local/bin/sample-provisioner";

/// PIDs of the processes whose command starts with [`ENTRYPOINT`].
pub fn provisioner_pids() -> Vec<u32> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.starts_with(ENTRYPOINT.as_bytes()))
        })
        .collect()
}

/// Checks one provisioner process: uid and gid 65532, no effective
/// capability, no_new_privs, a read-only root filesystem, the
/// ServiceAccount token mounted and the in-cluster configuration
/// (`KUBERNETES_SERVICE_HOST`, no `KUBECONFIG`). Returns a one-line summary.
pub fn check_locked_down(pid: u32) -> Result<String> {
    let status = fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("process {pid}"))?;
    let field = |name: &str| -> String {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| v.split_whitespace().collect::<Vec<_>>().join(" "))
            .unwrap_or_default()
    };
    let (uid, gid, cap_eff, nnp) = (
        field("Uid:"),
        field("Gid:"),
        field("CapEff:"),
        field("NoNewPrivs:"),
    );
    ensure!(uid == "65532 65532 65532 65532", "uid {uid}");
    ensure!(gid == "65532 65532 65532 65532", "gid {gid}");
    ensure!(
        cap_eff == "0000000000000000",
        "effective capabilities {cap_eff}"
    );
    ensure!(nnp == "1", "no_new_privs {nnp}");

    let mountinfo = fs::read_to_string(format!("/proc/{pid}/mountinfo"))?;
    // Fields: id parent major:minor root mountpoint options ...
    let root = mountinfo
        .lines()
        .map(|l| l.split(' ').collect::<Vec<_>>())
        .rfind(|f| f.get(4) == Some(&"/"))
        .context("no / in mountinfo")?;
    let options = root.get(5).copied().unwrap_or_default();
    ensure!(
        options.split(',').any(|o| o == "ro"),
        "the root filesystem is mounted {options}"
    );
    ensure!(
        mountinfo.contains(" /var/run/secrets/kubernetes.io/serviceaccount "),
        "no ServiceAccount token mounted"
    );

    let environ = fs::read(format!("/proc/{pid}/environ"))?;
    let vars: Vec<String> = environ
        .split(|b| *b == 0)
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .collect();
    ensure!(
        vars.iter()
            .any(|v| v.starts_with("KUBERNETES_SERVICE_HOST=")),
        "no KUBERNETES_SERVICE_HOST: not the in-cluster configuration"
    );
    ensure!(
        !vars.iter().any(|v| v.starts_with("KUBECONFIG=")),
        "KUBECONFIG is set"
    );
    Ok(format!(
        "pid {pid}: uid/gid 65532, CapEff 0, no_new_privs, / mounted {options}, in-cluster config"
    ))
}
