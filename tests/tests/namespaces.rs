//! With kube-controller-manager running (garbage collector, namespace
//! controller): what users hit in real clusters and the bare control plane
//! of the other tests cannot show. Deleting a namespace full of claims (with
//! the provisioner running, and stopped then started), `--cascade=foreground`
//! and `--cascade=orphan` on a claim, and a claim whose finalizer a user
//! stripped while the provisioner was down.
//!
//! The provisioner is the sample S3 provisioner as a process
//! (`crash-provisioner`) under the ServiceAccount and RBAC of `deploy/`, on
//! s3s-fs (`credentialsMode: shared-admin`), as in the reliability suite,
//! whose check that the cluster and the store agree exactly
//! ([`obc_tests::reliability::agreement`]) every test ends with.
//!
//! ```sh
//! cargo test -p obc-tests --test e2e -- namespaces:: --test-threads=2
//! ```

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail, ensure};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, Resource, ResourceExt};
use lib_provisioner::api::{
    BucketPhase, ClaimPhase, FINALIZER, ObjectBucket, ObjectBucketClaim, ObjectBucketClaimSpec,
};
use obc_tests::reliability::{
    Classes, Deleted, Expectations, Kind, Launch, PROVISIONER, Proc, SHARED_BUCKET,
    assert_no_leaks, bucket_of, converge, create_classes, install_sample, log_root,
    register_claim_secrets, store_buckets, wait_all_bound,
};
use obc_tests::{TestEnv, wait_for};

const BIN: &str = env!("CARGO_BIN_EXE_crash-provisioner");
/// How long one claim may take to bind or go.
const T: Duration = Duration::from_secs(45);
/// The bound asserted on a namespace's deletion once the provisioner runs
/// (measured: see `docs/testenv.md`). The namespace controller looks again
/// at a namespace whose content is still finalizing about every 8 s.
const NAMESPACE_BOUND: Duration = Duration::from_secs(60);

fn logs() -> &'static Path {
    log_root(Path::new(env!("CARGO_TARGET_TMPDIR")))
}

/// The claims of each kind a namespace gets: name and kind.
fn each_kind() -> Vec<(String, Kind)> {
    [
        ("gen-delete", Kind::GeneratedDelete),
        ("exact-delete", Kind::ExactDelete),
        ("gen-retain", Kind::GeneratedRetain),
        ("exact-retain", Kind::ExactRetain),
        ("brownfield", Kind::Shared),
    ]
    .into_iter()
    .map(|(n, k)| (n.to_owned(), k))
    .collect()
}

/// A control plane with kube-controller-manager, the sample's RBAC, admin
/// Secret, brownfield bucket and classes.
struct Cluster {
    env: TestEnv,
    admin: Client,
    kubeconfig: PathBuf,
    classes: Classes,
}

impl Cluster {
    async fn start() -> Result<Self> {
        let env = TestEnv::start().await?;
        let kubeconfig = install_sample(&env).await?;
        // After the CRDs: the collector discovers resource types at start.
        env.start_controller_manager().await?;
        let admin = env.admin_client();
        let classes = create_classes(&env, &admin, "ns", PROVISIONER).await?;
        Ok(Self {
            env,
            admin,
            kubeconfig,
            classes,
        })
    }

    fn launch(&self, tag: &str) -> Launch {
        Launch::new(BIN, &self.kubeconfig, tag)
    }

    fn provisioner(&self, tag: &str) -> Result<Proc> {
        self.launch(tag).start(logs())
    }

    fn claims(&self, ns: &str) -> Api<ObjectBucketClaim> {
        Api::namespaced(self.admin.clone(), ns)
    }

    async fn create(&self, ns: &str, name: &str, spec: ObjectBucketClaimSpec) -> Result<()> {
        self.claims(ns)
            .create(&PostParams::default(), &ObjectBucketClaim::new(name, spec))
            .await
            .with_context(|| format!("creating claim {ns}/{name}"))?;
        Ok(())
    }

    /// Creates the claims `(name, kind)` in `ns` (exact bucket names made
    /// unique by `ns`).
    async fn create_all(&self, ns: &str, claims: &[(String, Kind)]) -> Result<()> {
        for (name, kind) in claims {
            self.create(ns, name, kind.spec(&self.classes, &format!("{ns}-{name}")))
                .await?;
        }
        Ok(())
    }

    /// What must remain of claim `ns/name` once it is deleted.
    async fn record(&self, ns: &str, name: &str, kind: &Kind) -> Result<Deleted> {
        let claim = self.claims(ns).get(name).await?;
        Ok(Deleted {
            namespace: ns.to_owned(),
            name: name.to_owned(),
            uid: claim.uid().unwrap_or_default(),
            bucket: bucket_of(&self.admin, &claim).await,
            kind: kind.clone(),
            was_bound: claim.status.as_ref().and_then(|s| s.phase) == Some(ClaimPhase::Bound),
        })
    }

    fn expect(&self, namespaces: &[&str], deleted: Vec<Deleted>) -> Expectations {
        Expectations {
            namespaces: namespaces.iter().map(|n| (*n).to_owned()).collect(),
            preexisting: BTreeSet::from([SHARED_BUCKET.to_owned()]),
            deleted,
            ..Default::default()
        }
    }

    /// The cluster and the store agree (nothing lost, nothing orphaned), and
    /// no log holds a credential.
    async fn assert_agreement(&self, x: &Expectations) -> Result<()> {
        let a = converge(&self.env, &self.admin, x, T).await?;
        ensure!(
            a.ok(),
            "the cluster and the store disagree:\n{}",
            a.problems()
        );
        let namespaces: Vec<&str> = x.namespaces.iter().map(String::as_str).collect();
        register_claim_secrets(&self.admin, &namespaces).await?;
        assert_no_leaks(logs())?;
        Ok(())
    }

    /// The brownfield bucket and its data are still there.
    async fn assert_brownfield_data_kept(&self) -> Result<()> {
        self.env
            .s3_client()
            .get_object()
            .bucket(SHARED_BUCKET)
            .key("keep.txt")
            .send()
            .await
            .context("the brownfield bucket's data")?;
        Ok(())
    }

    /// Deletes namespace `ns` (as `kubectl delete namespace` does).
    async fn delete_namespace(&self, ns: &str) -> Result<Instant> {
        Api::<Namespace>::all(self.admin.clone())
            .delete(ns, &DeleteParams::default())
            .await
            .with_context(|| format!("deleting namespace {ns}"))?;
        Ok(Instant::now())
    }

    /// Waits until namespace `ns` is gone; returns how long after `since`.
    async fn wait_namespace_gone(&self, ns: &str, since: Instant) -> Result<Duration> {
        let namespaces: Api<Namespace> = Api::all(self.admin.clone());
        let claims = self.claims(ns);
        wait_for(
            NAMESPACE_BOUND,
            format_args!("namespace {ns} to be gone"),
            || async {
                match namespaces.get_opt(ns).await? {
                    None => Ok(Some(since.elapsed())),
                    Some(n) => {
                        // Name what holds it, for the timeout message.
                        let left: Vec<String> = claims
                            .list(&ListParams::default())
                            .await?
                            .items
                            .iter()
                            .map(|c| format!("{} {:?}", c.name_any(), c.finalizers()))
                            .collect();
                        let conditions = n
                            .status
                            .and_then(|s| s.conditions)
                            .unwrap_or_default()
                            .into_iter()
                            .filter(|c| c.status == "True")
                            .map(|c| c.message.unwrap_or(c.type_))
                            .collect::<Vec<_>>();
                        bail!("still there: claims {left:?}; {conditions:?}")
                    }
                }
            },
        )
        .await
    }

    /// Every ObjectBucket of a claim in `ns`: what is left of the namespace
    /// in cluster-scoped objects.
    async fn object_buckets_of(&self, ns: &str) -> Result<Vec<ObjectBucket>> {
        Ok(Api::<ObjectBucket>::all(self.admin.clone())
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter(|ob| {
                ob.spec
                    .claim_ref
                    .as_ref()
                    .and_then(|r| r.namespace.as_deref())
                    == Some(ns)
            })
            .collect())
    }

    /// What is left of a deleted namespace's claims: only the ObjectBuckets
    /// of bound Retain claims (and perhaps of those in `maybe`), Released and
    /// without our finalizer, whose buckets still exist; no bucket of a
    /// Delete claim.
    async fn assert_only_retained_left(
        &self,
        ns: &str,
        deleted: &[Deleted],
        maybe: &[Deleted],
    ) -> Result<()> {
        let obs = self.object_buckets_of(ns).await?;
        let store = store_buckets(&self.env.s3_client()).await?;
        let mut expected = BTreeSet::new();
        for d in deleted {
            let bucket = d.bucket.clone().unwrap_or_default();
            match (d.kind.keeps_bucket(), d.kind.greenfield(), d.was_bound) {
                (true, true, true) => {
                    expected.insert(format!("obc-{ns}-{}", d.name));
                    ensure!(
                        store.contains_key(&bucket),
                        "retained bucket {bucket} of {} is gone",
                        d.name
                    );
                }
                (false, true, _) => ensure!(
                    !store.contains_key(&bucket),
                    "bucket {bucket} of {} (reclaim Delete) is left",
                    d.name
                ),
                _ => {}
            }
        }
        let allowed: BTreeSet<String> = maybe
            .iter()
            .filter(|d| d.kind.keeps_bucket() && d.kind.greenfield())
            .map(|d| format!("obc-{ns}-{}", d.name))
            .collect();
        let left: BTreeSet<String> = obs.iter().map(|ob| ob.name_any()).collect();
        ensure!(
            expected.is_subset(&left)
                && left
                    .iter()
                    .all(|l| expected.contains(l) || allowed.contains(l)),
            "ObjectBuckets left of namespace {ns}: {left:?}, expected {expected:?} (and perhaps {allowed:?})"
        );
        for ob in &obs {
            ensure!(
                ob.status.as_ref().and_then(|s| s.phase) == Some(BucketPhase::Released),
                "{} is not Released",
                ob.name_any()
            );
            ensure!(
                !ob.finalizers().iter().any(|f| f == FINALIZER),
                "{} keeps the finalizer",
                ob.name_any()
            );
        }
        Ok(())
    }
}

/// The requests in the audit log made by `user` (the apiserver audits
/// ServiceAccounts): `(resource, verb)` of each that was answered 2xx.
fn audited(env: &TestEnv, user: &str) -> Result<BTreeSet<(String, String)>> {
    let log = std::fs::read_to_string(env.audit_log_path()).context("audit log")?;
    let mut seen = BTreeSet::new();
    for line in log.lines() {
        let e: serde_json::Value = serde_json::from_str(line).context("audit json")?;
        if e["user"]["username"] != user {
            continue;
        }
        let code = e["responseStatus"]["code"].as_u64().unwrap_or_default();
        if (200..300).contains(&code) {
            seen.insert((
                e["objectRef"]["resource"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                e["verb"].as_str().unwrap_or_default().to_owned(),
            ));
        }
    }
    Ok(seen)
}

const NAMESPACE_CONTROLLER: &str = "system:serviceaccount:kube-system:namespace-controller";
const GARBAGE_COLLECTOR: &str = "system:serviceaccount:kube-system:generic-garbage-collector";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_namespace_with_claims_of_each_kind_leaves_nothing_behind() -> Result<()> {
    let c = Cluster::start().await?;
    let ns = "apps";
    c.env.ensure_namespace(ns).await?;
    let mut provisioner = c.provisioner("namespace-delete")?;
    let bound = each_kind();
    c.create_all(ns, &bound).await?;
    let names: Vec<String> = bound.iter().map(|(n, _)| n.clone()).collect();
    wait_all_bound(&c.admin, ns, &names, T).await?;
    // A claim whose class does not exist: Pending, refused before the
    // finalizer.
    c.create(
        ns,
        "no-class",
        ObjectBucketClaimSpec {
            storage_class_name: "no-such-class".into(),
            generate_bucket_name: Some("none".into()),
            ..Default::default()
        },
    )
    .await?;
    // Claims still provisioning as the namespace goes: created right
    // before the deletion, of every kind.
    let racing: Vec<(String, Kind)> = each_kind()
        .into_iter()
        .map(|(n, k)| (format!("late-{n}"), k))
        .collect();
    c.create_all(ns, &racing).await?;
    let mut deleted = Vec::new();
    for (name, kind) in bound.iter().chain(&racing) {
        deleted.push(c.record(ns, name, kind).await?);
    }
    let since = c.delete_namespace(ns).await?;
    let took = c.wait_namespace_gone(ns, since).await?;
    println!(
        "namespace {ns} with {} claims ({} Bound, {} provisioning, 1 without a class) gone in {took:.1?}",
        deleted.len() + 1,
        bound.len(),
        racing.len()
    );
    ensure!(provisioner.is_running(), "{}", provisioner.log_tail(30));
    // A late Retain claim may have been bound before it went, and then
    // keeps its bucket too.
    c.assert_only_retained_left(ns, &deleted[..bound.len()], &deleted[bound.len()..])
        .await?;
    c.assert_brownfield_data_kept().await?;
    c.assert_agreement(&c.expect(&[ns], deleted)).await?;
    // The namespace controller did it under its own ServiceAccount.
    let by_namespace_controller = audited(&c.env, NAMESPACE_CONTROLLER)?;
    ensure!(
        by_namespace_controller.contains(&("objectbucketclaims".into(), "deletecollection".into())),
        "{by_namespace_controller:?}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_deleted_while_the_provisioner_is_down_goes_once_it_is_back() -> Result<()> {
    let c = Cluster::start().await?;
    let ns = "apps";
    c.env.ensure_namespace(ns).await?;
    let mut provisioner = c.provisioner("before")?;
    let bound = each_kind();
    c.create_all(ns, &bound).await?;
    let names: Vec<String> = bound.iter().map(|(n, _)| n.clone()).collect();
    wait_all_bound(&c.admin, ns, &names, T).await?;
    provisioner.kill().await;
    // A claim caught in the middle of provisioning: the provisioner dies
    // right after creating its bucket (a reserved ObjectBucket, no Secret).
    let mut crashing = c
        .launch("crashing")
        .armed("after-bucket-created")
        .start(logs())?;
    c.create(
        ns,
        "provisioning",
        Kind::GeneratedDelete.spec(&c.classes, "provisioning"),
    )
    .await?;
    wait_for(T, "the provisioner to crash after the bucket", || {
        let crashed = crashing.crashed_at("after-bucket-created");
        async move { Ok(crashed.then_some(())) }
    })
    .await?;
    let mut deleted = Vec::new();
    for (name, kind) in bound
        .iter()
        .chain(&[("provisioning".to_owned(), Kind::GeneratedDelete)])
    {
        deleted.push(c.record(ns, name, kind).await?);
    }
    let since = c.delete_namespace(ns).await?;
    // Without the provisioner the namespace stays, its claims held by the
    // finalizer.
    tokio::time::sleep(Duration::from_secs(12)).await;
    let namespace = Api::<Namespace>::all(c.admin.clone()).get(ns).await?;
    let phase = namespace.status.and_then(|s| s.phase);
    ensure!(phase.as_deref() == Some("Terminating"), "{phase:?}");
    let left = c.claims(ns).list(&ListParams::default()).await?.items;
    ensure!(
        left.len() == deleted.len() && left.iter().all(|c| c.meta().deletion_timestamp.is_some()),
        "claims while the provisioner is down: {:?}",
        left.iter().map(|c| c.name_any()).collect::<Vec<_>>()
    );
    let restarted = Instant::now();
    let mut provisioner = c.provisioner("after")?;
    let took = c.wait_namespace_gone(ns, restarted).await?;
    println!(
        "namespace {ns} ({} claims) gone {took:.1?} after the provisioner came back ({:.1?} after its deletion)",
        deleted.len(),
        since.elapsed()
    );
    ensure!(provisioner.is_running(), "{}", provisioner.log_tail(30));
    c.assert_only_retained_left(ns, &deleted, &[]).await?;
    c.assert_brownfield_data_kept().await?;
    c.assert_agreement(&c.expect(&[ns], deleted)).await?;
    Ok(())
}

/// Whether `name` of kind `K` in `ns` is gone, or else its metadata.
async fn child<K>(client: &Client, ns: &str, name: &str) -> Result<Option<ObjectMeta>>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    Ok(Api::<K>::namespaced(client.clone(), ns)
        .get_opt(name)
        .await?
        .map(|k| k.meta().clone()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreground_and_orphan_cascades_on_a_claim() -> Result<()> {
    let c = Cluster::start().await?;
    let ns = "apps";
    c.env.ensure_namespace(ns).await?;
    let mut provisioner = c.provisioner("cascades")?;
    let claims: Vec<(String, Kind)> = [
        ("fg-delete", Kind::GeneratedDelete),
        ("fg-retain", Kind::GeneratedRetain),
        ("orphan-delete", Kind::GeneratedDelete),
        ("orphan-retain", Kind::GeneratedRetain),
        ("orphan-brownfield", Kind::Shared),
    ]
    .into_iter()
    .map(|(n, k)| (n.to_owned(), k))
    .collect();
    c.create_all(ns, &claims).await?;
    let names: Vec<String> = claims.iter().map(|(n, _)| n.clone()).collect();
    wait_all_bound(&c.admin, ns, &names, T).await?;
    let mut deleted = Vec::new();
    for (name, kind) in &claims {
        deleted.push(c.record(ns, name, kind).await?);
    }

    // Foreground: the collector deletes the claim's Secret and ConfigMap.
    // Their owner references do not set blockOwnerDeletion (that would need
    // `update` on objectbucketclaims/finalizers where the
    // OwnerReferencesPermissionEnforcement admission plugin runs), so the
    // claim does not wait for them: its own finalizer holds it for the
    // teardown, and they are gone with it or just after.
    for name in ["fg-delete", "fg-retain"] {
        c.claims(ns)
            .delete(name, &DeleteParams::foreground())
            .await?;
    }
    for name in ["fg-delete", "fg-retain"] {
        let started = Instant::now();
        obc_tests::recording::wait_gone(&c.claims(ns), name, T).await?;
        let claim_gone = started.elapsed();
        obc_tests::recording::wait_gone(&Api::<Secret>::namespaced(c.admin.clone(), ns), name, T)
            .await?;
        obc_tests::recording::wait_gone(
            &Api::<ConfigMap>::namespaced(c.admin.clone(), ns),
            name,
            T,
        )
        .await?;
        println!(
            "foreground: {name} gone in {claim_gone:.1?}, its Secret and ConfigMap in {:.1?}",
            started.elapsed()
        );
    }

    // Orphan: the collector strips the claim's owner references from the
    // Secret and ConfigMap, which stay, as asked; the claim is torn down
    // per its reclaim policy all the same.
    for name in ["orphan-delete", "orphan-retain", "orphan-brownfield"] {
        c.claims(ns).delete(name, &DeleteParams::orphan()).await?;
    }
    for name in ["orphan-delete", "orphan-retain", "orphan-brownfield"] {
        obc_tests::recording::wait_gone(&c.claims(ns), name, T).await?;
        for (kind, meta) in [
            ("Secret", child::<Secret>(&c.admin, ns, name).await?),
            ("ConfigMap", child::<ConfigMap>(&c.admin, ns, name).await?),
        ] {
            let meta = meta.with_context(|| format!("orphaned {kind} {name} is gone"))?;
            ensure!(
                meta.owner_references.as_ref().is_none_or(Vec::is_empty),
                "{kind} {name} still has owners: {:?}",
                meta.owner_references
            );
            // Kept as plain objects: no owner, and no finalizer of ours
            // (older versions' finalizer would make deleting them hang).
            ensure!(
                !meta.finalizers.iter().flatten().any(|f| f == FINALIZER),
                "{kind} {name} keeps the library's finalizer"
            );
        }
    }
    println!("orphan: the 6 children are kept, without owners or finalizers");
    // They can be deleted, and go: nothing hangs Terminating.
    for (name, _) in &claims {
        // 404 for those already gone.
        let _ = Api::<Secret>::namespaced(c.admin.clone(), ns)
            .delete(name, &DeleteParams::default())
            .await;
        let _ = Api::<ConfigMap>::namespaced(c.admin.clone(), ns)
            .delete(name, &DeleteParams::default())
            .await;
    }
    wait_for(Duration::from_secs(10), "the orphans to go", || async {
        let mut left = Vec::new();
        for (name, _) in &claims {
            if let Some(m) = child::<Secret>(&c.admin, ns, name).await? {
                left.push(format!("Secret {name} {:?}", m.finalizers));
            }
            if let Some(m) = child::<ConfigMap>(&c.admin, ns, name).await? {
                left.push(format!("ConfigMap {name} {:?}", m.finalizers));
            }
        }
        if left.is_empty() {
            Ok(Some(()))
        } else {
            bail!("left: {left:?}")
        }
    })
    .await?;
    ensure!(provisioner.is_running(), "{}", provisioner.log_tail(30));
    c.assert_only_retained_left(ns, &deleted, &[]).await?;
    c.assert_brownfield_data_kept().await?;
    c.assert_agreement(&c.expect(&[ns], deleted)).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_whose_finalizer_was_stripped_while_the_provisioner_was_down() -> Result<()> {
    let c = Cluster::start().await?;
    let ns = "apps";
    c.env.ensure_namespace(ns).await?;
    let mut provisioner = c.provisioner("before")?;
    let claims: Vec<(String, Kind)> = [
        ("stripped-delete", Kind::GeneratedDelete),
        ("stripped-retain", Kind::GeneratedRetain),
        ("stripped-brownfield", Kind::Shared),
    ]
    .into_iter()
    .map(|(n, k)| (n.to_owned(), k))
    .collect();
    c.create_all(ns, &claims).await?;
    let names: Vec<String> = claims.iter().map(|(n, _)| n.clone()).collect();
    wait_all_bound(&c.admin, ns, &names, T).await?;
    let mut deleted = Vec::new();
    for (name, kind) in &claims {
        deleted.push(c.record(ns, name, kind).await?);
    }
    provisioner.kill().await;
    // The user deletes the claims, sees them hang, and strips the finalizer.
    for name in &names {
        c.claims(ns).delete(name, &DeleteParams::default()).await?;
        c.claims(ns)
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(serde_json::json!({"metadata": {"finalizers": null}})),
            )
            .await?;
        obc_tests::recording::wait_gone(&c.claims(ns), name, T).await?;
    }
    // The collector deletes the Secrets and ConfigMaps the claims owned,
    // with the provisioner still down: nothing holds them.
    let stripped = Instant::now();
    wait_for(T, "the collector to delete the children", || async {
        for name in &names {
            if child::<Secret>(&c.admin, ns, name).await?.is_some()
                || child::<ConfigMap>(&c.admin, ns, name).await?.is_some()
            {
                return Ok(None);
            }
        }
        Ok(Some(()))
    })
    .await?;
    println!(
        "stripped finalizers: the children collected {:.1?} after, the provisioner still down",
        stripped.elapsed()
    );
    // The ObjectBuckets are what is left: on return the provisioner tears
    // them down per reclaim policy.
    ensure!(c.object_buckets_of(ns).await?.len() == claims.len());
    let restarted = Instant::now();
    let mut provisioner = c.provisioner("after")?;
    let by_collector = audited(&c.env, GARBAGE_COLLECTOR)?;
    wait_for(T, "the ObjectBuckets to be torn down", || async {
        let obs = c.object_buckets_of(ns).await?;
        let done = obs.iter().all(|ob| {
            ob.status.as_ref().and_then(|s| s.phase) == Some(BucketPhase::Released)
                && !ob.finalizers().iter().any(|f| f == FINALIZER)
        });
        Ok((obs.len() == 1 && done).then_some(()))
    })
    .await?;
    println!(
        "stripped finalizers: torn down {:.1?} after the provisioner came back",
        restarted.elapsed()
    );
    wait_for(T, "the children to be gone", || async {
        for name in &names {
            if child::<Secret>(&c.admin, ns, name).await?.is_some()
                || child::<ConfigMap>(&c.admin, ns, name).await?.is_some()
            {
                return Ok(None);
            }
        }
        Ok(Some(()))
    })
    .await?;
    ensure!(provisioner.is_running(), "{}", provisioner.log_tail(30));
    ensure!(
        by_collector.contains(&("secrets".into(), "delete".into()))
            && by_collector.contains(&("configmaps".into(), "delete".into())),
        "the collector's requests: {by_collector:?}"
    );
    c.assert_only_retained_left(ns, &deleted, &[]).await?;
    c.assert_brownfield_data_kept().await?;
    c.assert_agreement(&c.expect(&[ns], deleted)).await?;
    Ok(())
}
