//! The demo on a real node (`scripts/demo --node`): a single-node cluster
//! on this machine (kubelet, containerd, kube-proxy, a scheduler; needs
//! root), the provisioner's image imported and its Helm chart installed,
//! the example claim bound, and an application Pod that uses it as users
//! do (`envFrom` its ConfigMap and Secret): what it wrote to and read from
//! its bucket is printed, and another tenant's bucket refuses it. Then
//! everything is torn down.
//!
//! `scripts/demo --node` builds both images and runs this.

use std::time::Instant;

use anyhow::{Result, bail};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use obc_tests::node_chart::{
    ChartOnNode, NAMESPACE, RELEASE, check_locked_down, claim_bound, claim_bucket,
    ensure_namespace, provisioner_pids, run_app,
};

#[tokio::main]
async fn main() -> Result<()> {
    let started = Instant::now();
    let cluster = ChartOnNode::start(&[]).await?;
    let result = story(&cluster).await;
    println!("\ntearing down the node");
    let stopped = cluster.stop().await;
    result?;
    let took = stopped?;
    println!("node torn down in {:.1} s", took.as_secs_f64());
    println!(
        "\ndemo complete in {:.0} s: nothing of the node is left on this machine",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

async fn story(cluster: &ChartOnNode) -> Result<()> {
    let client = cluster.client.clone();
    println!(
        "node ready; RustFS on the node's bridge at {}; images imported; `helm install {RELEASE} charts/sample-provisioner -n {NAMESPACE}` done",
        cluster.store.endpoint()
    );
    let waiting = Instant::now();
    let pods = cluster
        .wait_provisioners_ready(1, std::time::Duration::from_secs(90))
        .await?;
    println!(
        "provisioner Pod {} Ready in {:.1} s",
        pods[0].metadata.name.clone().unwrap_or_default(),
        waiting.elapsed().as_secs_f64()
    );
    // What the chart's securityContext became, as the host sees the process.
    for pid in provisioner_pids() {
        println!("  its process: {}", check_locked_down(pid)?);
    }

    for ns in ["default", "other-team"] {
        ensure_namespace(&cluster.client, ns).await?;
    }
    let took = claim_bound(&client, "default", "photos").await?;
    println!("claim default/photos Bound in {:.1} s", took.as_secs_f64());
    claim_bound(&client, "other-team", "photos").await?;
    println!("claim other-team/photos (another tenant) Bound");
    let other = claim_bucket(&client, "other-team", "photos").await?;
    claim_bucket(&client, "default", "photos").await?;
    let cm = Api::<ConfigMap>::namespaced(client.clone(), "default")
        .get("photos")
        .await?;
    println!(
        "--- ConfigMap default/photos (the Secret default/photos holds AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)"
    );
    print!("{}", serde_yaml::to_string(&cm.data.unwrap_or_default())?);

    println!(
        "\n--- Pod default/bucket-app: envFrom ConfigMap photos and Secret photos, argument {other} (the other tenant's bucket)"
    );
    let run = run_app(&client, "default", "bucket-app", "photos", &other).await?;
    print!("{}", run.output);
    println!(
        "--- exit code {} after {:.1} s (0: wrote, read back, refused elsewhere)",
        run.exit_code,
        run.took.as_secs_f64()
    );
    if run.exit_code != 0 {
        bail!("the application exited {}", run.exit_code);
    }
    Ok(())
}
