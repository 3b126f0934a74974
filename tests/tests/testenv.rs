//! Tests of the test environment itself, against the real processes.

#![allow(clippy::unwrap_used)] // tests may unwrap; the library may not

use std::ffi::OsStr;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use aws_sdk_s3::primitives::ByteStream;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kube::api::{Api, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use kube::{CustomResource, CustomResourceExt, ResourceExt};
use obc_tests::testenv::{
    self, KUBE_APISERVER_BINARY, KUBE_APISERVER_VERSION, KUBE_CONTROLLER_MANAGER_BINARY,
    S3_SERVER_BINARY, TestEnv, wait_for,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

const EVENT_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "testenv.example.com",
    version = "v1",
    kind = "Widget",
    namespaced
)]
struct WidgetSpec {
    size: i32,
}

fn forbidden(result: Result<impl std::fmt::Debug, kube::Error>) -> Result<()> {
    match result {
        Err(kube::Error::Api(status)) if status.code == 403 => Ok(()),
        other => bail!("expected HTTP 403 Forbidden from the apiserver, got {other:?}"),
    }
}

/// Waits for the next watcher event that `pick` accepts, skipping others.
async fn next_matching<S>(
    stream: &mut S,
    what: &str,
    mut pick: impl FnMut(&watcher::Event<Widget>) -> bool,
) -> Result<watcher::Event<Widget>>
where
    S: futures::Stream<Item = Result<watcher::Event<Widget>, watcher::Error>> + Unpin,
{
    tokio::time::timeout(EVENT_TIMEOUT, async {
        while let Some(event) = stream.try_next().await? {
            if pick(&event) {
                return Ok(event);
            }
        }
        bail!("watch stream ended before {what}")
    })
    .await
    .with_context(|| format!("no {what} within {EVENT_TIMEOUT:?}"))?
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crd_install_watch_and_apiserver_restart() -> Result<()> {
    let env = TestEnv::start().await?;
    let t = env.startup_timings();
    eprintln!("startup: {t:?}");

    // Through the YAML path, as tests installing the real CRDs will.
    let crd_yaml = serde_yaml::to_string(&Widget::crd())?;
    let crds = env.install_crds(&crd_yaml).await?;
    assert_eq!(crds.len(), 1);
    assert_eq!(crds[0].name_any(), "widgets.testenv.example.com");

    let widgets: Api<Widget> = Api::namespaced(env.admin_client(), "default");
    let mut events = watcher(widgets.clone(), watcher::Config::default()).boxed();
    next_matching(&mut events, "the initial list", |e| {
        matches!(e, watcher::Event::InitDone)
    })
    .await?;

    widgets
        .create(
            &PostParams::default(),
            &Widget::new("w1", WidgetSpec { size: 1 }),
        )
        .await?;
    let created = next_matching(
        &mut events,
        "the create event",
        |e| matches!(e, watcher::Event::Apply(w) if w.name_any() == "w1"),
    )
    .await?;
    let watcher::Event::Apply(created) = created else {
        bail!("unexpected event {created:?}");
    };
    assert_eq!(created.spec.size, 1);

    widgets
        .patch(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({ "spec": { "size": 2 } })),
        )
        .await?;
    let updated = next_matching(
        &mut events,
        "the update event",
        |e| matches!(e, watcher::Event::Apply(w) if w.name_any() == "w1" && w.spec.size == 2),
    )
    .await?;
    let watcher::Event::Apply(updated) = updated else {
        bail!("unexpected event {updated:?}");
    };
    assert_ne!(updated.resource_version(), created.resource_version());

    // A restart keeps the data (it lives in etcd) and the old client keeps working.
    env.restart_apiserver().await?;
    let after = wait_for(Duration::from_secs(30), "w1 after the restart", || async {
        Ok(Some(widgets.get("w1").await?))
    })
    .await?;
    assert_eq!(after.spec.size, 2);
    env.ensure_running().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_account_identity_is_limited_by_rbac() -> Result<()> {
    let env = TestEnv::start().await?;
    env.ensure_namespace("team-b").await?;
    let applied = env
        .apply_yaml(
            r#"
apiVersion: v1
kind: Namespace
metadata:
  name: team-a
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: configmap-reader
  namespace: team-a
rules:
  - apiGroups: [""]
    resources: ["configmaps"]
    verbs: ["get", "list"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: reader-reads-configmaps
  namespace: team-a
subjects:
  - kind: ServiceAccount
    name: reader
    namespace: team-a
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: configmap-reader
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: namespace-getter
rules:
  - apiGroups: [""]
    resources: ["namespaces"]
    verbs: ["get"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: reader-gets-namespaces
subjects:
  - kind: ServiceAccount
    name: reader
    namespace: team-a
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: namespace-getter
"#,
        )
        .await?;
    let kinds: Vec<String> = applied
        .iter()
        .filter_map(|o| o.types.as_ref().map(|t| t.kind.clone()))
        .collect();
    assert_eq!(
        kinds,
        [
            "Namespace",
            "Role",
            "RoleBinding",
            "ClusterRole",
            "ClusterRoleBinding"
        ]
    );
    // Something to read, created by the admin.
    let admin_cms: Api<ConfigMap> = Api::namespaced(env.admin_client(), "team-a");
    admin_cms
        .create(
            &PostParams::default(),
            &ConfigMap {
                metadata: ObjectMeta {
                    name: Some("visible".into()),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await?;

    let client = env.service_account_client("team-a", "reader").await?;

    // The apiserver says who we are.
    let review = Api::<SelfSubjectReview>::all(client.clone())
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await?;
    let username = review
        .status
        .and_then(|s| s.user_info)
        .and_then(|u| u.username);
    assert_eq!(
        username.as_deref(),
        Some("system:serviceaccount:team-a:reader")
    );

    // Allowed: list configmaps in team-a (RBAC informers may lag the binding briefly).
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "team-a");
    let listed = wait_for(
        Duration::from_secs(20),
        "the Role to take effect",
        || async { Ok(Some(cms.list(&ListParams::default()).await?)) },
    )
    .await?;
    assert!(listed.items.iter().any(|c| c.name_any() == "visible"));
    cms.get("visible").await?;

    // Denied: create in team-a, secrets in team-a, configmaps in team-b.
    let new_cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some("not-allowed".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    forbidden(cms.create(&PostParams::default(), &new_cm).await)?;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "team-a");
    forbidden(secrets.list(&ListParams::default()).await)?;
    let other: Api<ConfigMap> = Api::namespaced(client.clone(), "team-b");
    forbidden(other.list(&ListParams::default()).await)?;
    assert!(admin_cms.get_opt("not-allowed").await?.is_none());

    // Cluster-scoped grant: get one namespace, but not list them.
    let namespaces: Api<Namespace> = Api::all(client.clone());
    wait_for(
        Duration::from_secs(20),
        "the ClusterRole to take effect",
        || async { Ok(Some(namespaces.get("team-b").await?)) },
    )
    .await?;
    forbidden(namespaces.list(&ListParams::default()).await)?;

    // The kubeconfig for a controller process carries the same identity.
    let path = env.service_account_kubeconfig("team-a", "reader").await?;
    let from_file = testenv::client_from_kubeconfig(&path).await?;
    Api::<ConfigMap>::namespaced(from_file.clone(), "team-a")
        .list(&ListParams::default())
        .await?;
    forbidden(
        Api::<ConfigMap>::namespaced(from_file, "team-b")
            .list(&ListParams::default())
            .await,
    )?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_bucket_and_object_round_trip() -> Result<()> {
    let env = TestEnv::start().await?;
    let s3 = env.s3_client();

    s3.create_bucket().bucket("testenv-bucket").send().await?;
    let buckets = s3.list_buckets().send().await?;
    let names: Vec<&str> = buckets.buckets().iter().filter_map(|b| b.name()).collect();
    assert!(names.contains(&"testenv-bucket"), "buckets: {names:?}");

    s3.put_object()
        .bucket("testenv-bucket")
        .key("dir/hello.txt")
        .body(ByteStream::from_static(b"hello, bucket"))
        .send()
        .await?;
    let got = s3
        .get_object()
        .bucket("testenv-bucket")
        .key("dir/hello.txt")
        .send()
        .await?;
    let body = got.body.collect().await?.into_bytes();
    assert_eq!(&body[..], b"hello, bucket");

    // Authentication is on: a wrong secret is refused.
    let (access_key, _) = env.s3_root_credentials();
    let wrong = env.s3_client_with_credentials(&access_key, "not-the-secret");
    assert!(wrong.list_buckets().send().await.is_err());

    // Stop and start keep the data and the endpoint.
    env.stop_s3().await;
    assert!(
        s3.list_buckets().send().await.is_err(),
        "S3 still answers after stop_s3"
    );
    env.start_s3().await?;
    let again = s3
        .get_object()
        .bucket("testenv-bucket")
        .key("dir/hello.txt")
        .send()
        .await?;
    assert_eq!(
        &again.body.collect().await?.into_bytes()[..],
        b"hello, bucket"
    );
    Ok(())
}

#[test]
fn missing_binary_error_names_the_install_script() {
    let dir = tempfile::tempdir().unwrap();

    // Override pointing nowhere.
    let err = testenv::resolve_binary(
        &KUBE_APISERVER_BINARY,
        Some(OsStr::new("/nonexistent/kube-apiserver")),
        Some(dir.path()),
    )
    .unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("run `scripts/install-testenv`"), "{msg}");
    assert!(msg.contains("OBC_KUBE_APISERVER"), "{msg}");
    assert!(msg.contains("/nonexistent/kube-apiserver"), "{msg}");

    // Empty cache directory: the default location is named, and the override.
    let err = testenv::resolve_binary(&S3_SERVER_BINARY, None, Some(dir.path())).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("run `scripts/install-testenv`"), "{msg}");
    assert!(msg.contains("OBC_S3_SERVER"), "{msg}");
    assert!(msg.contains("s3s-fs-0.14.1/bin/s3s-fs"), "{msg}");

    // kube-controller-manager: cached beside kube-apiserver, of its version.
    let err = testenv::resolve_binary(&KUBE_CONTROLLER_MANAGER_BINARY, None, Some(dir.path()))
        .unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("run `scripts/install-testenv`"), "{msg}");
    assert!(msg.contains("OBC_KUBE_CONTROLLER_MANAGER"), "{msg}");
    let cached =
        format!("kube-controller-manager-{KUBE_APISERVER_VERSION}-stamped/kube-controller-manager");
    assert!(msg.contains(&cached), "{msg}");

    // An empty override counts as unset; a present file resolves.
    let bin = dir
        .path()
        .join("kube-apiserver-v1.37.2-stamped/kube-apiserver");
    std::fs::create_dir_all(bin.parent().unwrap()).unwrap();
    std::fs::write(&bin, b"").unwrap();
    let found = testenv::resolve_binary(
        &KUBE_APISERVER_BINARY,
        Some(OsStr::new("")),
        Some(dir.path()),
    )
    .unwrap();
    assert_eq!(found, bin);
}

#[test]
fn cache_dir_follows_the_install_script() {
    let p = |a: Option<&str>, x: Option<&str>, h: Option<&str>| {
        testenv::testenv_cache_dir(a.map(OsStr::new), x.map(OsStr::new), h.map(OsStr::new))
    };
    assert_eq!(p(Some("/c"), Some("/x"), Some("/h")), Some("/c".into()));
    assert_eq!(
        p(None, Some("/x"), Some("/h")),
        Some("/x/obc-testenv".into())
    );
    assert_eq!(
        p(Some(""), None, Some("/h")),
        Some("/h/.cache/obc-testenv".into())
    );
    assert_eq!(p(None, None, None), None);
}

/// The project's generated CRDs (crds/*.yaml) are accepted by the real apiserver,
/// through the same helper the provisioner tests use.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn project_crds_install_and_become_established() -> Result<()> {
    let env = TestEnv::start().await?;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../crds");
    let mut yaml = String::new();
    for entry in std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "yaml") {
            yaml.push_str("\n---\n");
            yaml.push_str(&std::fs::read_to_string(&path)?);
        }
    }
    let installed = env.install_crds(&yaml).await?;
    let mut names: Vec<String> = installed.iter().map(|c| c.name_any()).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "objectbucketclaims.objectbucket.io",
            "objectbuckets.objectbucket.io"
        ]
    );
    Ok(())
}
