//! kube-controller-manager, started on demand
//! ([`TestEnv::start_controller_manager`]): the garbage collector, the
//! namespace controller, the ServiceAccount controller (a `default`
//! ServiceAccount in every namespace), the root CA publisher
//! (`kube-root-ca.crt` in every namespace) and the ClusterRole aggregation
//! controller (the rules of `admin`, `edit` and `view` are those of the
//! ClusterRoles labelled `rbac.authorization.k8s.io/aggregate-to-*`), so
//! that owner references, namespace deletion, foreground/orphan cascades
//! and the user-facing roles behave as in a real cluster.
//!
//! Identity: the static token of user `system:kube-controller-manager`
//! (written into the apiserver's token file at start, no group), which the
//! apiserver's bootstrap RBAC binds to the ClusterRole of the same name.
//! That role may only read and create ServiceAccounts and tokens: with
//! `--use-service-account-credentials` each controller runs as its own
//! ServiceAccount in `kube-system` (`generic-garbage-collector`,
//! `namespace-controller`...), with a token from the TokenRequest API (so
//! no token controller and no signing key are needed here) and the
//! bootstrap role of that controller. Nothing runs as `system:masters`.
//!
//! It serves `/healthz` on a free loopback port with the apiserver's
//! serving certificate (issued for 127.0.0.1 by the environment's CA); no
//! leader election (one instance).

use std::ffi::OsString;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::rbac::v1::ClusterRole;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};

use super::binaries::{KUBE_CONTROLLER_MANAGER_BINARY, resolve_binary_from_env};
use super::process::{Proc, free_port, random_string, with_port_retries};
use super::{TestEnv, wait_for};

/// User name of the controller manager's static token.
pub const CONTROLLER_MANAGER_USER: &str = "system:kube-controller-manager";

/// The controllers it runs (`--controllers`).
pub const CONTROLLERS: &[&str] = &[
    "garbagecollector",
    "namespace",
    "serviceaccount",
    "root-ca-cert-publisher",
    "clusterrole-aggregation",
];

/// File name of its kubeconfig in [`TestEnv::dir`].
pub const CONTROLLER_MANAGER_KUBECONFIG: &str = "kube-controller-manager.kubeconfig";

const HEALTHZ_TIMEOUT: Duration = Duration::from_secs(60);

/// How long the garbage collector may take to collect its first object.
const GC_READY_TIMEOUT: Duration = Duration::from_secs(60);

/// How long the aggregation controller may take to fill `view`.
const AGGREGATION_TIMEOUT: Duration = Duration::from_secs(30);

/// How long each part of [`TestEnv::start_controller_manager`] took.
#[derive(Debug, Clone, Copy, Default)]
pub struct ControllerManagerTimings {
    /// Spawn → `/healthz` 200.
    pub healthz: Duration,
    /// `/healthz` 200 → the garbage collector deleted a probe object whose
    /// owner was deleted.
    pub garbage_collector: Duration,
    /// Then → `view` holds the rules aggregated into it.
    pub role_aggregation: Duration,
}

impl TestEnv {
    /// Starts kube-controller-manager (see the module docs) and waits until
    /// its `/healthz` answers 200, its garbage collector has collected a
    /// probe (a ConfigMap in `kube-system` whose owner, another ConfigMap,
    /// was deleted) and `view` holds the rules aggregated into it. A no-op
    /// if it is running.
    ///
    /// Call it after installing CRDs: the garbage collector discovers
    /// resource types at start and then every 30 s, so a claim of a CRD
    /// installed later waits up to 30 s for its first cascade.
    ///
    /// Fails (never skips) if the binary is missing: `scripts/install-testenv`
    /// builds it, `OBC_KUBE_CONTROLLER_MANAGER` overrides the path.
    pub async fn start_controller_manager(&self) -> Result<ControllerManagerTimings> {
        let mut slot = self.controller_manager.lock().await;
        if let Some(proc) = slot.as_mut()
            && proc.ensure_running().is_ok()
        {
            return Ok(ControllerManagerTimings::default());
        }
        let bin = resolve_binary_from_env(&KUBE_CONTROLLER_MANAGER_BINARY)?;
        let root = self.dir().to_path_buf();
        let (proc, healthz) = with_port_retries("kube-controller-manager", || async {
            let port = free_port()?;
            let mut proc = Proc::new(
                "kube-controller-manager",
                bin.clone(),
                controller_manager_args(&root, port),
                root.join("kube-controller-manager.log"),
            );
            let url = format!("https://127.0.0.1:{port}");
            let healthz = format!("{url}/healthz");
            let took = proc
                .spawn_ready(&url, HEALTHZ_TIMEOUT, || async {
                    let response = self.http.get(&healthz).send().await?;
                    Ok(response.status() == reqwest::StatusCode::OK)
                })
                .await?;
            Ok((proc, took))
        })
        .await?;
        *slot = Some(proc);
        drop(slot);
        let gc_start = Instant::now();
        self.wait_for_garbage_collection().await?;
        let garbage_collector = gc_start.elapsed();
        let aggregation_start = Instant::now();
        self.wait_for_role_aggregation().await?;
        let timings = ControllerManagerTimings {
            healthz,
            garbage_collector,
            role_aggregation: aggregation_start.elapsed(),
        };
        tracing::info!(
            "kube-controller-manager ready: /healthz in {:.1?}, garbage collection in {:.1?} more, role aggregation in {:.1?} more",
            timings.healthz,
            timings.garbage_collector,
            timings.role_aggregation
        );
        Ok(timings)
    }

    /// Stops kube-controller-manager (SIGKILL); a no-op if it is not running.
    pub async fn stop_controller_manager(&self) {
        if let Some(mut proc) = self.controller_manager.lock().await.take() {
            proc.stop().await;
            tracing::info!("kube-controller-manager stopped");
        }
    }

    /// Whether [`Self::start_controller_manager`] started it and it has not
    /// been stopped.
    pub async fn controller_manager_running(&self) -> bool {
        self.controller_manager
            .lock()
            .await
            .as_mut()
            .is_some_and(|p| p.ensure_running().is_ok())
    }

    /// Creates an owner and a dependent ConfigMap in `kube-system`, deletes
    /// the owner and waits until the collector deleted the dependent.
    async fn wait_for_garbage_collection(&self) -> Result<()> {
        let api: Api<ConfigMap> = Api::namespaced(self.admin.clone(), "kube-system");
        let name = format!("obc-testenv-gc-probe-{}", random_string(6).to_lowercase());
        let owner = api
            .create(
                &PostParams::default(),
                &ConfigMap {
                    metadata: ObjectMeta {
                        name: Some(name.clone()),
                        ..Default::default()
                    },
                    ..Default::default()
                },
            )
            .await
            .context("creating the garbage collector's probe owner")?;
        let dependent = format!("{name}-dependent");
        api.create(
            &PostParams::default(),
            &ConfigMap {
                metadata: ObjectMeta {
                    name: Some(dependent.clone()),
                    owner_references: Some(vec![OwnerReference {
                        api_version: "v1".into(),
                        kind: "ConfigMap".into(),
                        name: name.clone(),
                        uid: owner.metadata.uid.clone().unwrap_or_default(),
                        ..Default::default()
                    }]),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await
        .context("creating the garbage collector's probe dependent")?;
        api.delete(&name, &DeleteParams::background())
            .await
            .context("deleting the garbage collector's probe owner")?;
        wait_for(
            GC_READY_TIMEOUT,
            "the garbage collector to delete its probe",
            || async {
                match api.get_opt(&dependent).await? {
                    None => Ok(Some(())),
                    Some(_) => Ok(None),
                }
            },
        )
        .await
        .map_err(|e| {
            let log = self.dir().join("kube-controller-manager.log");
            e.context(format!("see {}", log.display()))
        })
    }
}

impl TestEnv {
    /// Waits until `view` holds rules: the aggregation controller filled it
    /// from the bootstrap `system:aggregate-to-view` (the apiserver creates
    /// it empty).
    async fn wait_for_role_aggregation(&self) -> Result<()> {
        let roles: Api<ClusterRole> = Api::all(self.admin.clone());
        wait_for(
            AGGREGATION_TIMEOUT,
            "the ClusterRole aggregation controller to fill `view`",
            || async {
                let view = roles.get("view").await?;
                Ok(view.rules.is_some_and(|r| !r.is_empty()).then_some(()))
            },
        )
        .await
        .map_err(|e| {
            let log = self.dir().join("kube-controller-manager.log");
            e.context(format!("see {}", log.display()))
        })
    }
}

fn controller_manager_args(root: &Path, port: u16) -> Vec<OsString> {
    let path_arg = |flag: &str, p: &Path| OsString::from(format!("--{flag}={}", p.display()));
    let pki = root.join("pki");
    vec![
        path_arg("kubeconfig", &root.join(CONTROLLER_MANAGER_KUBECONFIG)),
        "--bind-address=127.0.0.1".into(),
        format!("--secure-port={port}").into(),
        path_arg("tls-cert-file", &pki.join("apiserver.crt")),
        path_arg("tls-private-key-file", &pki.join("apiserver.key")),
        path_arg("root-ca-file", &pki.join("ca.crt")),
        format!("--controllers={}", CONTROLLERS.join(",")).into(),
        "--use-service-account-credentials=true".into(),
        "--leader-elect=false".into(),
        "--profiling=false".into(),
    ]
}

/// The line of the apiserver's token file for the controller manager.
pub(super) fn token_file_line(token: &str) -> String {
    format!("{token},{CONTROLLER_MANAGER_USER},{CONTROLLER_MANAGER_USER}\n")
}
