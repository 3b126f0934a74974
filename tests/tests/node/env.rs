//! The node environment (`obc_tests::testenv::node`): a real node starts
//! and goes Ready, a Pod from a locally built image runs, reaches the
//! apiserver through the `kubernetes` Service with its ServiceAccount token
//! and a host server through a selector-less Service, without a default
//! route or a resolver; after the shutdown the host is as it was. One node
//! at a time (the lock), a crashed run is cleaned up by the next start, and
//! node state nobody recorded stops a start.
//!
//! Needs root and the programs `scripts/install-testenv` builds; fails
//! (saying what is missing) without them.

use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::{Api, LogParams, PostParams};
use obc_tests::testenv::client_from_kubeconfig;
use obc_tests::testenv::node::{
    BRIDGE_ADDRESS, BUSYBOX_IMAGE, HostSnapshot, LockError, Node, NodeLock, NodeOptions,
    busybox_image,
};
use obc_tests::wait_for;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

const APP_IMAGE: &str = "localhost/obc/kubectl:1";
const HOST_PORT: u16 = 18080;

/// The host with no node running: waits (`OBC_NODE_LOCK_WAIT`) for
/// another process's node to finish first, holding the lock while it looks.
async fn host_before() -> Result<HostSnapshot> {
    let _lock = NodeLock::acquire_waiting(NodeOptions::from_env().lock_wait).await?;
    Ok(HostSnapshot::take())
}

fn assert_host_unchanged(before: &HostSnapshot) {
    let after = HostSnapshot::take();
    let diff = after.diff(before);
    assert!(
        diff.is_empty(),
        "the host differs from before the node started:\n{}",
        diff.join("\n")
    );
}

/// A host HTTP server on the bridge address answering `hello-from-host`.
async fn host_server() -> Result<tokio::task::JoinHandle<()>> {
    let listener = tokio::net::TcpListener::bind((BRIDGE_ADDRESS, HOST_PORT)).await?;
    Ok(tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let _ = conn
                .write_all(b"HTTP/1.0 200 OK\r\nContent-Length: 16\r\n\r\nhello-from-host\n")
                .await;
        }
    }))
}

fn app_pod(service_ip: &str) -> Result<Pod> {
    // busybox's wget cannot talk TLS to the apiserver: kubectl (in-cluster
    // config: the mounted token and CA, $KUBERNETES_SERVICE_HOST) does.
    let script = format!(
        "echo ROUTES; ip route; echo END; echo RESOLV=$(wc -c < /etc/resolv.conf); \
         echo HOST=$(timeout 5 wget -q -O- http://{service_ip}:80/); \
         until kubectl get --raw /api/v1/namespaces/default/pods > /tmp/out 2>/tmp/err; \
         do echo TRY $(cat /tmp/err); sleep 1; done; echo LISTED $(head -c 100 /tmp/out); \
         exec sleep 3600"
    );
    Ok(serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "app"},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": "app",
                "image": APP_IMAGE,
                "imagePullPolicy": "Never",
                "command": ["/bin/sh", "-c", script],
            }],
        },
    }))?)
}

async fn logs_containing(pods: &Api<Pod>, needle: &str) -> Result<String> {
    wait_for(
        Duration::from_secs(60),
        format!("`{needle}` in the Pod's log"),
        || async {
            let logs = pods.logs("app", &LogParams::default()).await?;
            Ok(logs.contains(needle).then_some(logs))
        },
    )
    .await
}

/// A busybox Pod `app` that sleeps (SIGTERM is ignored: the kubelet's
/// SIGKILL ends it).
fn sleeper_pod() -> Result<Pod> {
    Ok(serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "app"},
        "spec": {"containers": [{
            "name": "sleep", "image": BUSYBOX_IMAGE, "imagePullPolicy": "Never",
            "command": ["sleep", "3600"],
        }]},
    }))?)
}

/// Creates [`sleeper_pod`] with `client` and waits until it is Ready.
async fn run_sleeper(client: kube::Client) -> Result<()> {
    let pods: Api<Pod> = Api::namespaced(client, "default");
    pods.create(&PostParams::default(), &sleeper_pod()?).await?;
    wait_for(Duration::from_secs(60), "the Pod to be Ready", || async {
        Ok(pod_ready(&pods.get("app").await?).then_some(()))
    })
    .await
}

fn pod_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_reaches_the_apiserver_and_a_host_server_and_the_host_is_restored() -> Result<()> {
    let _host = crate::HOST.lock().await;
    let before = host_before().await?;
    let node = Node::start().await?;
    let t = node.timings().clone();
    eprintln!(
        "node start: total {:.2?} (network {:.2?}, control plane {:.2?}, containerd+images {:.2?}, \
         registered {:.2?}, Ready {:.2?}, controllers {:.2?})",
        t.total,
        t.network,
        t.control_plane,
        t.containerd_and_images,
        t.node_registered,
        t.node_ready,
        t.controllers
    );
    assert_eq!(
        std::fs::read_to_string("/proc/sys/net/ipv4/ip_forward")?.trim(),
        "0",
        "the node must not turn on global forwarding"
    );

    let mut image = busybox_image(APP_IMAGE)?;
    image.file_from("usr/local/bin/kubectl", &node.binaries().kubectl, 0o755)?;
    let archive = image.write_archive(&node.dir().join("images/kubectl.tar"))?;
    node.import_image(&archive)?;

    let server = host_server().await?;
    let service_ip = node
        .expose_host_port("default", "host-echo", 80, HOST_PORT)
        .await?;

    let pods: Api<Pod> = Api::namespaced(node.admin_client(), "default");
    let created = Instant::now();
    pods.create(&PostParams::default(), &app_pod(&service_ip)?)
        .await?;
    wait_for(Duration::from_secs(60), "the Pod to be Ready", || async {
        Ok(pod_ready(&pods.get("app").await?).then_some(()))
    })
    .await?;
    eprintln!(
        "first Pod Ready {:.2?} after it was created",
        created.elapsed()
    );

    // The token is authenticated (403 names the ServiceAccount), then
    // authorized once RBAC allows it.
    let logs = logs_containing(&pods, "cannot list resource").await?;
    assert!(
        logs.contains("system:serviceaccount:default:default"),
        "the apiserver did not see the Pod's ServiceAccount: {logs}"
    );
    let binding: ClusterRoleBinding = serde_json::from_value(serde_json::json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "default-view"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": "default"}],
    }))?;
    Api::<ClusterRoleBinding>::all(node.admin_client())
        .create(&PostParams::default(), &binding)
        .await?;
    let logs = logs_containing(&pods, "LISTED").await?;
    assert!(
        logs.contains("PodList"),
        "the Pod's request did not list Pods: {logs}"
    );

    let routes = logs
        .split("ROUTES")
        .nth(1)
        .and_then(|r| r.split("END").next())
        .context("the Pod printed no routes")?;
    assert!(
        !routes.contains("default"),
        "the Pod has a default route:{routes}"
    );
    assert!(
        logs.contains("RESOLV=0"),
        "the Pod's resolv.conf is not empty: {logs}"
    );
    assert!(
        logs.contains("HOST=hello-from-host"),
        "the Pod did not reach the host server: {logs}"
    );
    server.abort();

    let took = node.shutdown().await?;
    eprintln!("node shutdown and cleanup: {took:.2?}");
    assert_host_unchanged(&before);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_node_is_refused_and_a_crashed_one_is_cleaned_up() -> Result<()> {
    let _host = crate::HOST.lock().await;
    let before = host_before().await?;
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_obc-node"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let child_pid = child.id().context("the child's PID")?;
    let stdout = child.stdout.take().context("the child's stdout")?;
    let mut lines = BufReader::new(stdout).lines();
    let ready = async {
        while let Some(line) = lines.next_line().await? {
            if let Some(path) = line.strip_prefix("ready kubeconfig=") {
                return Ok(std::path::PathBuf::from(path));
            }
        }
        bail!("obc-node exited before its node was ready (its stderr is above)")
    };
    // Plus the time it may wait for another process's node to finish.
    let patience = Duration::from_secs(120) + NodeOptions::from_env().lock_wait;
    let kubeconfig = tokio::time::timeout(patience, ready).await??;
    // A Pod, so the crash leaves its shim, container, mounts, network
    // namespace and veth behind too.
    run_sleeper(client_from_kubeconfig(&kubeconfig).await?).await?;

    // Without waiting for the lock, whatever OBC_NODE_LOCK_WAIT says.
    let no_wait = NodeOptions {
        lock_wait: Duration::ZERO,
        ..NodeOptions::from_env()
    };
    let refused = Node::start_with(no_wait)
        .await
        .expect_err("a second node must not start");
    match refused.downcast_ref::<LockError>() {
        Some(LockError::Held { pid, .. }) => assert_eq!(*pid, child_pid.to_string()),
        _ => panic!("expected the lock to be held: {refused:#}"),
    }
    let message = refused.to_string();
    assert!(
        message.contains("another node environment is running")
            && message.contains(&format!("PID {child_pid}"))
            && message.contains(&format!("kill {child_pid}")),
        "the message does not say who holds the lock and what to do: {message}"
    );

    // A crash: the kubelet, containerd, Pods' sandboxes and the control
    // plane go on running, the bridge and mounts stay.
    child.start_kill()?;
    child.wait().await?;
    let node = Node::start().await?;
    assert!(
        node.timings().stale_cleanup > Duration::ZERO,
        "the crashed run was not cleaned up first"
    );
    eprintln!(
        "cleanup after the crashed run: {:.2?}",
        node.timings().stale_cleanup
    );
    node.shutdown().await?;
    assert_host_unchanged(&before);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_test_that_panics_leaves_the_host_as_it_was() -> Result<()> {
    let _host = crate::HOST.lock().await;
    let before = host_before().await?;
    let test = tokio::spawn(async {
        let node = Node::start().await?;
        run_sleeper(node.admin_client()).await?;
        panic!("a failing test, with a node and a Pod running");
        #[allow(unreachable_code)]
        anyhow::Ok(())
    });
    let outcome = test.await;
    assert!(
        outcome.as_ref().is_err_and(|e| e.is_panic()),
        "the test was to panic after its Pod ran: {outcome:?}"
    );
    assert_host_unchanged(&before);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_state_nobody_recorded_stops_the_start() -> Result<()> {
    let _host = crate::HOST.lock().await;
    // Another process's node has these directories: wait for it to end.
    host_before().await?;
    // A directory a kubelet would make, as if another node ran here.
    std::fs::create_dir("/var/log/pods")
        .context("/var/log/pods must not exist before this test")?;
    let refused = Node::start().await;
    std::fs::remove_dir("/var/log/pods")?;
    let message = format!("{:#}", refused.expect_err("the start must be refused"));
    assert!(
        message.contains("the directory /var/log/pods")
            && message.contains("not this environment's"),
        "the refusal does not name the foreign state: {message}"
    );
    Ok(())
}
