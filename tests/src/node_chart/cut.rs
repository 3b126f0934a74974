//! Cuts one Pod off the apiserver, as a broken network would: an nft rule
//! rejects (TCP reset) its new connections to the apiserver, and the
//! apiserver's end of its open ones is destroyed (`ss -K`), so its watches
//! fail at once instead of hanging. Dropping the [`Cut`] mends it.

use std::process::{Command, Stdio};

use anyhow::{Context as _, Result, ensure};

/// The nft table of the cut (its own: the node's tables stay untouched).
pub const CUT_TABLE: &str = "obc_node_e2e_cut";

fn run(program: &str, args: &[&str]) -> Result<String> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {program}"))?;
    ensure!(
        out.status.success(),
        "`{program} {}` failed ({}): {}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The Pod at `pod_ip` cannot reach the apiserver on `apiserver_port` (the
/// port the `kubernetes` Service's endpoint has, after kube-proxy's DNAT)
/// while this lives.
#[derive(Debug)]
pub struct Cut {
    pod_ip: String,
}

impl Cut {
    /// Rejects the Pod's new connections and resets its open ones.
    pub fn start(pod_ip: &str, apiserver_port: u16) -> Result<Cut> {
        let _ = run("nft", &["delete", "table", "inet", CUT_TABLE]);
        let rules = format!(
            "table inet {CUT_TABLE} {{\n  chain input {{\n    type filter hook input priority filter - 5; policy accept;\n    ip saddr {pod_ip} tcp dport {apiserver_port} reject with tcp reset\n  }}\n}}\n"
        );
        let file = tempfile::NamedTempFile::new()?;
        std::fs::write(file.path(), rules)?;
        let path = file.path().to_str().context("utf-8 path")?;
        run("nft", &["-f", path])?;
        let cut = Cut {
            pod_ip: pod_ip.to_owned(),
        };
        // The apiserver's sockets whose peer is the Pod: destroyed, each
        // sends the Pod a reset.
        let sport = format!(":{apiserver_port}");
        run(
            "ss",
            &["-K", "-t", "dst", pod_ip, "and", "sport", "=", &sport],
        )?;
        Ok(cut)
    }

    /// The Pod the cut applies to.
    pub fn pod_ip(&self) -> &str {
        &self.pod_ip
    }
}

impl Drop for Cut {
    fn drop(&mut self) {
        if let Err(e) = run("nft", &["delete", "table", "inet", CUT_TABLE]) {
            eprintln!("could not remove nft table {CUT_TABLE}: {e:#}");
        }
    }
}
