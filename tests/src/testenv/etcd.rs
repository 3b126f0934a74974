//! etcd (the binary of the `etcd-bin-vendored` crate): one member on free
//! ports, without fsync.

use std::ffi::OsString;
use std::fs;
use std::path::Path;
use std::time::Duration;

use anyhow::Result;

use super::process::{Proc, free_port, random_string, with_port_retries};

const ETCD_TIMEOUT: Duration = Duration::from_secs(30);

async fn probe_etcd(http: &reqwest::Client, url: &str) -> Result<bool> {
    let body: serde_json::Value = http.get(url).send().await?.json().await?;
    Ok(body.get("health").and_then(|h| h.as_str()) == Some("true"))
}

pub(super) async fn start_etcd(
    bin: &Path,
    root: &Path,
    http: &reqwest::Client,
) -> Result<(Proc, u16, Duration)> {
    with_port_retries("etcd", || async {
        let client_port = free_port()?;
        let peer_port = free_port()?;
        let data_dir = root.join("etcd-data");
        if data_dir.exists() {
            fs::remove_dir_all(&data_dir)?;
        }
        let client_url = format!("http://127.0.0.1:{client_port}");
        let peer_url = format!("http://127.0.0.1:{peer_port}");
        let args: Vec<OsString> = vec![
            "--name=default".into(),
            OsString::from(format!("--data-dir={}", data_dir.display())),
            format!("--listen-client-urls={client_url}").into(),
            format!("--advertise-client-urls={client_url}").into(),
            format!("--listen-peer-urls={peer_url}").into(),
            format!("--initial-advertise-peer-urls={peer_url}").into(),
            format!("--initial-cluster=default={peer_url}").into(),
            "--initial-cluster-state=new".into(),
            format!("--initial-cluster-token=obc-testenv-{}", random_string(8)).into(),
            "--unsafe-no-fsync".into(),
            "--log-level=warn".into(),
        ];
        let mut proc = Proc::new("etcd", bin.to_path_buf(), args, root.join("etcd.log"));
        let health = format!("{client_url}/health");
        let took = proc
            .spawn_ready(&client_url, ETCD_TIMEOUT, || probe_etcd(http, &health))
            .await?;
        Ok((proc, client_port, took))
    })
    .await
}
