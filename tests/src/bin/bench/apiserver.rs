//! kube-apiserver's own figures: its `/metrics` (request counts and
//! server-side durations) at one moment, and what changed between two.

use std::time::Duration;

use anyhow::{Context, Result};
use obc_tests::TestEnv;

use crate::prom::Requests;

/// kube-apiserver's `/metrics`, read with the admin token.
pub struct Apiserver {
    http: reqwest::Client,
    url: String,
    token: String,
}

impl Apiserver {
    pub fn new(env: &TestEnv) -> Result<Self> {
        let http = reqwest::Client::builder()
            .add_root_certificate(reqwest::Certificate::from_pem(env.ca_pem().as_bytes())?)
            .tls_built_in_root_certs(false)
            .no_proxy()
            .timeout(Duration::from_secs(30))
            .build()?;
        Ok(Self {
            http,
            url: format!("{}/metrics", env.apiserver_url()),
            token: env.admin_token().to_owned(),
        })
    }

    pub async fn snapshot(&self) -> Result<ApiSnapshot> {
        let text = self
            .http
            .get(&self.url)
            .bearer_auth(&self.token)
            .send()
            .await
            .context("GET /metrics of kube-apiserver")?
            .error_for_status()?
            .text()
            .await?;
        Ok(ApiSnapshot {
            requests: Requests::from_metrics(&text),
            seconds: Requests::named(&text, "apiserver_request_duration_seconds_sum"),
            timed: Requests::named(&text, "apiserver_request_duration_seconds_count"),
        })
    }
}

/// What kube-apiserver's metrics say at one moment.
pub struct ApiSnapshot {
    /// `apiserver_request_total`.
    pub requests: Requests,
    /// `apiserver_request_duration_seconds_sum` and `_count`.
    pub seconds: Requests,
    pub timed: Requests,
}

impl ApiSnapshot {
    pub fn since(&self, before: &ApiSnapshot) -> ApiSnapshot {
        ApiSnapshot {
            requests: self.requests.since(&before.requests),
            seconds: self.seconds.since_exact(&before.seconds),
            timed: self.timed.since(&before.timed),
        }
    }
}
