//! What the node may change on the host, captured as text, so a test can
//! compare the host before a start with the host after the shutdown.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use super::NODE_DIR_PREFIX;
use super::cleanup::{NODE_DIRS, node_mounts};
use super::host::{output, processes};
use super::state::{KUBELET_SYSCTLS, SHARED_PATHS, STATE_PATH};

/// The sysctls compared besides the kubelet's: the forwarding switches that
/// must stay off, and bridge netfilter.
const NETWORK_SYSCTLS: [&str; 6] = [
    "net/ipv4/ip_forward",
    "net/ipv4/conf/all/forwarding",
    "net/ipv4/conf/default/forwarding",
    "net/ipv6/conf/all/forwarding",
    "net/bridge/bridge-nf-call-iptables",
    "net/ipv4/conf/all/route_localnet",
];

/// Program names whose processes count as the node's.
const NODE_PROGRAMS: [&str; 9] = [
    "kubelet",
    "kube-proxy",
    "kube-scheduler",
    "kube-controller-manager",
    "kube-apiserver",
    "etcd",
    "containerd",
    "containerd-shim-runc-v2",
    "runc",
];

/// One text per aspect of the host (`ip -d link`, `ip route`, mounts, nft
/// and iptables rulesets, the node's directories, cgroup directories,
/// sysctls, the node's processes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostSnapshot {
    /// Aspect name → its text.
    pub parts: BTreeMap<String, String>,
}

impl HostSnapshot {
    /// Captures the host now. The node's processes: those of its own
    /// programs, and etcd, kube-apiserver and kube-controller-manager
    /// only if they run from a node's directory (the loopback test
    /// environment runs them too).
    pub fn take() -> HostSnapshot {
        let mut parts = BTreeMap::new();
        let mut put = |name: &str, text: String| {
            parts.insert(name.to_string(), text);
        };
        let cmd = |p: &str, a: &[&str]| output(p, a).unwrap_or_else(|e| format!("(failed: {e:#})"));
        put("ip -d link", cmd("ip", &["-d", "link"]));
        put("ip route", cmd("ip", &["route"]));
        put("ip -6 route", cmd("ip", &["-6", "route"]));
        put("ip netns", cmd("ip", &["netns", "list"]));
        put("mount", sorted(&cmd("mount", &[])));
        put("node mounts", node_mounts().join("\n"));
        put("nft list ruleset", cmd("nft", &["list", "ruleset"]));
        put("iptables-save", iptables(&cmd("iptables-save", &[])));
        put("ip6tables-save", iptables(&cmd("ip6tables-save", &[])));
        let mut paths: Vec<&str> = NODE_DIRS.to_vec();
        paths.extend(SHARED_PATHS);
        paths.extend(["/etc/cni/net.d", "/opt/containerd", "/run/nri", STATE_PATH]);
        put(
            "directories",
            paths
                .iter()
                .map(|p| listing(p))
                .collect::<Vec<_>>()
                .join("\n"),
        );
        put("cgroups", cgroup_dirs());
        let sysctls = KUBELET_SYSCTLS
            .iter()
            .chain(NETWORK_SYSCTLS.iter())
            .map(|k| {
                let v = fs::read_to_string(format!("/proc/sys/{k}"))
                    .unwrap_or_else(|e| format!("({e})"));
                format!("{k} = {}", v.trim())
            })
            .collect::<Vec<_>>()
            .join("\n");
        put("sysctls", sysctls);
        let me = std::process::id();
        let procs = processes()
            .into_iter()
            .filter(|(pid, exe, cmdline)| {
                let name = Path::new(exe)
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let shared = matches!(
                    name.as_str(),
                    "etcd" | "kube-apiserver" | "kube-controller-manager"
                );
                *pid != me
                    && NODE_PROGRAMS.contains(&name.as_str())
                    && (!shared || cmdline.contains(NODE_DIR_PREFIX))
            })
            .map(|(pid, exe, _)| format!("{pid} {exe}"))
            .collect::<Vec<_>>()
            .join("\n");
        put("node processes", procs);
        HostSnapshot { parts }
    }

    /// What differs from `before`, per aspect: lines only before (`-`) and
    /// only now (`+`). Empty when the host is as it was.
    pub fn diff(&self, before: &HostSnapshot) -> Vec<String> {
        let mut out = Vec::new();
        for (name, now) in &self.parts {
            let then = before.parts.get(name).map(String::as_str).unwrap_or("");
            if then == now {
                continue;
            }
            let old: Vec<&str> = then.lines().collect();
            let new: Vec<&str> = now.lines().collect();
            let mut lines: Vec<String> = old
                .iter()
                .filter(|l| !new.contains(l))
                .map(|l| format!("  - {l}"))
                .collect();
            lines.extend(
                new.iter()
                    .filter(|l| !old.contains(l))
                    .map(|l| format!("  + {l}")),
            );
            out.push(format!("{name}:\n{}", lines.join("\n")));
        }
        out
    }
}

fn sorted(text: &str) -> String {
    let mut lines: Vec<&str> = text.lines().collect();
    lines.sort_unstable();
    lines.join("\n")
}

/// iptables-save without its timestamp comments and packet counters.
fn iptables(text: &str) -> String {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.split(" [").next().unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `path: absent`, or `path:` and its entries.
fn listing(path: &str) -> String {
    match fs::read_dir(path) {
        Ok(entries) => {
            let mut names: Vec<String> = entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            format!("{path}: {}", names.join(" "))
        }
        Err(_) if Path::new(path).exists() => format!("{path}: (a file)"),
        Err(_) => format!("{path}: absent"),
    }
}

/// Every cgroup directory, two levels below each hierarchy (where the
/// kubelet's `kubepods/<qos>` would be).
fn cgroup_dirs() -> String {
    let mut out = Vec::new();
    for h in fs::read_dir("/sys/fs/cgroup")
        .into_iter()
        .flatten()
        .flatten()
    {
        for a in fs::read_dir(h.path()).into_iter().flatten().flatten() {
            if !a.path().is_dir() {
                continue;
            }
            out.push(a.path().display().to_string());
            for b in fs::read_dir(a.path()).into_iter().flatten().flatten() {
                if b.path().is_dir() {
                    out.push(b.path().display().to_string());
                }
            }
        }
    }
    out.sort();
    out.join("\n")
}
