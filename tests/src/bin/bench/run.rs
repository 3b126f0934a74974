//! The benchmark's environment ([`Run`]): the control plane, its metrics,
//! the claim tracker, the controllers it starts; and what it reads of the
//! cluster besides (children collected, sizes of cached objects).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, ListParams};
use kube::{Client, Resource};
use lib_provisioner::api::{ObjectBucket, ObjectBucketClaim};
use obc_tests::TestEnv;

use crate::DEFAULT_CONCURRENCY;
use crate::apiserver::Apiserver;
use crate::claims::Tracker;
use crate::ctl::{Controller, CpuSnapshot, Memory};

/// Per cache: its name, its objects and the resident memory it added.
pub type CacheCosts = Vec<(String, f64, f64)>;

/// The environment a benchmark runs in, and how to start a controller in it.
pub struct Run {
    pub env: TestEnv,
    pub client: Client,
    pub api: Apiserver,
    pub tracker: std::sync::Arc<Tracker>,
    pub bin: PathBuf,
    pub apiserver_pid: Option<u32>,
    pub etcd_pid: Option<u32>,
    pub cores: usize,
    pub logs: usize,
    /// Arguments every controller gets ([`Run::controller_with`]; the
    /// cache probes run no controller).
    pub controller_args: Vec<&'static str>,
}

impl Run {
    pub async fn controller(&mut self, concurrency: u16) -> Result<Controller> {
        self.controller_with(concurrency, &[]).await
    }

    /// `bench-controller --caches-only`, optionally without managedFields;
    /// its memory once the caches have listed and 2 s have passed.
    pub async fn caches_only(&mut self, strip: bool) -> Result<Memory> {
        Ok(self.probe_caches(strip).await?.0)
    }

    /// [`Run::caches_only`], and what each cache costs: per cache, its
    /// objects and the resident memory it added as it listed.
    pub async fn probe_caches(&mut self, strip: bool) -> Result<(Memory, CacheCosts)> {
        let mut args = vec!["--caches-only"];
        if strip {
            args.push("--strip-managed-fields");
        }
        let probe = self.spawn(DEFAULT_CONCURRENCY, &args).await?;
        tokio::time::sleep(Duration::from_secs(2)).await;
        let mem = probe.memory()?;
        let costs = probe.cache_costs().await?;
        probe.stop().await?;
        Ok((mem, costs))
    }

    /// A controller with `extra` arguments besides those every controller
    /// of the run gets.
    pub async fn controller_with(
        &mut self,
        concurrency: u16,
        extra: &[&str],
    ) -> Result<Controller> {
        let mut args = extra.to_vec();
        args.extend(&self.controller_args);
        self.spawn(concurrency, &args).await
    }

    /// `bench-controller` with exactly `args`, once it is ready.
    async fn spawn(&mut self, concurrency: u16, args: &[&str]) -> Result<Controller> {
        self.logs += 1;
        let log = self
            .env
            .dir()
            .join(format!("bench-controller-{}.log", self.logs));
        let mut c = Controller::start(
            &self.bin,
            self.env.kubeconfig_path(),
            concurrency,
            args,
            log,
        )
        .await?;
        c.wait_ready(Duration::from_secs(120)).await?;
        Ok(c)
    }

    pub fn cpu(&self, controller: Option<&Controller>) -> CpuSnapshot {
        CpuSnapshot::take(
            self.apiserver_pid,
            self.etcd_pid,
            controller.map(Controller::pid),
        )
    }
}

/// Waits until no Secret or ConfigMap of a claim (our label) is left in `ns`.
pub async fn children_collected(client: &Client, ns: &str) -> Result<()> {
    let labelled = ListParams::default().labels(lib_provisioner::api::PROVISIONER_LABEL);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    obc_tests::wait_for(
        Duration::from_secs(120),
        "the garbage collector to delete the claims' Secrets and ConfigMaps",
        || async {
            let left = secrets.list_metadata(&labelled).await?.items.len()
                + config_maps.list_metadata(&labelled).await?.items.len();
            Ok((left == 0).then_some(()))
        },
    )
    .await
}

/// Average JSON size of cached objects, and of their managedFields.
pub async fn cached_sizes(client: &Client, ns: &str) -> Result<Vec<(String, f64, f64)>> {
    fn avg<K: serde::Serialize + Resource>(items: &[K]) -> (f64, f64) {
        if items.is_empty() {
            return (0.0, 0.0);
        }
        let mut total = 0usize;
        let mut managed = 0usize;
        for k in items {
            total += serde_json::to_vec(k).map(|v| v.len()).unwrap_or(0);
            managed += serde_json::to_vec(&k.meta().managed_fields)
                .map(|v| v.len())
                .unwrap_or(0);
        }
        (
            total as f64 / items.len() as f64,
            managed as f64 / items.len() as f64,
        )
    }
    let lp = ListParams::default().limit(100);
    let claims = Api::<ObjectBucketClaim>::namespaced(client.clone(), ns)
        .list(&lp)
        .await?
        .items;
    let obs: Vec<ObjectBucket> = Api::<ObjectBucket>::all(client.clone())
        .list(&lp)
        .await?
        .items;
    let labelled = lp.clone().labels("bucket-provisioner");
    let secrets = Api::<Secret>::namespaced(client.clone(), ns)
        .list_metadata(&labelled)
        .await?
        .items;
    let cms = Api::<ConfigMap>::namespaced(client.clone(), ns)
        .list_metadata(&labelled)
        .await?
        .items;
    let mut out = Vec::new();
    for (what, (t, m)) in [
        ("ObjectBucketClaim", avg(&claims)),
        ("ObjectBucket", avg(&obs)),
        ("Secret (metadata only)", avg(&secrets)),
        ("ConfigMap (metadata only)", avg(&cms)),
    ] {
        out.push((what.to_owned(), t, m));
    }
    Ok(out)
}
