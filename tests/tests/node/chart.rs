//! The user's path on a real node (`obc_tests::testenv::node`: kubelet,
//! containerd, kube-proxy, a scheduler): the provisioner image from
//! `scripts/build-image` imported, `helm install` of
//! `charts/sample-provisioner` with it (never pulled) and the example
//! StorageClass on RustFS at the node's bridge address; the provisioner Pod
//! goes Ready through the chart's probes, under the chart's securityContext
//! (non-root, read-only root filesystem, no capabilities) and with the
//! in-cluster configuration of its ServiceAccount token; a claim binds; the
//! application Pod (`scripts/build-app-image`) with `envFrom` the claim's
//! ConfigMap and Secret writes and reads its bucket and is refused another
//! claim's; deleting the claim deletes the bucket. Needs root, the node's
//! tools (`scripts/install-testenv`) and both image archives: a missing one
//! fails the test.

use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, ensure};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams};
use lib_provisioner::api::ObjectBucketClaim;
use obc_tests::node_chart::{
    ChartOnNode, bucket_exists, check_locked_down, claim_bound, claim_bucket, ensure_namespace,
    provisioner_pids, run_app,
};
use obc_tests::recording::wait_gone;
use obc_tests::reliability::assert_no_leaks;
use obc_tests::wait_for;

const T: Duration = Duration::from_secs(90);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_charts_pod_serves_a_claim_that_an_application_pod_uses() {
    let _host = crate::HOST.lock().await;
    let started = Instant::now();
    let cluster = ChartOnNode::start(&[])
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    eprintln!(
        "[node] node up, images imported, chart installed in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    if let Err(e) = user_path(&cluster).await {
        panic!("{e:#}\n{}", cluster.diagnostics().await);
    }
    let took = cluster.stop().await.unwrap_or_else(|e| panic!("{e:#}"));
    eprintln!("[node] teardown: {:.1} s", took.as_secs_f64());
    eprintln!("[node] test took {:.1} s", started.elapsed().as_secs_f64());
}

async fn user_path(cluster: &ChartOnNode) -> Result<()> {
    let client = cluster.client.clone();

    // The provisioner Pod: created by the Deployment, Ready through the
    // chart's readiness probe.
    let pod = wait_for(T, "the provisioner Pod to be created", || async {
        Ok(cluster.provisioner_pods().await?.into_iter().next())
    })
    .await?;
    let created = Instant::now();
    let ready = cluster.wait_provisioners_ready(1, T).await?;
    eprintln!(
        "[node] provisioner Pod created → Ready: {:.2} s",
        created.elapsed().as_secs_f64()
    );
    check_pod_spec(&ready[0])?;
    // The container as the host sees it: what runc made of the chart's
    // securityContext, and the in-cluster configuration.
    let pids = provisioner_pids();
    ensure!(
        pids.len() == 1,
        "provisioner processes on the host: {pids:?}"
    );
    eprintln!("[node] {}", check_locked_down(pids[0])?);
    ensure!(
        pod.metadata.name == ready[0].metadata.name,
        "the first Pod was replaced before it went Ready"
    );

    // Two tenants' claims; the application uses the first and tries the
    // second's bucket.
    for ns in ["default", "other-team"] {
        ensure_namespace(&cluster.client, ns).await?;
    }
    let took = claim_bound(&client, "default", "photos").await?;
    eprintln!("[node] claim create → Bound: {:.2} s", took.as_secs_f64());
    let took = claim_bound(&client, "other-team", "photos").await?;
    eprintln!(
        "[node] second claim create → Bound: {:.2} s",
        took.as_secs_f64()
    );
    let bucket = claim_bucket(&client, "default", "photos").await?;
    let other = claim_bucket(&client, "other-team", "photos").await?;

    let run = run_app(&client, "default", "bucket-app", "photos", &other).await?;
    eprintln!(
        "[node] application Pod create → completed: {:.2} s (exit {}):\n{}",
        run.took.as_secs_f64(),
        run.exit_code,
        run.output
    );
    ensure!(
        run.exit_code == 0,
        "the application exited {}:\n{}",
        run.exit_code,
        run.output
    );
    for expect in [
        format!("wrote s3://{bucket}/bucket-app/bucket-app.txt: \"hello from bucket-app\""),
        format!("read s3://{bucket}/bucket-app/bucket-app.txt: \"hello from bucket-app\""),
        format!("other bucket s3://{other}: refused (AccessDenied"),
    ] {
        ensure!(
            run.output.contains(&expect),
            "no {expect:?} in:\n{}",
            run.output
        );
    }
    // The control: given its own bucket as the "other" one, the
    // application says it was accepted (exit 5), so the refusal above is
    // the store's answer, not the application's.
    let control = run_app(&client, "default", "bucket-app-control", "photos", &bucket).await?;
    ensure!(
        control.exit_code == 5 && control.output.contains("ACCEPTED"),
        "the control run exited {}:\n{}",
        control.exit_code,
        control.output
    );

    // The store has what the Pod wrote.
    let object = cluster
        .store
        .root_client()
        .get_object()
        .bucket(&bucket)
        .key("bucket-app/bucket-app.txt")
        .send()
        .await
        .context("the object the application wrote")?;
    let body = object.body.collect().await?.into_bytes();
    ensure!(&body[..] == b"hello from bucket-app", "{body:?}");

    // Deleting the claim deletes its bucket (Delete, forceDelete).
    let claims = Api::<ObjectBucketClaim>::namespaced(client.clone(), "default");
    claims.delete("photos", &DeleteParams::default()).await?;
    wait_gone(&claims, "photos", T).await?;
    wait_for(T, format!("bucket {bucket} to be deleted"), || async {
        Ok((!bucket_exists(&cluster.store, &bucket).await).then_some(()))
    })
    .await?;
    ensure!(
        bucket_exists(&cluster.store, &other).await,
        "the other claim's bucket went too"
    );

    // No credential in the provisioner's logs (`kubectl logs`).
    let logs = cluster.provisioner_logs().await?;
    ensure!(
        logs.contains("provisioner succeeded") && logs.contains("bucket is deleted"),
        "the provisioner's log lacks its work:\n{logs}"
    );
    let dir = cluster.node.dir().join("pod-logs");
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("provisioner.log"), &logs)?;
    assert_no_leaks(&dir).context("a credential in the provisioner's logs")?;
    Ok(())
}

/// The Pod the Deployment made has the chart's securityContext and the
/// imported image, never pulled.
fn check_pod_spec(pod: &Pod) -> Result<()> {
    let spec = pod.spec.as_ref().context("pod spec")?;
    let c = &spec.containers[0];
    let sc = c.security_context.as_ref().context("securityContext")?;
    ensure!(sc.read_only_root_filesystem == Some(true), "{sc:?}");
    ensure!(sc.allow_privilege_escalation == Some(false), "{sc:?}");
    ensure!(
        sc.capabilities.as_ref().and_then(|c| c.drop.clone()) == Some(vec!["ALL".to_owned()]),
        "{sc:?}"
    );
    let psc = spec
        .security_context
        .as_ref()
        .context("pod securityContext")?;
    ensure!(
        psc.run_as_non_root == Some(true) && psc.run_as_user == Some(65532),
        "{psc:?}"
    );
    ensure!(c.image_pull_policy.as_deref() == Some("Never"), "{c:?}");
    Ok(())
}
