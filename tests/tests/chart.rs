//! The Helm chart `charts/sample-provisioner`, with the real Helm that
//! `scripts/install-testenv` builds (`OBC_HELM`; a missing helm fails every
//! test): lint, the values schema, its CRDs against `crds/`, the pod's
//! security settings; then installed into the test apiserver, the sample
//! provisioner binary, run with the rendered Deployment's arguments and
//! environment under the chart's ServiceAccount and RBAC, binds and deletes
//! a claim on RustFS, and the apiserver's audit log shows no denied request
//! and no unused grant (`obc_tests::rbac`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail, ensure};
use aws_sdk_s3::primitives::ByteStream;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Container, Secret};
use k8s_openapi::api::rbac::v1::ClusterRole;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, PostParams};
use lib_provisioner::api::{ClaimPhase, ObjectBucketClaim};
use obc_tests::rbac::{Scope, check_rbac_is_exactly_what_is_used, grants_of};
use obc_tests::recording::{wait_gone, wait_phase};
use obc_tests::reliability::{assert_no_leaks, register_secret};
use obc_tests::rustfs::RustFs;
use obc_tests::setup::{
    create_admin_secret, repo_file, sample_provisioner_binary, spawn_provisioner,
};
use obc_tests::testenv::{HELM_BINARY, resolve_binary_from_env, s3_client_for, tail_of};
use obc_tests::{TestEnv, wait_for};
use tokio::process::Child;

const CHART: &str = "charts/sample-provisioner";
const RELEASE: &str = "sample-provisioner";
const NAMESPACE: &str = "obc-system";
const T: Duration = Duration::from_secs(60);

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Runs helm from the repository root with its own (empty) configuration
/// and cache directories; its stdout, or an error with its stderr.
struct Helm {
    bin: PathBuf,
    home: tempfile::TempDir,
}

impl Helm {
    fn new() -> Helm {
        let bin = resolve_binary_from_env(&HELM_BINARY).unwrap_or_else(|e| panic!("{e}"));
        Helm {
            bin,
            home: tempfile::tempdir().expect("helm home"),
        }
    }

    fn run(&self, args: &[&str]) -> Result<String> {
        let home = self.home.path();
        let out = std::process::Command::new(&self.bin)
            .args(args)
            .current_dir(repo())
            .env("HELM_CACHE_HOME", home.join("cache"))
            .env("HELM_CONFIG_HOME", home.join("config"))
            .env("HELM_DATA_HOME", home.join("data"))
            .stdin(Stdio::null())
            .output()
            .with_context(|| format!("running {}", self.bin.display()))?;
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        if !out.status.success() {
            bail!("helm {args:?} failed ({}):\n{stderr}\n{stdout}", out.status);
        }
        Ok(stdout)
    }

    /// `helm template` of the chart as release `sample-provisioner` in
    /// `obc-system`, with `--set`-style values.
    fn template(&self, values: &[&str]) -> Result<String> {
        let mut args = vec!["template", RELEASE, CHART, "--namespace", NAMESPACE];
        for v in values {
            args.extend(["--set", v]);
        }
        self.run(&args)
    }
}

fn documents(yaml: &str) -> Vec<serde_yaml::Value> {
    use serde::Deserialize;
    serde_yaml::Deserializer::from_str(yaml)
        .map(|d| serde_yaml::Value::deserialize(d).expect("rendered YAML"))
        .filter(|v| !v.is_null())
        .collect()
}

fn of_kind<'a>(docs: &'a [serde_yaml::Value], kind: &str) -> Vec<&'a serde_yaml::Value> {
    docs.iter().filter(|d| d["kind"] == kind).collect()
}

fn deployment(docs: &[serde_yaml::Value]) -> Deployment {
    let found = of_kind(docs, "Deployment");
    assert_eq!(found.len(), 1, "one Deployment");
    serde_yaml::from_value(found[0].clone()).expect("Deployment")
}

/// Namespaced RBAC; COSI off (its controllers watch every namespace).
const NAMESPACED: &[&str] = &[
    "rbac.scope=namespaced",
    "watchNamespaces={apps}",
    "cosi.enabled=false",
];
/// The example StorageClass and the example COSI classes on one store.
const COSI_EXAMPLES: &[&str] = &[
    "exampleStorageClass.enabled=true",
    "exampleStorageClass.endpoint=http://s3.storage.svc:9000",
    "cosi.exampleClasses.enabled=true",
    "cosi.exampleClasses.parameters.forceDelete=true",
];
const TENANT_ROLES_OFF: &[&str] = &[
    "rbac.aggregateToDefaultRoles=false",
    "rbac.objectBucketsReaderRole=false",
];
const EVERYTHING_ON: &[&str] = &[
    "exampleStorageClass.enabled=true",
    "exampleStorageClass.endpoint=http://s3.storage.svc:9000",
    "exampleStorageClass.parameters.forceDelete=true",
    "metrics.service.enabled=true",
    "metrics.serviceMonitor.enabled=true",
    "replicaCount=2",
];

#[test]
fn the_install_script_builds_the_helm_the_tests_look_for() {
    let script = repo_file("scripts/install-testenv").expect("script");
    assert!(
        script.contains("HELM_VERSION=\"${HELM_VERSION:-v4.3.2}\""),
        "scripts/install-testenv's helm version is not {}",
        HELM_BINARY.cache_path
    );
    assert_eq!(HELM_BINARY.cache_path, "helm-v4.3.2/helm");
}

#[test]
fn the_chart_lints_in_every_mode() {
    let helm = Helm::new();
    for values in [
        &[][..],
        NAMESPACED,
        EVERYTHING_ON,
        TENANT_ROLES_OFF,
        COSI_EXAMPLES,
    ] {
        let mut args = vec!["lint", "--strict", CHART];
        for v in values {
            args.extend(["--set", v]);
        }
        let out = helm.run(&args).unwrap_or_else(|e| panic!("{e:#}"));
        assert!(
            out.contains("1 chart(s) linted, 0 chart(s) failed"),
            "{out}"
        );
    }
    let docs = documents(
        &helm
            .template(&[NAMESPACED, EVERYTHING_ON].concat())
            .expect("template"),
    );
    for kind in [
        "StorageClass",
        "Service",
        "ServiceMonitor",
        "Role",
        "RoleBinding",
    ] {
        assert!(!of_kind(&docs, kind).is_empty(), "no {kind} rendered");
    }
    let docs = documents(&helm.template(COSI_EXAMPLES).expect("template"));
    for kind in ["BucketClass", "BucketAccessClass"] {
        let found = of_kind(&docs, kind);
        assert_eq!(found.len(), 1, "{kind}s rendered: {found:?}");
        assert_eq!(found[0]["spec"]["driverName"], "sample-s3.objectbucket.io");
    }
    let class = of_kind(&docs, "BucketClass")[0];
    assert_eq!(
        class["spec"]["parameters"]["endpoint"],
        "http://s3.storage.svc:9000"
    );
    assert_eq!(class["spec"]["parameters"]["forceDelete"], "true");
    let args = deployment(&docs)
        .spec
        .template
        .spec
        .expect("pod")
        .containers[0]
        .args
        .clone()
        .unwrap_or_default();
    for arg in [
        "--cosi=on",
        "--cosi-driver-name=sample-s3.objectbucket.io",
        "--cosi-binding=true",
    ] {
        assert!(args.iter().any(|a| a == arg), "{arg} not in {args:?}");
    }
    let off = documents(&helm.template(&["cosi.enabled=false"]).expect("template"));
    let args = deployment(&off).spec.template.spec.expect("pod").containers[0]
        .args
        .clone()
        .unwrap_or_default();
    assert!(args.iter().any(|a| a == "--cosi=off"), "{args:?}");
}

#[test]
fn values_the_chart_cannot_serve_are_refused_with_the_value_named() {
    let helm = Helm::new();
    for (values, expect) in [
        (&["replicaCount=-1"][..], "replicaCount"),
        (&["rbac.scope=everything"], "scope"),
        (&["replicas=2"], "replicas"),
        (&["image.digest=latest"], "digest"),
        (&["logFormat=xml"], "logFormat"),
        (
            &["leaderElection.leaseDurationSeconds=1"],
            "leaseDurationSeconds",
        ),
        (&["metrics.port=0"], "port"),
        (&["exampleStorageClass.parameters.endpoint=x"], "endpoint"),
        (
            &["replicaCount=2", "leaderElection.enabled=false"],
            "leaderElection.enabled",
        ),
        (&["rbac.scope=namespaced"], "watchNamespaces"),
        (
            &["exampleStorageClass.enabled=true"],
            "exampleStorageClass.endpoint",
        ),
        (&["serviceAccount.create=false"], "serviceAccount.name"),
        (
            &["rbac.scope=namespaced", "watchNamespaces={apps}"],
            "cosi.enabled=false",
        ),
        (&["cosi.driverName=objectbucket.io/sample-s3"], "driverName"),
        (
            &["cosi.enabled=false", "cosi.exampleClasses.enabled=true"],
            "cosi.enabled",
        ),
        (
            &["cosi.exampleClasses.enabled=true"],
            "exampleStorageClass.endpoint",
        ),
    ] {
        let err = helm
            .template(values)
            .expect_err(&format!("{values:?} was accepted"));
        let msg = format!("{err:#}");
        assert!(msg.contains(expect), "{values:?}: {msg}");
    }
}

/// The files in `dir` (`what`) and its subdirectories (`crds/cosi/`), by
/// path under `dir`, with their contents.
fn files_in(dir: &std::path::Path, what: &str) -> BTreeMap<String, String> {
    let mut files = BTreeMap::new();
    for entry in std::fs::read_dir(dir).expect(what) {
        let path = entry.expect("entry").path();
        let name = path
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        if path.is_dir() {
            for (sub, text) in files_in(&path, what) {
                files.insert(format!("{name}/{sub}"), text);
            }
        } else {
            files.insert(name, std::fs::read_to_string(&path).expect("crd"));
        }
    }
    files
}

/// The CRDs as the chart has them (`helm show crds`, and inside the
/// package `helm package` makes) are `crds/`, byte for byte.
#[test]
fn the_charts_crds_are_the_generated_ones() {
    let helm = Helm::new();
    let crds_dir = repo().join("crds");
    let generated = files_in(&crds_dir, "crds/");
    // The two of objectbucket.io, and COSI's five under crds/cosi/.
    assert_eq!(generated.len(), 7, "{:?}", generated.keys());
    let cosi = generated.keys().filter(|n| n.starts_with("cosi/")).count();
    assert_eq!(cosi, 5, "{:?}", generated.keys());
    // What `cargo run -p obc-tests --bin crdgen` writes is what is on disk.
    for (name, yaml) in lib_provisioner::api::crd_files() {
        assert_eq!(generated.get(name), Some(&yaml), "crds/{name} drifted");
    }

    let shown = helm.run(&["show", "crds", CHART]).expect("show crds");
    for (name, yaml) in &generated {
        assert!(
            shown.contains(yaml.as_str()),
            "helm show crds lacks crds/{name} as it is"
        );
    }

    let out = tempfile::tempdir().expect("dir");
    let dest = out.path().to_str().expect("utf-8 path");
    helm.run(&["package", CHART, "--destination", dest])
        .expect("package");
    let tgz = out.path().join("sample-provisioner-0.1.0.tgz");
    let status = std::process::Command::new("tar")
        .arg("-xzf")
        .arg(&tgz)
        .arg("-C")
        .arg(out.path())
        .status()
        .expect("tar");
    assert!(status.success(), "tar -xzf {}", tgz.display());
    let packaged_dir = out.path().join("sample-provisioner/crds");
    let packaged = files_in(&packaged_dir, "the package's crds/");
    assert!(
        packaged == generated,
        "the packaged chart's crds/ differ from crds/: {:?} vs {:?}",
        packaged.keys(),
        generated.keys()
    );
}

/// The pod meets the "restricted" Pod Security Standard and has its probes
/// and resources; the cluster-scope RBAC is `deploy/rbac.yaml`'s.
#[test]
fn the_rendered_pod_is_locked_down_and_the_rbac_is_deploys() {
    let helm = Helm::new();
    let docs = documents(&helm.template(&[]).expect("template"));
    let d = deployment(&docs);
    let pod = d.spec.template.spec.expect("pod spec");
    let psc = pod.security_context.expect("pod securityContext");
    assert_eq!(psc.run_as_non_root, Some(true));
    assert_eq!(psc.run_as_user, Some(65532));
    assert_eq!(
        psc.seccomp_profile.map(|s| s.type_).as_deref(),
        Some("RuntimeDefault")
    );
    let c = &pod.containers[0];
    let sc = c
        .security_context
        .clone()
        .expect("container securityContext");
    assert_eq!(sc.allow_privilege_escalation, Some(false));
    assert_eq!(sc.read_only_root_filesystem, Some(true));
    assert_eq!(sc.run_as_non_root, Some(true));
    assert_eq!(
        sc.capabilities.and_then(|c| c.drop),
        Some(vec!["ALL".to_owned()])
    );
    assert!(c.liveness_probe.is_some() && c.readiness_probe.is_some());
    let resources = c.resources.clone().expect("resources");
    assert!(resources.requests.is_some() && resources.limits.is_some());
    assert_eq!(c.image.as_deref(), Some("sample-provisioner:0.1.0"));
    assert_eq!(
        pod.service_account_name.as_deref(),
        Some("sample-provisioner")
    );

    // Cluster scope: the same grants as deploy/rbac.yaml and
    // deploy/rbac-cosi.yaml, which the sample tests check against the
    // audit log too.
    let rendered = helm.template(&[]).expect("template");
    let deploy = format!(
        "{}\n---\n{}",
        repo_file("deploy/rbac.yaml").expect("rbac"),
        repo_file("deploy/rbac-cosi.yaml").expect("rbac-cosi")
    );
    let sa = (NAMESPACE, "sample-provisioner");
    assert_eq!(
        grants_of(&rendered, sa.0, sa.1).expect("chart grants"),
        grants_of(&deploy, sa.0, sa.1).expect("deploy grants"),
    );
    let lease_names = |yaml: &str| -> Vec<serde_yaml::Value> {
        documents(yaml)
            .iter()
            .filter(|d| d["kind"] == "Role")
            .flat_map(|r| r["rules"].as_sequence().cloned().unwrap_or_default())
            .map(|rule| rule["resourceNames"].clone())
            .filter(|n| !n.is_null())
            .collect()
    };
    assert_eq!(lease_names(&rendered), lease_names(&deploy));

    // Namespaced scope: nothing on namespaced resources cluster-wide.
    let rendered = helm.template(NAMESPACED).expect("template");
    let grants = grants_of(&rendered, sa.0, sa.1).expect("grants");
    let cluster_wide: Vec<_> = grants
        .iter()
        .filter(|g| g.scope == Scope::Cluster)
        .map(|g| g.resource.as_str())
        .collect();
    assert!(
        cluster_wide
            .iter()
            .all(|r| ["objectbuckets", "objectbuckets/status", "storageclasses"].contains(r)),
        "{cluster_wide:?}"
    );
    assert!(
        grants
            .iter()
            .any(|g| g.scope == Scope::Namespace("apps".into()) && g.resource == "secrets"),
        "{grants:?}"
    );
}

/// In both scopes the provisioner may delete ConfigMaps only in its own
/// namespace (its creation intents), never cluster-wide or in a served one.
#[test]
fn configmaps_are_deleted_only_in_the_release_namespace() {
    let helm = Helm::new();
    let sa = (NAMESPACE, "sample-provisioner");
    for values in [&[][..], NAMESPACED] {
        let rendered = helm.template(values).expect("template");
        let deletes: Vec<Scope> = grants_of(&rendered, sa.0, sa.1)
            .expect("grants")
            .into_iter()
            .filter(|g| g.group.is_empty() && g.resource == "configmaps" && g.verb == "delete")
            .map(|g| g.scope)
            .collect();
        assert_eq!(
            deletes,
            vec![Scope::Namespace(NAMESPACE.into())],
            "{values:?}: ConfigMap delete is granted in {deletes:?}"
        );
    }
}

const AGGREGATE: &str = "rbac.authorization.k8s.io/aggregate-to-";

/// The ClusterRoles of `yaml`: name → (aggregation labels, rules).
fn cluster_roles(yaml: &str) -> BTreeMap<String, (Vec<String>, serde_yaml::Value)> {
    documents(yaml)
        .iter()
        .filter(|d| d["kind"] == "ClusterRole")
        .map(|d| {
            let labels = d["metadata"]["labels"]
                .as_mapping()
                .into_iter()
                .flatten()
                .filter_map(|(k, v)| {
                    let k = k.as_str()?;
                    (k.starts_with(AGGREGATE) && v == "true").then(|| k.to_owned())
                })
                .collect();
            let name = d["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            (name, (labels, d["rules"].clone()))
        })
        .collect()
}

/// The chart's tenant roles are `deploy/tenant-roles.yaml`'s in both scopes
/// (names, aggregation labels, rules); they aggregate claims only, never
/// their status or ObjectBuckets; values switch them off.
#[test]
fn the_tenant_roles_are_deploys_and_can_be_switched_off() {
    let helm = Helm::new();
    let deploy = cluster_roles(&repo_file("deploy/tenant-roles.yaml").expect("tenant roles"));
    assert_eq!(deploy.len(), 5, "{deploy:?}");
    for (name, (labels, rules)) in &deploy {
        let text = serde_yaml::to_string(rules).expect("rules");
        if labels.is_empty() {
            continue;
        }
        // Never the controllers' status, nor a cluster-scoped kind.
        let resources: Vec<String> = rules
            .as_sequence()
            .into_iter()
            .flatten()
            .flat_map(|r| r["resources"].as_sequence().cloned().unwrap_or_default())
            .filter_map(|r| r.as_str().map(str::to_owned))
            .collect();
        assert!(
            resources
                .iter()
                .all(|r| ["objectbucketclaims", "bucketclaims", "bucketaccesses"]
                    .contains(&r.as_str())),
            "{name}, aggregated to {labels:?}, grants {text}"
        );
    }
    let cosi_off = cluster_roles(&helm.template(&["cosi.enabled=false"]).expect("template"));
    assert!(
        cosi_off.keys().all(|n| !n.contains("cosi")),
        "cosi.enabled=false still renders {:?}",
        cosi_off.keys()
    );
    for values in [&[][..], NAMESPACED] {
        let rendered = cluster_roles(&helm.template(values).expect("template"));
        // COSI's only where COSI is served (NAMESPACED turns it off).
        let cosi = !values.contains(&"cosi.enabled=false");
        for (name, role) in &deploy {
            let expected = (cosi || !name.contains("-cosi-")).then_some(role);
            assert_eq!(rendered.get(name), expected, "{values:?}: {name}");
        }
    }
    let off = cluster_roles(&helm.template(TENANT_ROLES_OFF).expect("template"));
    assert!(
        off.keys().all(|n| !deploy.contains_key(n)),
        "switched off, still rendered: {:?}",
        off.keys()
    );
}

/// How the chart gets into the apiserver.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Install {
    /// `helm install` (CRDs from the chart's crds/), then `helm uninstall`.
    Helm,
    /// `helm template` (and `helm show crds`), server-side applied.
    TemplateApplied,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn installed_with_helm_the_provisioner_serves_a_claim_under_the_charts_rbac() {
    serve_a_claim(Install::Helm, &[], "default", None)
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_namespaced_rbac_the_provisioner_serves_its_namespaces_only() {
    serve_a_claim(
        Install::TemplateApplied,
        NAMESPACED,
        "apps",
        Some("default"),
    )
    .await
    .unwrap_or_else(|e| panic!("{e:#}"));
}

/// Installs the chart with the example StorageClass pointed at RustFS, runs
/// the sample provisioner as the rendered Deployment would, and binds,
/// uses and deletes `deploy/example-claim.yaml` in `claim_ns`. A claim in
/// `ignored_ns` (outside the served namespaces) must be left alone.
async fn serve_a_claim(
    install: Install,
    extra_values: &[&str],
    claim_ns: &str,
    ignored_ns: Option<&str>,
) -> Result<()> {
    let helm = Helm::new();
    let env = TestEnv::start().await?;
    let store = RustFs::start(env.dir()).await?;
    let endpoint = store.endpoint().trim_end_matches('/').to_owned();
    let admin = env.admin_client();
    let port = obc_tests::testenv::free_port()?;
    let mut values = vec![
        "exampleStorageClass.enabled=true".to_owned(),
        format!("exampleStorageClass.endpoint={endpoint}"),
        "exampleStorageClass.parameters.forceDelete=true".to_owned(),
        format!("metrics.port={port}"),
    ];
    let cosi = !extra_values.contains(&"cosi.enabled=false");
    if cosi {
        values.push("cosi.exampleClasses.enabled=true".to_owned());
        values.push("cosi.exampleClasses.parameters.forceDelete=true".to_owned());
    }
    values.extend(extra_values.iter().map(|v| (*v).to_owned()));
    let mut set = Vec::new();
    for v in &values {
        set.extend(["--set", v.as_str()]);
    }

    // The user's part: the namespaces, the store's admin Secret, the chart.
    for ns in std::iter::once(claim_ns).chain(ignored_ns) {
        env.ensure_namespace(ns).await?;
    }
    let (ak, sk) = store.root_credentials();
    register_secret(&sk);
    let kubeconfig = env.kubeconfig_path().to_str().context("path")?.to_owned();
    let manifests = match install {
        Install::Helm => {
            let mut args = vec![
                "install",
                RELEASE,
                CHART,
                "--namespace",
                NAMESPACE,
                "--create-namespace",
                "--kubeconfig",
                &kubeconfig,
            ];
            args.extend(&set);
            helm.run(&args)?;
            helm.run(&[
                "get",
                "manifest",
                RELEASE,
                "-n",
                NAMESPACE,
                "--kubeconfig",
                &kubeconfig,
            ])?
        }
        Install::TemplateApplied => {
            env.install_crds(&helm.run(&["show", "crds", CHART])?)
                .await?;
            env.ensure_namespace(NAMESPACE).await?;
            let rendered = helm.template(&values.iter().map(String::as_str).collect::<Vec<_>>())?;
            env.apply_yaml(&rendered)
                .await
                .context("applying the rendered chart")?;
            rendered
        }
    };
    create_admin_secret(&admin, NAMESPACE, "sample-s3-admin", &ak, &sk).await?;
    let docs = documents(&manifests);

    // The Deployment's pod, as a process.
    let d = deployment(&docs);
    let pod = d.spec.template.spec.context("pod spec")?;
    let sa = pod
        .service_account_name
        .clone()
        .context("serviceAccountName")?;
    let container = pod.containers[0].clone();
    let sa_kubeconfig = env.service_account_kubeconfig(NAMESPACE, &sa).await?;
    let log = env.dir().join("chart-provisioner.log");
    let mut child = run_pod_as_process(&container, port, &sa_kubeconfig, &log).await?;
    let served = serve_the_example(&admin, &store, &docs, (claim_ns, ignored_ns), cosi).await;
    served.map_err(|e| anyhow!("{e:#}\nthe provisioner's log ends:\n{}", tail_of(&log, 40)))?;

    // SIGTERM: it releases the Lease and exits 0, as in a rollout.
    let pid = child.id().context("pid")?;
    let status = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()?;
    ensure!(status.success(), "kill -TERM {pid}");
    let exit = tokio::time::timeout(T, child.wait()).await??;
    let text = std::fs::read_to_string(&log)?;
    ensure!(
        exit.success(),
        "the provisioner exited with {exit}:\n{text}"
    );
    ensure!(
        text.lines().all(|l| l.starts_with('{')),
        "--log-format=json: every line is a JSON object:\n{text}"
    );

    let needed = obc_tests::cosi_e2e::obc_and_cosi_needed_but_not_exercised();
    check_rbac_is_exactly_what_is_used(
        &env.audit_log_path(),
        &manifests,
        "the chart's RBAC",
        (NAMESPACE, &sa),
        &needed,
    )?;
    store.stop().await;
    assert_no_leaks(env.dir()).context("no credential in any log")?;

    if install == Install::Helm {
        // Uninstalled: its RBAC goes, the CRDs (and so every claim) stay.
        helm.run(&[
            "uninstall",
            RELEASE,
            "-n",
            NAMESPACE,
            "--kubeconfig",
            &kubeconfig,
        ])?;
        let roles = Api::<ClusterRole>::all(admin.clone());
        wait_gone(&roles, RELEASE, T).await?;
        let crds = Api::<CustomResourceDefinition>::all(admin.clone());
        for crd in [
            "objectbucketclaims.objectbucket.io",
            "objectbuckets.objectbucket.io",
            "bucketclaims.objectstorage.k8s.io",
            "bucketaccesses.objectstorage.k8s.io",
        ] {
            crds.get(crd)
                .await
                .with_context(|| format!("{crd} after helm uninstall"))?;
        }
    }
    Ok(())
}

/// The Deployment's pod, as a process: its arguments and environment, its
/// ServiceAccount's `kubeconfig`. Only the metrics address is narrowed to
/// loopback (a pod has a network of its own), and moved to another port if
/// a test running beside this one took the rendered `port` before the
/// process bound it. Returns once the probes the Deployment declares answer.
async fn run_pod_as_process(
    container: &Container,
    port: u16,
    kubeconfig: &Path,
    log: &Path,
) -> Result<Child> {
    let args = container.args.clone().unwrap_or_default();
    let rendered = format!("--metrics-addr=0.0.0.0:{port}");
    ensure!(args.contains(&rendered), "{args:?}");
    let mut port = port;
    for attempt in 1..=3 {
        let loopback = format!("--metrics-addr=127.0.0.1:{port}");
        let (mut cmd, rust_log) = pod_command(container)?;
        cmd.args(
            args.iter()
                .map(|a| if *a == rendered { &loopback } else { a }),
        );
        let mut child = spawn_provisioner(&mut cmd, kubeconfig, &rust_log, log)?;
        let exit = tokio::select! {
            probes = probes_answer(container, port) => {
                probes?;
                return Ok(child);
            }
            exit = child.wait() => exit?,
        };
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if attempt < 3 && text.to_lowercase().contains("address already in use") {
            eprintln!("metrics port {port} was taken before the provisioner bound it: retrying");
            std::fs::remove_file(log)?;
            port = obc_tests::testenv::free_port()?;
            continue;
        }
        bail!("the provisioner exited with {exit} before its probes answered:\n{text}");
    }
    unreachable!("the last attempt returns or fails")
}

/// The container's command and environment (`fieldRef`s resolved as the
/// kubelet would), and its `RUST_LOG`.
fn pod_command(container: &Container) -> Result<(tokio::process::Command, String)> {
    let mut cmd = tokio::process::Command::new(sample_provisioner_binary()?);
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default());
    let mut rust_log = "info".to_owned();
    for var in container.env.clone().unwrap_or_default() {
        let field = var
            .value_from
            .as_ref()
            .and_then(|f| f.field_ref.as_ref())
            .map(|f| f.field_path.as_str());
        let value = match (var.value, field) {
            (Some(v), _) => v,
            (None, Some("metadata.name")) => "sample-provisioner-5d8c7b9f4-x2x7q".to_owned(),
            (None, Some("metadata.namespace")) => NAMESPACE.to_owned(),
            other => bail!("env {} from {other:?}: not handled here", var.name),
        };
        if var.name == "RUST_LOG" {
            rust_log = value.clone();
        }
        cmd.env(&var.name, value);
    }
    Ok((cmd, rust_log))
}

/// Waits until the container's liveness and readiness probes answer 200 on
/// `port`.
async fn probes_answer(container: &Container, port: u16) -> Result<()> {
    let http = reqwest::Client::new();
    for probe in [&container.liveness_probe, &container.readiness_probe] {
        let get = probe
            .as_ref()
            .and_then(|p| p.http_get.clone())
            .context("an httpGet probe")?;
        let url = format!(
            "http://127.0.0.1:{port}{}",
            get.path.as_deref().unwrap_or("/")
        );
        wait_for(T, format!("{url} to answer 200"), || {
            let (http, url) = (http.clone(), url.clone());
            async move {
                Ok(http
                    .get(&url)
                    .send()
                    .await?
                    .status()
                    .is_success()
                    .then_some(()))
            }
        })
        .await?;
    }
    Ok(())
}

/// Binds, uses and deletes `deploy/example-claim.yaml` in `claim_ns` (and
/// the COSI example if `cosi`); a claim in `ignored_ns` must be left alone.
async fn serve_the_example(
    admin: &kube::Client,
    store: &RustFs,
    docs: &[serde_yaml::Value],
    (claim_ns, ignored_ns): (&str, Option<&str>),
    cosi: bool,
) -> Result<()> {
    let (ak, _) = store.root_credentials();
    // The example claim, in the served namespace (and one outside it).
    let mut claim: ObjectBucketClaim =
        serde_yaml::from_str(&repo_file("deploy/example-claim.yaml")?)?;
    let name = claim.metadata.name.clone().context("claim name")?;
    let class = claim.spec.storage_class_name.clone();
    ensure!(
        of_kind(docs, "StorageClass")
            .iter()
            .any(|c| c["metadata"]["name"] == class.as_str()),
        "the chart's example StorageClass is not {class}, the example claim's"
    );
    for ns in std::iter::once(claim_ns).chain(ignored_ns) {
        claim.metadata.namespace = Some(ns.to_owned());
        Api::<ObjectBucketClaim>::namespaced(admin.clone(), ns)
            .create(&PostParams::default(), &claim)
            .await
            .with_context(|| format!("creating the claim in {ns}"))?;
    }
    let bound = wait_phase(admin, claim_ns, &name, ClaimPhase::Bound, T).await?;
    ensure!(bound.spec.object_bucket_name.is_some(), "{bound:?}");

    // Its Secret and ConfigMap reach the bucket.
    let secret = Api::<Secret>::namespaced(admin.clone(), claim_ns)
        .get(&name)
        .await?;
    let cm = Api::<ConfigMap>::namespaced(admin.clone(), claim_ns)
        .get(&name)
        .await?;
    let data = secret.data.unwrap_or_default();
    let value = |k: &str| {
        data.get(k)
            .map(|v| String::from_utf8_lossy(&v.0).into_owned())
            .unwrap_or_default()
    };
    let (key, secret_key) = (value("AWS_ACCESS_KEY_ID"), value("AWS_SECRET_ACCESS_KEY"));
    register_secret(&secret_key);
    ensure!(key != ak, "the claim got the admin's key");
    let d = cm.data.unwrap_or_default();
    let bucket = d.get("BUCKET_NAME").cloned().context("BUCKET_NAME")?;
    let claim_s3 = s3_client_for(
        &format!("http://{}:{}", d["BUCKET_HOST"], d["BUCKET_PORT"]),
        &key,
        &secret_key,
    );
    claim_s3
        .put_object()
        .bucket(&bucket)
        .key("hello.txt")
        .body(ByteStream::from_static(b"hello from the chart"))
        .send()
        .await
        .context("writing with the claim's credentials")?;

    if cosi {
        serve_cosi_example(admin, claim_ns, store).await?;
    }

    if let Some(ns) = ignored_ns {
        let other = Api::<ObjectBucketClaim>::namespaced(admin.clone(), ns)
            .get(&name)
            .await?;
        ensure!(
            other.status.is_none() && other.metadata.finalizers.is_none(),
            "the claim in {ns}, outside watchNamespaces, was touched: {other:?}"
        );
        Api::<ObjectBucketClaim>::namespaced(admin.clone(), ns)
            .delete(&name, &DeleteParams::default())
            .await?;
    }

    // Deleted: the claim goes, and its bucket (Delete, forceDelete) with it.
    let claims = Api::<ObjectBucketClaim>::namespaced(admin.clone(), claim_ns);
    claims.delete(&name, &DeleteParams::default()).await?;
    wait_gone(&claims, &name, T).await?;
    let root = store.root_client();
    wait_for(T, "the bucket to be deleted", || {
        let (root, bucket) = (root.clone(), bucket.clone());
        async move {
            Ok(root
                .head_bucket()
                .bucket(bucket)
                .send()
                .await
                .is_err()
                .then_some(()))
        }
    })
    .await?;
    Ok(())
}

/// `deploy/example-bucketclaim.yaml` (a BucketClaim and a ReadWrite
/// BucketAccess) in `ns`, served through the chart's example COSI classes:
/// both become ready, the access Secret's keys write to the bucket,
/// deleting the BucketAccess deletes its Secret and deleting the claim
/// (Delete) deletes the bucket.
async fn serve_cosi_example(admin: &kube::Client, ns: &str, store: &RustFs) -> Result<()> {
    use obc_tests::cosi_e2e::{Kind, access_keys, api, status_str, wait_ready};
    let mut names = Vec::new();
    for doc in repo_file("deploy/example-bucketclaim.yaml")?.split("\n---") {
        let mut o: kube::api::DynamicObject = serde_yaml::from_str(doc)?;
        o.metadata.namespace = Some(ns.to_owned());
        let kind = match o.types.as_ref().map(|t| t.kind.as_str()) {
            Some("BucketClaim") => Kind::BucketClaim,
            Some("BucketAccess") => Kind::BucketAccess,
            other => bail!("deploy/example-bucketclaim.yaml holds a {other:?}"),
        };
        let name = o.metadata.name.clone().context("name")?;
        api(admin, kind, ns)
            .create(&PostParams::default(), &o)
            .await?;
        names.push((kind, name, o));
    }
    let (claim, access) = match names.as_slice() {
        [(Kind::BucketClaim, c, _), (Kind::BucketAccess, a, o)] => {
            (c.clone(), (a.clone(), o.clone()))
        }
        _ => bail!("deploy/example-bucketclaim.yaml: a BucketClaim, then a BucketAccess"),
    };
    let bound = wait_ready(admin, Kind::BucketClaim, ns, &claim, T).await?;
    wait_ready(admin, Kind::BucketAccess, ns, &access.0, T).await?;
    let secret = access.1.data["spec"]["bucketClaims"][0]["accessSecretName"]
        .as_str()
        .context("accessSecretName")?
        .to_owned();
    let keys = access_keys(admin, ns, &secret).await?;
    keys.s3()
        .put_object()
        .bucket(&keys.bucket)
        .key("hello.txt")
        .body(ByteStream::from_static(b"hello through COSI"))
        .send()
        .await
        .context("writing with the BucketAccess's keys")?;
    let bucket_object = status_str(&bound, "boundBucketName").context("boundBucketName")?;
    let accesses = api(admin, Kind::BucketAccess, ns);
    accesses.delete(&access.0, &DeleteParams::default()).await?;
    wait_gone(&accesses, &access.0, T).await?;
    wait_gone(&Api::<Secret>::namespaced(admin.clone(), ns), &secret, T).await?;
    let claims = api(admin, Kind::BucketClaim, ns);
    claims.delete(&claim, &DeleteParams::default()).await?;
    wait_gone(&claims, &claim, T).await?;
    wait_gone(&api(admin, Kind::Bucket, ""), &bucket_object, T).await?;
    let root = store.root_client();
    wait_for(T, "the COSI bucket to be deleted", || {
        let (root, bucket) = (root.clone(), keys.bucket.clone());
        async move {
            Ok(root
                .head_bucket()
                .bucket(bucket)
                .send()
                .await
                .is_err()
                .then_some(()))
        }
    })
    .await?;
    Ok(())
}
