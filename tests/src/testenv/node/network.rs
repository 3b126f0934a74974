//! The node's network in the host's namespace: one bridge for the Pods, a
//! route for the Service range, the guard table that keeps forwarded
//! traffic on the bridge, and the CNI configuration. Nothing here touches
//! the uplink or `net.ipv4.ip_forward`.

use std::fs;
use std::path::Path;

use anyhow::{Context, Result};

use super::host::{output, run, run_stdin, write_file};

/// The Pods' bridge. Not `cni0`, so the node never takes over (or removes)
/// another CNI setup's bridge.
pub const BRIDGE: &str = "obc0";
/// The bridge's address: node IP, kubelet and apiserver address, Pods' gateway.
pub const BRIDGE_ADDRESS: &str = "10.88.0.1";
/// The Pods' range (host-local IPAM hands out addresses from `.10`).
pub const POD_CIDR: &str = "10.88.0.0/16";
/// The Services' range; the `kubernetes` Service is its first address.
pub const SERVICE_CIDR: &str = "10.96.0.0/12";
/// The ClusterIP of the `kubernetes` Service.
pub const KUBERNETES_SERVICE_IP: &str = "10.96.0.1";
/// The nft table that drops anything forwarded between the bridge and any
/// other interface.
pub const GUARD_TABLE: &str = "obc_guard";
/// The CNI network configuration the node writes.
pub const CNI_CONFLIST: &str = "/etc/cni/net.d/10-obc.conflist";

/// Creates the bridge, the Service route, the guard table, turns on
/// forwarding on the bridge alone, and writes the CNI configuration.
pub(super) fn set_up() -> Result<()> {
    run("ip", &["link", "add", BRIDGE, "type", "bridge"])?;
    let with_prefix = format!("{BRIDGE_ADDRESS}/16");
    run("ip", &["addr", "add", &with_prefix, "dev", BRIDGE])?;
    run("ip", &["link", "set", BRIDGE, "up"])?;
    // A host connection to a ClusterIP kube-proxy has not programmed (yet)
    // stays on the bridge instead of taking the default route.
    run(
        "ip",
        &[
            "route",
            "add",
            SERVICE_CIDR,
            "dev",
            BRIDGE,
            "src",
            BRIDGE_ADDRESS,
        ],
    )?;
    // The guard first: forwarding is switched on only once it fences the bridge.
    run_stdin("nft", &["-f", "-"], &guard_ruleset())?;
    // Pod -> ClusterIP -> Pod on the same bridge is routed back out of it
    // after DNAT; IPv4 honours the input device's flag, the global switch
    // stays 0.
    fs::write(format!("/proc/sys/net/ipv4/conf/{BRIDGE}/forwarding"), "1")
        .context("setting net.ipv4.conf.obc0.forwarding=1")?;
    write_file(Path::new(CNI_CONFLIST), &cni_conflist())
}

fn guard_ruleset() -> String {
    format!(
        "table inet {GUARD_TABLE} {{\n  chain forward {{\n    type filter hook forward priority filter - 10; policy accept;\n    iifname \"{BRIDGE}\" oifname != \"{BRIDGE}\" counter drop\n    oifname \"{BRIDGE}\" iifname != \"{BRIDGE}\" counter drop\n  }}\n}}\n"
    )
}

/// `isGateway: false`: the bridge plugin would set `net.ipv4.ip_forward=1`;
/// `ipMasq: false`: no masquerade rule. Routes: the Pod range on-link and
/// the Service range through the bridge, no default route.
fn cni_conflist() -> String {
    serde_json::json!({
        "cniVersion": "1.0.0",
        "name": "obc",
        "plugins": [
            {
                "type": "bridge", "bridge": BRIDGE, "isGateway": false, "ipMasq": false,
                "hairpinMode": true,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": POD_CIDR, "gateway": BRIDGE_ADDRESS, "rangeStart": "10.88.0.10"}]],
                    "routes": [{"dst": SERVICE_CIDR}],
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": true}},
        ],
    })
    .to_string()
}

/// Whether the bridge exists.
pub(super) fn bridge_exists() -> bool {
    Path::new("/sys/class/net").join(BRIDGE).exists()
}

/// Deletes leftover veths on the bridge, then the bridge (its routes and
/// per-interface sysctls go with it).
pub(super) fn remove_bridge() -> Result<()> {
    if !bridge_exists() {
        return Ok(());
    }
    let brif = Path::new("/sys/class/net").join(BRIDGE).join("brif");
    if let Ok(ports) = fs::read_dir(&brif) {
        for port in ports.flatten() {
            let name = port.file_name().to_string_lossy().into_owned();
            run("ip", &["link", "del", &name]).ok();
        }
    }
    run("ip", &["link", "del", BRIDGE])
}

/// The nft tables the node makes: its guard and kube-proxy's two.
pub(super) const NFT_TABLES: [(&str, &str); 3] = [
    ("inet", GUARD_TABLE),
    ("ip", "kube-proxy"),
    ("ip6", "kube-proxy"),
];

/// Those of [`NFT_TABLES`] that exist, as `family name`.
pub(super) fn nft_tables_present() -> Result<Vec<String>> {
    let listed = output("nft", &["list", "tables"])?;
    Ok(NFT_TABLES
        .iter()
        .map(|(family, name)| format!("{family} {name}"))
        .filter(|t| listed.lines().any(|l| l.trim() == format!("table {t}")))
        .collect())
}

/// Deletes the node's nft tables that exist.
pub(super) fn remove_nft_tables() -> Result<()> {
    for table in nft_tables_present()? {
        let mut args = vec!["delete", "table"];
        args.extend(table.split(' '));
        run("nft", &args)?;
    }
    Ok(())
}
