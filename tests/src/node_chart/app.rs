//! The application (`tests/src/bin/bucket-app.rs`) in a Pod: `envFrom` a
//! claim's ConfigMap and Secret, run to completion, its output read.

use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, DeleteParams, LogParams, PostParams};

use super::{APP_REPOSITORY, TAG};
use crate::wait_for;

/// The application Pod: `envFrom` the claim's ConfigMap and Secret, the
/// other bucket as its argument, the restricted Pod Security Standard.
pub fn app_pod(name: &str, claim: &str, other_bucket: &str) -> Result<Pod> {
    Ok(serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "bucket-app"}},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "automountServiceAccountToken": false,
            "securityContext": {
                "runAsNonRoot": true,
                "runAsUser": 65532,
                "runAsGroup": 65532,
                "seccompProfile": {"type": "RuntimeDefault"}
            },
            "containers": [{
                "name": "app",
                "image": format!("{APP_REPOSITORY}:{TAG}"),
                "imagePullPolicy": "Never",
                "args": [other_bucket],
                "envFrom": [
                    {"configMapRef": {"name": claim}},
                    {"secretRef": {"name": claim}}
                ],
                "securityContext": {
                    "allowPrivilegeEscalation": false,
                    "readOnlyRootFilesystem": true,
                    "runAsNonRoot": true,
                    "capabilities": {"drop": ["ALL"]}
                }
            }]
        }
    }))?)
}

/// What the application Pod did.
#[derive(Debug)]
pub struct AppRun {
    /// The container's exit code.
    pub exit_code: i32,
    /// Its output (`kubectl logs`).
    pub output: String,
    /// Pod created → its container terminated.
    pub took: Duration,
}

/// Runs the application Pod `name` in `ns` for `claim` until its container
/// terminates; its exit code and output. The Pod is deleted afterwards.
pub async fn run_app(
    client: &Client,
    ns: &str,
    name: &str,
    claim: &str,
    other: &str,
) -> Result<AppRun> {
    let pods = Api::<Pod>::namespaced(client.clone(), ns);
    let started = Instant::now();
    pods.create(&PostParams::default(), &app_pod(name, claim, other)?)
        .await
        .context("creating the application Pod")?;
    let finished = wait_for(
        Duration::from_secs(90),
        format!("Pod {ns}/{name} to finish"),
        || async {
            let pod = pods.get(name).await?;
            let terminated = pod
                .status
                .as_ref()
                .and_then(|s| s.container_statuses.as_ref())
                .and_then(|cs| cs.first())
                .and_then(|c| c.state.as_ref())
                .and_then(|s| s.terminated.as_ref())
                .map(|t| t.exit_code);
            Ok(terminated)
        },
    )
    .await;
    let exit_code = match finished {
        Ok(code) => code,
        Err(e) => {
            let status = pods.get(name).await.ok().and_then(|p| p.status);
            let output = pods
                .logs(name, &LogParams::default())
                .await
                .unwrap_or_default();
            return Err(e.context(format!(
                "the Pod's status: {}\nits output:\n{output}",
                serde_json::to_string(&status).unwrap_or_default()
            )));
        }
    };
    let took = started.elapsed();
    let output = pods.logs(name, &LogParams::default()).await?;
    pods.delete(name, &DeleteParams::default()).await?;
    Ok(AppRun {
        exit_code,
        output,
        took,
    })
}
