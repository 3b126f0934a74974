//! RustFS on loopback: an S3 store that also serves MinIO's admin API
//! (`/minio/admin/v3/...`: users, canned policies, policy attachment, service
//! accounts, bucket quotas) and bucket tagging, which s3s-fs lacks. It is what
//! per-claim credentials and ownership recorded in bucket tags are tested
//! against. Apache-2.0; built by `scripts/install-testenv` (see
//! `docs/testenv.md`).

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::sync::Mutex;

use crate::testenv::{
    Proc, RUSTFS_BINARY, free_port, random_string, resolve_binary_from_env, s3_client_for,
    with_port_retries,
};

/// How long RustFS may take to answer S3 requests: it answers 503
/// (`x-rustfs-readiness-pending: storage_quorum`) while it formats its volume.
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// A RustFS server with its own root credentials and data directory, stopped
/// when dropped.
pub struct RustFs {
    proc: Mutex<Proc>,
    host: std::net::IpAddr,
    port: u16,
    access_key: String,
    secret_key: String,
    dir: PathBuf,
    startup: Duration,
}

impl RustFs {
    /// Starts RustFS in `dir` (data in `dir/rustfs-data`, log in
    /// `dir/rustfs.log`). Fails, naming the command that builds it, when the
    /// binary is missing: no test that needs the store passes without it.
    pub async fn start(dir: &Path) -> Result<RustFs> {
        RustFs::start_on(dir, std::net::Ipv4Addr::LOCALHOST.into()).await
    }

    /// As [`RustFs::start`], listening on `host` (e.g. a node's bridge
    /// address, which Pods reach) instead of loopback.
    pub async fn start_on(dir: &Path, host: std::net::IpAddr) -> Result<RustFs> {
        let bin = resolve_binary_from_env(&RUSTFS_BINARY)?;
        let data = dir.join("rustfs-data");
        fs::create_dir_all(&data)?;
        let access_key = format!("obcroot{}", random_string(8).to_lowercase());
        let secret_key = random_string(32);
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(5))
            .build()?;
        let (proc, port, startup) = with_port_retries("rustfs", || async {
            let port = free_port()?;
            let args: Vec<OsString> = vec![
                "server".into(),
                format!("--address={host}:{port}").into(),
                data.clone().into_os_string(),
            ];
            let mut proc = Proc::new("rustfs", bin.clone(), args, dir.join("rustfs.log"));
            // Credentials through the environment, not the command line
            // (which `ps` shows to everyone on the host).
            proc.envs
                .push(("RUSTFS_ACCESS_KEY".into(), access_key.clone().into()));
            proc.envs
                .push(("RUSTFS_SECRET_KEY".into(), secret_key.clone().into()));
            proc.envs
                .push(("RUSTFS_OBS_LOGGER_LEVEL".into(), "warn".into()));
            proc.envs
                .push(("RUSTFS_CONSOLE_ENABLE".into(), "false".into()));
            // Quota checks fail closed until the scanner has counted a new
            // bucket: scan soon and often so tests do not wait a default cycle.
            proc.envs
                .push(("RUSTFS_SCANNER_START_DELAY_SECS".into(), "1".into()));
            proc.envs.push(("RUSTFS_SCANNER_CYCLE".into(), "3".into()));
            let url = format!("http://{host}:{port}/");
            let took = proc
                .spawn_ready(&url, READY_TIMEOUT, || probe(&http, &url))
                .await?;
            Ok((proc, port, took))
        })
        .await?;
        Ok(RustFs {
            proc: Mutex::new(proc),
            host,
            port,
            access_key,
            secret_key,
            dir: dir.to_path_buf(),
            startup,
        })
    }

    /// `http://<host>:<port>` (host 127.0.0.1 unless [`RustFs::start_on`]
    /// chose it): S3 and the admin API on one port.
    pub fn endpoint(&self) -> String {
        format!("http://{}:{}", self.host, self.port)
    }

    /// The root access key and secret key.
    pub fn root_credentials(&self) -> (String, String) {
        (self.access_key.clone(), self.secret_key.clone())
    }

    /// An S3 client with the root credentials.
    pub fn root_client(&self) -> aws_sdk_s3::Client {
        s3_client_for(&self.endpoint(), &self.access_key, &self.secret_key)
    }

    /// The server's log file.
    pub fn log_path(&self) -> PathBuf {
        self.dir.join("rustfs.log")
    }

    /// Spawn → answers S3 requests.
    pub fn startup(&self) -> Duration {
        self.startup
    }

    /// Stops the server (its data stays in the directory).
    pub async fn stop(&self) {
        self.proc.lock().await.stop().await;
    }
}

/// Ready once an anonymous request is answered with anything but 503: a 403
/// means the S3 front end and its storage are up.
async fn probe(http: &reqwest::Client, url: &str) -> Result<bool> {
    let status = http.get(url).send().await.context("GET /")?.status();
    Ok(status != reqwest::StatusCode::SERVICE_UNAVAILABLE)
}

/// How long a write to a bucket with a quota may be refused with
/// `ServiceUnavailable` before it is a failure. RustFS fails a quota check
/// closed (503, "please retry") until its scanner has counted a new bucket's
/// usage; the test environment runs the scanner every few seconds.
pub const QUOTA_READY_TIMEOUT: Duration = Duration::from_secs(90);

/// `PUT key` into `bucket`, retried while RustFS answers that it cannot check
/// the bucket's quota yet (HTTP 503), as any S3 client does with a 503. Any
/// other answer, success or error, is returned as it is.
pub async fn put_object_when_quota_ready(
    client: &aws_sdk_s3::Client,
    bucket: &str,
    key: &str,
    body: Vec<u8>,
) -> Result<
    aws_sdk_s3::operation::put_object::PutObjectOutput,
    aws_sdk_s3::error::SdkError<aws_sdk_s3::operation::put_object::PutObjectError>,
> {
    let deadline = tokio::time::Instant::now() + QUOTA_READY_TIMEOUT;
    loop {
        let sent = client
            .put_object()
            .bucket(bucket)
            .key(key)
            .body(aws_sdk_s3::primitives::ByteStream::from(body.clone()))
            .send()
            .await;
        let pending = matches!(&sent, Err(e)
            if aws_sdk_s3::error::ProvideErrorMetadata::code(e) == Some("ServiceUnavailable"));
        if !pending || tokio::time::Instant::now() >= deadline {
            return sent;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// True when `err` is RustFS refusing a write because the bucket's hard quota
/// would be exceeded (not a 503 while the quota cannot be checked yet).
pub fn is_quota_exceeded<E: std::fmt::Debug>(err: &E) -> bool {
    format!("{err:?}").contains("Bucket quota exceeded")
}
