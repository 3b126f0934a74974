//! The S3 store: s3s-fs on a free port, stopped and started again on it with
//! its data; and S3 clients, for it and for any endpoint (RustFS:
//! [`crate::rustfs`]).

use std::ffi::OsString;
use std::fs;
use std::path::Path;
use std::time::Duration;

use anyhow::Result;
use tokio::sync::Mutex;

use super::process::{Proc, free_port, with_port_retries};
use super::{S3_REGION, Store, TestEnv};

const S3_TIMEOUT: Duration = Duration::from_secs(30);

/// The environment's s3s-fs: its process, port and root credentials.
pub(super) struct S3sFs {
    pub(super) proc: Mutex<Proc>,
    pub(super) port: u16,
    pub(super) access_key: String,
    pub(super) secret_key: String,
}

impl TestEnv {
    /// The s3s-fs server.
    ///
    /// # Panics
    /// If the environment was started without it ([`Store::None`]): a test
    /// that asks for it must start it ([`TestEnv::start`]).
    fn s3s_fs(&self) -> &S3sFs {
        match &self.s3 {
            Some(s3) => s3,
            None => panic!(
                "this TestEnv was started with Store::None: start it with TestEnv::start() to have s3s-fs"
            ),
        }
    }

    /// Which S3 server runs beside the control plane.
    pub fn store(&self) -> Store {
        match self.s3 {
            Some(_) => Store::S3sFs,
            None => Store::None,
        }
    }

    /// `http://127.0.0.1:<port>` of the S3 server (panics without one, see
    /// [`Store::None`]).
    pub fn s3_endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.s3s_fs().port)
    }

    /// The S3 server's root `(access key, secret key)`.
    pub fn s3_root_credentials(&self) -> (String, String) {
        let s3 = self.s3s_fs();
        (s3.access_key.clone(), s3.secret_key.clone())
    }

    /// An S3 client for the S3 server with the root credentials.
    pub fn s3_client(&self) -> aws_sdk_s3::Client {
        let s3 = self.s3s_fs();
        self.s3_client_with_credentials(&s3.access_key, &s3.secret_key)
    }

    /// An S3 client for the S3 server with other credentials (e.g. to check that
    /// wrong ones are refused).
    pub fn s3_client_with_credentials(
        &self,
        access_key: &str,
        secret_key: &str,
    ) -> aws_sdk_s3::Client {
        s3_client_for(&self.s3_endpoint(), access_key, secret_key)
    }

    /// Stops the S3 server (SIGKILL). Its data and port are kept for [`Self::start_s3`].
    pub async fn stop_s3(&self) {
        let mut s3 = self.s3s_fs().proc.lock().await;
        s3.stop().await;
        tracing::info!("s3s-fs stopped");
    }

    /// Starts the S3 server again on the same port with the same data and
    /// credentials, and waits until it answers. A no-op if it is running.
    pub async fn start_s3(&self) -> Result<()> {
        let mut s3 = self.s3s_fs().proc.lock().await;
        if s3.ensure_running().is_ok() {
            return Ok(());
        }
        s3.spawn()?;
        let url = self.s3_endpoint();
        let took = s3
            .wait_ready("s3s-fs", S3_TIMEOUT, || probe_s3(&self.http, &url))
            .await?;
        tracing::info!("s3s-fs ready again on {url} in {took:.1?}");
        Ok(())
    }
}

/// An S3 client for `endpoint` (path-style, region us-east-1, static credentials).
pub fn s3_client_for(endpoint: &str, access_key: &str, secret_key: &str) -> aws_sdk_s3::Client {
    use aws_sdk_s3::config::{
        BehaviorVersion, Region, RequestChecksumCalculation, ResponseChecksumValidation,
    };
    let credentials =
        aws_credential_types::Credentials::new(access_key, secret_key, None, None, "obc-testenv");
    let config = aws_sdk_s3::config::Builder::new()
        .http_client(sample_provisioner::http::s3_http_client())
        .behavior_version(BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(Region::new(S3_REGION))
        .credentials_provider(credentials)
        .force_path_style(true)
        .request_checksum_calculation(RequestChecksumCalculation::WhenRequired)
        .response_checksum_validation(ResponseChecksumValidation::WhenRequired)
        .build();
    aws_sdk_s3::Client::from_conf(config)
}

async fn probe_s3(http: &reqwest::Client, url: &str) -> Result<bool> {
    http.get(url).send().await?;
    Ok(true)
}

pub(super) async fn start_s3_server(
    bin: &Path,
    root: &Path,
    access_key: &str,
    secret_key: &str,
    http: &reqwest::Client,
) -> Result<(Proc, u16, Duration)> {
    let data = root.join("s3-data");
    fs::create_dir_all(&data)?;
    with_port_retries("s3s-fs", || async {
        let port = free_port()?;
        let args: Vec<OsString> = vec![
            "--host=127.0.0.1".into(),
            format!("--port={port}").into(),
            format!("--access-key={access_key}").into(),
            format!("--secret-key={secret_key}").into(),
            data.clone().into_os_string(),
        ];
        let mut proc = Proc::new("s3s-fs", bin.to_path_buf(), args, root.join("s3s-fs.log"));
        proc.envs.push(("RUST_LOG".into(), "info".into()));
        proc.envs.push(("NO_COLOR".into(), "1".into()));
        let url = format!("http://127.0.0.1:{port}");
        let took = proc
            .spawn_ready(&url, S3_TIMEOUT, || probe_s3(http, &url))
            .await?;
        Ok((proc, port, took))
    })
    .await
}
