//! Undoes everything a node run changed on the host, from its record
//! (`state.rs`) alone, so that it works after a clean stop, after a failed
//! test, and for a run that crashed (the next start calls it). Each step
//! runs even if an earlier one failed; the errors are reported together.
//! And the check that refuses to start next to node state nobody recorded.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Result, anyhow};

use super::host::{processes, run, terminate};
use super::network::{
    BRIDGE, CNI_CONFLIST, bridge_exists, nft_tables_present, remove_bridge, remove_nft_tables,
};
use super::state::{RunState, SHARED_PATHS};

/// Directories only a node (kubelet, containerd, CNI) makes: removed whole.
pub(super) const NODE_DIRS: [&str; 6] = [
    "/var/lib/kubelet",
    "/var/lib/containerd",
    "/run/containerd",
    "/var/lib/cni",
    "/var/log/pods",
    "/var/log/containers",
];

/// Where the node's mounts are (kubelet volumes, containerd rootfs and shm,
/// the Pods' network namespaces).
const MOUNT_PREFIXES: [&str; 4] = [
    "/var/lib/kubelet",
    "/run/containerd",
    "/var/lib/containerd",
    "/run/netns",
];

/// The cgroup the kubelet makes (cgroupfs driver) in each v1 hierarchy and
/// the unified one.
const POD_CGROUP: &str = "kubepods";
const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// Program names a node runs: a process of one of them, with no record of
/// a run, is another node's.
const NODE_PROGRAMS: [&str; 5] = [
    "kubelet",
    "kube-proxy",
    "containerd",
    "containerd-shim-runc-v2",
    "kube-scheduler",
];

/// Undoes everything `state`'s run changed; see the module docs.
pub(super) fn clean_host(state: &RunState, keep_dir: bool) -> Result<()> {
    let mut errors: Vec<String> = Vec::new();
    stop_processes(state);
    let mut steps = vec![
        ("nft tables", remove_nft_tables()),
        ("mounts", unmount_all()),
        ("bridge", remove_bridge()),
        ("directories", remove_dirs(state)),
        ("cgroups", remove_cgroups()),
        ("sysctls", state.restore_sysctls()),
    ];
    if keep_dir {
        eprintln!("obc-node: kept {}", state.dir.display());
    } else {
        steps.push(("the run's directory", remove_dir(&state.dir)));
    }
    for (what, result) in steps {
        if let Err(e) = result {
            errors.push(format!("{what}: {e:#}"));
        }
    }
    if errors.is_empty()
        && let Err(e) = RunState::remove()
    {
        errors.push(format!("the run's record: {e:#}"));
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(anyhow!(
            "cleaning up the node left state behind (the record {} stays, so the next start \
             tries again):\n  {}",
            super::state::STATE_PATH,
            errors.join("\n  ")
        ))
    }
}

/// Stops, in order: the node's own programs but containerd, every process
/// in a Pod's cgroup, containerd and its shims, then the control plane
/// (recognised by the run's directory on its command line).
fn stop_processes(state: &RunState) {
    let me = std::process::id();
    let by_exe = |names: &[&str]| -> Vec<u32> {
        processes()
            .into_iter()
            .filter(|(pid, exe, _)| {
                *pid != me
                    && state.node_binaries.iter().any(|b| {
                        Path::new(exe) == b
                            && b.file_name().is_some_and(|n| names.iter().any(|x| n == *x))
                    })
            })
            .map(|(pid, _, _)| pid)
            .collect()
    };
    terminate(&by_exe(&["kube-proxy", "kubelet"]), Duration::from_secs(10));
    for _ in 0..5 {
        let pods = pod_processes();
        if pods.is_empty() {
            break;
        }
        terminate(&pods, Duration::ZERO);
    }
    terminate(&by_exe(&["containerd"]), Duration::from_secs(10));
    terminate(
        &by_exe(&["containerd-shim-runc-v2"]),
        Duration::from_secs(2),
    );
    let dir = state.dir.to_string_lossy().into_owned();
    let control_plane: Vec<u32> = processes()
        .into_iter()
        .filter(|(pid, _, cmdline)| *pid != me && !dir.is_empty() && cmdline.contains(&dir))
        .map(|(pid, _, _)| pid)
        .collect();
    // Their state is thrown away: no graceful stop (kube-apiserver's takes
    // over 10 s once etcd is gone).
    terminate(&control_plane, Duration::ZERO);
}

/// The PIDs in any Pod cgroup of any hierarchy.
fn pod_processes() -> Vec<u32> {
    let mut pids: Vec<u32> = pod_cgroup_dirs()
        .iter()
        .filter_map(|d| fs::read_to_string(d.join("cgroup.procs")).ok())
        .flat_map(|s| {
            s.lines()
                .filter_map(|l| l.trim().parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect();
    pids.sort_unstable();
    pids.dedup();
    pids
}

/// Every directory at or below `kubepods` in every hierarchy, deepest first.
fn pod_cgroup_dirs() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        if let Ok(entries) = fs::read_dir(dir) {
            for e in entries.flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    walk(&e.path(), out);
                }
            }
        }
        out.push(dir.to_path_buf());
    }
    let mut out = Vec::new();
    for hierarchy in fs::read_dir(CGROUP_ROOT).into_iter().flatten().flatten() {
        let top = hierarchy.path().join(POD_CGROUP);
        if top.is_dir() {
            walk(&top, &mut out);
        }
    }
    out
}

fn remove_cgroups() -> Result<()> {
    // rmdir (not remove_dir_all: a cgroup's files cannot be deleted).
    for _ in 0..20 {
        let dirs = pod_cgroup_dirs();
        if dirs.is_empty() {
            return Ok(());
        }
        for d in &dirs {
            let _ = fs::remove_dir(d);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let left = pod_cgroup_dirs();
    if left.is_empty() {
        Ok(())
    } else {
        Err(anyhow!("cgroups still there: {left:?}"))
    }
}

/// Mount points under the node's prefixes, deepest first.
pub(super) fn node_mounts() -> Vec<String> {
    let info = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut mounts: Vec<String> = info
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(unescape_mount_path)
        .filter(|m| {
            MOUNT_PREFIXES
                .iter()
                .any(|p| m == p || m.starts_with(&format!("{p}/")))
        })
        .collect();
    mounts.sort_by_key(|m| std::cmp::Reverse(m.matches('/').count()));
    mounts
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
fn unescape_mount_path(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find('\\') {
        out.push_str(&rest[..i]);
        match u8::from_str_radix(rest.get(i + 1..i + 4).unwrap_or(""), 8) {
            Ok(b) => {
                out.push(b as char);
                rest = &rest[i + 4..];
            }
            Err(_) => {
                out.push('\\');
                rest = &rest[i + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

fn unmount_all() -> Result<()> {
    // Repeated: a bind mount of a directory onto itself (the kubelet's
    // rshared /var/lib/kubelet) shows up again once what was above it goes.
    for _ in 0..10 {
        let mounts = node_mounts();
        if mounts.is_empty() {
            return Ok(());
        }
        for m in &mounts {
            if run("umount", &[m]).is_err() {
                let _ = run("umount", &["-l", m]);
            }
        }
    }
    let left = node_mounts();
    if left.is_empty() {
        Ok(())
    } else {
        Err(anyhow!("still mounted: {}", left.join(", ")))
    }
}

fn remove_dir(path: &Path) -> Result<()> {
    match fs::remove_dir_all(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(anyhow!("removing {}: {e}", path.display())),
    }
}

fn remove_dirs(state: &RunState) -> Result<()> {
    // Never recurse into a directory that still has something mounted in
    // it: a container's bind mount would lead out to the host's files.
    let mounted = node_mounts();
    if !mounted.is_empty() {
        return Err(anyhow!(
            "not removing the node's directories while these are mounted: {}",
            mounted.join(", ")
        ));
    }
    for dir in NODE_DIRS {
        remove_dir(Path::new(dir))?;
    }
    match fs::remove_file(CNI_CONFLIST) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(anyhow!("removing {CNI_CONFLIST}: {e}"));
        }
        _ => {}
    }
    // Shared directories: ours only if they were not there before the run;
    // otherwise only the network namespaces' files the CRI made.
    for path in SHARED_PATHS.iter().rev() {
        if !state.preexisting.iter().any(|p| p == path) {
            remove_dir(Path::new(path))?;
        }
    }
    if Path::new("/run/netns").exists() {
        for e in fs::read_dir("/run/netns")?.flatten() {
            if e.file_name().to_string_lossy().starts_with("cni-") {
                fs::remove_file(e.path())?;
            }
        }
    }
    Ok(())
}

/// Node state on the host that no run recorded (then it is not ours to
/// remove): each as a sentence naming it.
pub(super) fn foreign_state() -> Vec<String> {
    let mut found: Vec<String> = NODE_DIRS
        .iter()
        .filter(|d| Path::new(d).exists())
        .map(|d| format!("the directory {d}"))
        .collect();
    if Path::new(CNI_CONFLIST).exists() {
        found.push(format!("the CNI configuration {CNI_CONFLIST}"));
    }
    if bridge_exists() {
        found.push(format!("the network interface {BRIDGE}"));
    }
    if let Ok(tables) = nft_tables_present() {
        found.extend(tables.into_iter().map(|t| format!("the nft table `{t}`")));
    }
    found.extend(node_mounts().into_iter().map(|m| format!("the mount {m}")));
    if !pod_cgroup_dirs().is_empty() {
        found.push(format!("cgroups named {POD_CGROUP} under {CGROUP_ROOT}"));
    }
    for (pid, exe, _) in processes() {
        let name = Path::new(&exe)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if NODE_PROGRAMS.contains(&name.as_str()) {
            found.push(format!("the process {pid} ({exe})"));
        }
    }
    found
}
