//! Upgrades: objects left by the Go library and older versions are taken
//! over without a provisioner call.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Result, anyhow, ensure};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use lib_provisioner::api::{FINALIZER, ObjectBucket, ObjectBucketClaim, PROVISIONER_LABEL};
use obc_tests::TestEnv;
use obc_tests::reliability::{
    Kind, Proc, SHARED_BUCKET, Summary, converge, count_operations, install_sample,
    register_secret, store_buckets, wait_all_gone,
};
use obc_tests::setup::install_crds_without_object_bucket_name;
use serde_json::json;

use super::{
    LABEL, Suite, T, claims, delete_claim, finish, free_addr, logs, metric, still_running,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_left_by_the_go_library_and_older_versions_are_taken_over() {
    let env = TestEnv::start().await.expect("test environment starts");
    let mut summary = Summary::new("upgrades and takeover");
    // The claim CRD of older installs: no spec.objectBucketName.
    install_crds_without_object_bucket_name(&env)
        .await
        .expect("old CRDs");
    let kubeconfig = install_sample(&env).await.expect("sample installs");
    env.start_controller_manager()
        .await
        .expect("kube-controller-manager starts");
    let suite = Suite {
        admin: env.admin_client(),
        env,
        kubeconfig,
    };
    let result = upgrades(&suite, &mut summary).await;
    finish(&suite, &["legacy"], summary, result).await;
}

/// Writes a bound claim, its ObjectBucket, Secret, ConfigMap and bucket as
/// an earlier writer left them.
struct Fixture<'a> {
    name: &'a str,
    spec: serde_json::Value,
    bucket: &'a str,
    /// Our label and finalizer on everything (newer writers).
    labelled: bool,
    /// The bucket carries this project's ownership marker.
    marker: bool,
    /// The origin annotation on the ObjectBucket.
    origin: Option<&'a str>,
    /// The claimRef carries the claim's UID.
    claim_ref_uid: bool,
    /// Credentials in the ObjectBucket's `authentication` (the Go library).
    go_authentication: bool,
    class: &'a str,
}

impl<'a> Fixture<'a> {
    /// A greenfield claim of `class` as this version leaves it: labelled,
    /// marked, its origin recorded, the claim's UID in the claimRef.
    fn ours(name: &'a str, spec: serde_json::Value, bucket: &'a str, class: &'a str) -> Self {
        Self {
            name,
            spec,
            bucket,
            labelled: true,
            marker: true,
            origin: Some("greenfield"),
            claim_ref_uid: true,
            go_authentication: false,
            class,
        }
    }
}

async fn write_fixture(suite: &Suite, ns: &str, f: &Fixture<'_>) -> Result<ObjectBucketClaim> {
    let client = &suite.admin;
    let api = claims(client, ns);
    let label = json!({PROVISIONER_LABEL: LABEL});
    let (labels, finalizers) = if f.labelled {
        (label.clone(), json!([FINALIZER]))
    } else {
        (json!({}), json!([]))
    };
    // The Go library put its finalizer on claims, without our label.
    let claim: ObjectBucketClaim = serde_json::from_value(json!({
        "apiVersion": "objectbucket.io/v1alpha1", "kind": "ObjectBucketClaim",
        "metadata": {"name": f.name, "namespace": ns, "labels": labels, "finalizers": [FINALIZER]},
        "spec": f.spec,
    }))?;
    let claim = api.create(&PostParams::default(), &claim).await?;
    api.patch_status(
        f.name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Bound"}})),
    )
    .await?;
    let uid = claim.uid().unwrap_or_default();
    let (ak, sk) = suite.env.s3_root_credentials();
    let owner = json!([{"apiVersion": "objectbucket.io/v1alpha1", "kind": "ObjectBucketClaim", "name": f.name, "uid": uid, "controller": true, "blockOwnerDeletion": true}]);
    let mut annotations = json!({});
    if let Some(origin) = f.origin {
        annotations = json!({"objectbucket.io/bucket-origin": origin});
    }
    let mut claim_ref = json!({"apiVersion": "objectbucket.io/v1alpha1", "kind": "ObjectBucketClaim", "name": f.name, "namespace": ns});
    if f.claim_ref_uid {
        claim_ref["uid"] = json!(uid);
    }
    let endpoint = url_host_port(&suite.env.s3_endpoint())?;
    let mut spec = json!({
        "storageClassName": f.class, "reclaimPolicy": "Delete",
        "claimRef": claim_ref,
        "endpoint": {"bucketHost": endpoint.0, "bucketPort": endpoint.1, "bucketName": f.bucket, "region": "us-east-1", "subRegion": "", "additionalConfig": {}},
        "additionalState": {"credentialsMode": "shared-admin"}
    });
    if f.go_authentication {
        let go_secret = format!("go-era-secret-{uid}");
        register_secret(&go_secret);
        spec["authentication"] =
            json!({"accessKeys": {"accessKeyId": "GOERAKEY", "secretAccessKey": go_secret}});
        spec["additionalState"] = json!({});
    }
    let ob: ObjectBucket = serde_json::from_value(json!({
        "apiVersion": "objectbucket.io/v1alpha1", "kind": "ObjectBucket",
        "metadata": {"name": format!("obc-{ns}-{}", f.name), "labels": labels, "finalizers": finalizers, "annotations": annotations},
        "spec": spec,
    }))?;
    let obs: Api<ObjectBucket> = Api::all(client.clone());
    obs.create(&PostParams::default(), &ob).await?;
    obs.patch_status(
        &format!("obc-{ns}-{}", f.name),
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Bound"}})),
    )
    .await?;
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": f.name, "namespace": ns, "labels": labels, "finalizers": finalizers, "ownerReferences": owner},
        "stringData": {"AWS_ACCESS_KEY_ID": ak, "AWS_SECRET_ACCESS_KEY": sk}
    }))?;
    Api::<Secret>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &secret)
        .await?;
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": f.name, "namespace": ns, "labels": labels, "finalizers": finalizers, "ownerReferences": owner},
        "data": {"BUCKET_HOST": endpoint.0, "BUCKET_PORT": endpoint.1.to_string(), "BUCKET_NAME": f.bucket, "BUCKET_REGION": "us-east-1", "BUCKET_SUBREGION": ""}
    }))?;
    Api::<ConfigMap>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &cm)
        .await?;
    if f.bucket != SHARED_BUCKET {
        let s3 = suite.env.s3_client();
        s3.create_bucket().bucket(f.bucket).send().await?;
        s3.put_object()
            .bucket(f.bucket)
            .key("data.txt")
            .body(aws_sdk_s3::primitives::ByteStream::from_static(
                b"user data",
            ))
            .send()
            .await?;
        if f.marker {
            s3.put_object()
                .bucket(f.bucket)
                .key(sample_provisioner::store::OWNER_MARKER_KEY)
                .body(aws_sdk_s3::primitives::ByteStream::from(
                    uid.clone().into_bytes(),
                ))
                .send()
                .await?;
        }
    }
    Ok(api.get(f.name).await?)
}

fn url_host_port(url: &str) -> Result<(String, u16)> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| anyhow!("{url}"))?;
    let (host, port) = rest.rsplit_once(':').ok_or_else(|| anyhow!("{url}"))?;
    Ok((host.to_owned(), port.trim_end_matches('/').parse()?))
}

/// The resourceVersion and data of every Secret and ConfigMap in `ns`.
async fn child_data(client: &Client, ns: &str) -> Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    for s in Api::<Secret>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await?
        .items
    {
        out.push((format!("Secret {}", s.name_any()), format!("{:?}", s.data)));
    }
    for c in Api::<ConfigMap>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await?
        .items
    {
        out.push((
            format!("ConfigMap {}", c.name_any()),
            format!("{:?}", c.data),
        ));
    }
    out.sort();
    Ok(out)
}

/// Waits until each claim and its ObjectBucket carry this provisioner's
/// label and finalizer, its Secret and ConfigMap the label and not the
/// finalizer (the garbage collector deletes them with the claim; older
/// versions put the finalizer there), and the claim is Bound (with
/// `spec.objectBucketName` when the CRD has the field).
async fn taken_over(client: &Client, ns: &str, names: &[&str], bind_field: bool) -> Result<()> {
    let obs: Api<ObjectBucket> = Api::all(client.clone());
    let labelled = |meta: &kube::api::ObjectMeta| {
        meta.labels
            .as_ref()
            .and_then(|l| l.get(PROVISIONER_LABEL))
            .map(String::as_str)
            == Some(LABEL)
    };
    let finalized =
        |meta: &kube::api::ObjectMeta| meta.finalizers.iter().flatten().any(|f| f == FINALIZER);
    let ours = |meta: &kube::api::ObjectMeta| labelled(meta) && finalized(meta);
    let adopted_child = |meta: &kube::api::ObjectMeta| labelled(meta) && !finalized(meta);
    for name in names {
        let ob_name = format!("obc-{ns}-{name}");
        obc_tests::wait_for(T, format!("{name} to be taken over"), || async {
            let c = claims(client, ns).get(name).await?;
            let ob = obs.get(&ob_name).await?;
            let bound = c.status.as_ref().is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|x| x.type_ == "Bound" && x.status == "True")
            });
            let named =
                !bind_field || c.spec.object_bucket_name.as_deref() == Some(ob_name.as_str());
            Ok((ours(&c.metadata) && ours(&ob.metadata) && bound && named).then_some(()))
        })
        .await?;
        let secret = Api::<Secret>::namespaced(client.clone(), ns)
            .get_metadata(name)
            .await?;
        let cm = Api::<ConfigMap>::namespaced(client.clone(), ns)
            .get_metadata(name)
            .await?;
        ensure!(
            adopted_child(&secret.metadata),
            "Secret {name} was not adopted"
        );
        ensure!(
            adopted_child(&cm.metadata),
            "ConfigMap {name} was not adopted"
        );
    }
    Ok(())
}

async fn upgrades(suite: &Suite, summary: &mut Summary) -> Result<()> {
    let client = &suite.admin;
    let env = &suite.env;
    let ns = "legacy";
    let classes = suite.namespace(ns).await?;
    let (del, shared) = (classes.delete.as_str(), classes.shared.as_str());

    // Written under the old CRD schema (objectBucketName is pruned).
    let under_old_crd = [
        // The Go library: generated name known only to the OB, credentials
        // in the OB's authentication, no labels, no origin, no marker.
        Fixture {
            name: "go",
            spec: json!({"storageClassName": del, "generateBucketName": "go"}),
            bucket: "go-3c5a4e2f",
            labelled: false,
            marker: false,
            origin: None,
            claim_ref_uid: true,
            go_authentication: true,
            class: del,
        },
        // An older version: the generated name written back into bucketName.
        Fixture::ours(
            "both",
            json!({"storageClassName": del, "generateBucketName": "both", "bucketName": "both-x1y2z3"}),
            "both-x1y2z3",
            del,
        ),
        // A claimRef without UID (older writers), brownfield without origin.
        Fixture {
            name: "brown",
            spec: json!({"storageClassName": shared}),
            bucket: SHARED_BUCKET,
            labelled: false,
            marker: false,
            origin: None,
            claim_ref_uid: false,
            go_authentication: false,
            class: shared,
        },
    ];
    let mut fixtures = Vec::new();
    for f in &under_old_crd {
        fixtures.push(write_fixture(suite, ns, f).await?);
    }
    // A bucket retained by a claim deleted long ago: its OB is Released.
    let released: ObjectBucket = serde_json::from_value(json!({
        "apiVersion": "objectbucket.io/v1alpha1", "kind": "ObjectBucket",
        "metadata": {"name": "obc-legacy-gone", "labels": {PROVISIONER_LABEL: LABEL}},
        "spec": {"storageClassName": classes.retain, "reclaimPolicy": "Retain",
                 "claimRef": {"name": "gone", "namespace": ns, "uid": "00000000-0000-0000-0000-000000000001"},
                 "endpoint": {"bucketHost": "127.0.0.1", "bucketPort": 1, "bucketName": "gone-retained", "region": "us-east-1", "subRegion": "", "additionalConfig": {}}}
    }))?;
    let obs: Api<ObjectBucket> = Api::all(client.clone());
    obs.create(&PostParams::default(), &released).await?;
    obs.patch_status(
        "obc-legacy-gone",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Released"}})),
    )
    .await?;
    let s3 = env.s3_client();
    s3.create_bucket().bucket("gone-retained").send().await?;
    s3.put_object()
        .bucket("gone-retained")
        .key(sample_provisioner::store::OWNER_MARKER_KEY)
        .body(aws_sdk_s3::primitives::ByteStream::from_static(
            b"00000000-0000-0000-0000-000000000001",
        ))
        .send()
        .await?;
    let released_rv = obs.get("obc-legacy-gone").await?.resource_version();
    let buckets_before = store_buckets(&s3).await?;
    let children_before = child_data(client, ns).await?;

    // 1. Takeover under the old CRD.
    // Each process serves metrics: the provisioner-call counters must stay 0.
    let launch_with_metrics = |tag: &str| -> Result<(Proc, SocketAddr)> {
        let addr = free_addr()?;
        let mut l = suite.launch(tag);
        l.metrics = Some(addr);
        Ok((l.start(logs())?, addr))
    };
    let (mut proc, addr) = launch_with_metrics("upgrade-old-crd")?;
    taken_over(client, ns, &["go", "both", "brown"], false).await?;
    let mut x = suite.expect(&[ns]);
    x.bind_pruned = true;
    // The Go library wrote no ownership marker, and a takeover calls no
    // provisioner, so none is added.
    x.unmarked.insert("go-3c5a4e2f".into());
    x.preexisting.extend(buckets_before.keys().cloned());
    let a = converge(env, client, &x, T).await?;
    summary.check("takeover under the old CRD", &a)?;
    summary.counts.scenarios += 1;

    let calls = metric(addr, "obc_provisioner_operations_total{").await?;
    ensure!(calls == 0.0, "the takeover made {calls} provisioner calls");
    ensure!(
        count_operations(&proc.log(), "provision") + count_operations(&proc.log(), "grant") == 0,
        "the takeover logged provisioner calls"
    );

    // 2. The CRD is upgraded; newer-shaped leftovers appear; restart.
    proc.kill().await;
    let files = lib_provisioner::api::crd_files();
    env.install_crds(&files[0].1).await?;
    let under_new_crd = [
        // No labels or finalizers anywhere, objectBucketName set.
        Fixture {
            labelled: false,
            origin: None,
            ..Fixture::ours(
                "bare",
                json!({"storageClassName": del, "bucketName": "bare-bucket", "objectBucketName": "obc-legacy-bare"}),
                "bare-bucket",
                del,
            )
        },
        // Everything ours already (a restart of this version).
        Fixture::ours(
            "current",
            json!({"storageClassName": del, "bucketName": "current-bucket", "objectBucketName": "obc-legacy-current"}),
            "current-bucket",
            del,
        ),
    ];
    for f in &under_new_crd {
        fixtures.push(write_fixture(suite, ns, f).await?);
    }
    let buckets_before = store_buckets(&s3).await?;
    let children_before_2 = child_data(client, ns).await?;
    let (mut proc, addr) = launch_with_metrics("upgrade-new-crd")?;
    taken_over(
        client,
        ns,
        &["go", "both", "brown", "bare", "current"],
        true,
    )
    .await?;
    x.bind_pruned = false;
    x.preexisting.extend(buckets_before.keys().cloned());
    let a = converge(env, client, &x, T).await?;
    summary.check("takeover after the CRD upgrade", &a)?;
    summary.counts.scenarios += 1;

    // Zero new buckets, zero deletions, no provisioner call, data untouched.
    let buckets_after = store_buckets(&s3).await?;
    ensure!(
        buckets_after == buckets_before,
        "the store changed: before {buckets_before:?}, after {buckets_after:?}"
    );
    let children_after = child_data(client, ns).await?;
    ensure!(
        children_after == children_before_2,
        "a Secret's or ConfigMap's data was rewritten"
    );
    ensure!(
        children_before.iter().all(|c| children_after.contains(c)),
        "data of the first fixtures changed"
    );
    let calls = metric(addr, "obc_provisioner_operations_total{").await?;
    ensure!(calls == 0.0, "the takeover made {calls} provisioner calls");
    ensure!(
        obs.get("obc-legacy-gone").await?.resource_version() == released_rv,
        "the Released ObjectBucket was written to"
    );
    summary.note("fixture claims taken over", fixtures.len());
    summary.note("buckets before = after", buckets_after.len());

    // A restart over taken-over claims writes nothing.
    let rvs = |list: Vec<ObjectBucketClaim>| {
        list.into_iter()
            .map(|c| (c.name_any(), c.resource_version().unwrap_or_default()))
            .collect::<Vec<_>>()
    };
    let before = rvs(claims(client, ns).list(&ListParams::default()).await?.items);
    proc.kill().await;
    let (mut proc, addr) = launch_with_metrics("upgrade-restart")?;
    obc_tests::wait_for(T, "the restarted provisioner to sync", || async {
        Ok(proc.log().contains("caches are synced").then_some(()))
    })
    .await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = rvs(claims(client, ns).list(&ListParams::default()).await?.items);
    ensure!(before == after, "a restart wrote to taken-over claims");
    let calls = metric(addr, "obc_provisioner_operations_total{").await?;
    ensure!(calls == 0.0, "the restart made {calls} provisioner calls");
    summary.counts.crashes += 2;

    // Deleting taken-over claims: a marked greenfield bucket goes, and so
    // does the Go library's unmarked one (its bound ObjectBucket records it
    // as the claim's, reclaim policy Delete); the brownfield bucket stays.
    for (name, kind) in [
        ("both", Kind::GeneratedDelete),
        ("go", Kind::GeneratedDelete),
        ("brown", Kind::Shared),
        ("bare", Kind::ExactDelete),
    ] {
        let d = delete_claim(client, ns, name, &kind).await?;
        x.deleted.push(d);
    }
    wait_all_gone(
        client,
        ns,
        &["both".into(), "go".into(), "brown".into(), "bare".into()],
        T,
    )
    .await?;
    // The counter the takeover checks above read does count calls.
    let calls = metric(addr, "obc_provisioner_operations_total{").await?;
    ensure!(
        calls >= 4.0,
        "4 teardowns counted as {calls} provisioner calls"
    );
    let left = store_buckets(&s3).await?;
    ensure!(
        !left.contains_key("both-x1y2z3") && !left.contains_key("bare-bucket"),
        "marked buckets were not deleted: {left:?}"
    );
    ensure!(
        !left.contains_key("go-3c5a4e2f"),
        "the Go library's bucket was kept (orphaned): its claim's ObjectBucket recorded it, reclaim policy Delete"
    );
    ensure!(
        left.contains_key(SHARED_BUCKET),
        "the brownfield bucket was deleted"
    );
    // Deleted on purpose, the Go library's with the others.
    for gone in ["both-x1y2z3", "bare-bucket", "go-3c5a4e2f"] {
        x.preexisting.remove(gone);
        x.unmarked.remove(gone);
    }
    let a = converge(env, client, &x, T).await?;
    summary.check("after deleting taken-over claims", &a)?;
    still_running(&mut proc)?;
    summary.counts.scenarios += 1;
    Ok(())
}

/// Issue 25, item 5: a claim taken over from the Go library gets its
/// Secret back when a user deletes it or edits it. The Go library left its
/// bucket with data and no ownership marker, which a new claim's
/// provisioning rightly refuses: the repair must be a re-issue for the
/// bucket the claim's ObjectBucket binds, never a new claim's provisioning.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_taken_over_claims_secret_is_restored_after_deletion_and_drift() {
    Suite::run(
        "takeover: Secret repair",
        &["legacy-repair"],
        taken_over_secret_repair,
    )
    .await;
}

/// A Go-era claim of `class`, under the current CRD (the Go library wrote
/// `objectBucketName`): unmarked bucket with data, no labels or origin.
fn go_era<'a>(name: &'a str, ns: &str, bucket: &'a str, class: &'a str) -> Fixture<'a> {
    Fixture {
        name,
        spec: json!({"storageClassName": class, "generateBucketName": name,
                     "objectBucketName": format!("obc-{ns}-{name}")}),
        bucket,
        labelled: false,
        marker: false,
        origin: None,
        claim_ref_uid: true,
        go_authentication: true,
        class,
    }
}

/// Waits until the Secret of claim `ns/name` exists with data other than
/// `not` and its keys read `data.txt` of the claim's bucket; returns them.
async fn restored_and_working(
    suite: &Suite,
    ns: &str,
    name: &str,
    bucket: &str,
    not: Option<&(String, String)>,
) -> Result<(String, String)> {
    let client = &suite.admin;
    let keys = obc_tests::wait_for(
        T,
        format!("the Secret of {ns}/{name} to be restored"),
        || async {
            let Some(s) = Api::<Secret>::namespaced(client.clone(), ns)
                .get_opt(name)
                .await?
            else {
                return Ok(None);
            };
            let data = s.data.unwrap_or_default();
            let value = |k: &str| {
                data.get(k)
                    .map(|v| String::from_utf8_lossy(&v.0).into_owned())
            };
            let keys = value("AWS_ACCESS_KEY_ID").zip(value("AWS_SECRET_ACCESS_KEY"));
            Ok(keys.filter(|k| Some(k) != not))
        },
    )
    .await?;
    register_secret(&keys.1);
    let s3 = obc_tests::testenv::s3_client_for(&suite.env.s3_endpoint(), &keys.0, &keys.1);
    let object = s3
        .get_object()
        .bucket(bucket)
        .key("data.txt")
        .send()
        .await?;
    let body = object.body.collect().await?.into_bytes();
    ensure!(
        body.as_ref() == b"user data",
        "the restored credentials of {name} read {body:?} from {bucket}"
    );
    Ok(keys)
}

async fn taken_over_secret_repair(suite: &Suite, summary: &mut Summary) -> Result<()> {
    let client = &suite.admin;
    let ns = "legacy-repair";
    let classes = suite.namespace(ns).await?;
    let fixtures = [
        go_era("go-deleted", ns, "go-deleted-3c5a4e2f", &classes.delete),
        go_era("go-edited", ns, "go-edited-9b1d7e4a", &classes.delete),
    ];
    for f in &fixtures {
        write_fixture(suite, ns, f).await?;
    }
    let s3 = suite.env.s3_client();
    let buckets_before = store_buckets(&s3).await?;
    let proc = suite.launch("takeover-repair").start(logs())?;
    taken_over(client, ns, &["go-deleted", "go-edited"], true).await?;

    // 1. The Secret deleted by its owner comes back, with working keys.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    secrets.delete("go-deleted", &Default::default()).await?;
    obc_tests::recording::wait_gone(&secrets, "go-deleted", T).await?;
    restored_and_working(suite, ns, "go-deleted", "go-deleted-3c5a4e2f", None).await?;
    summary.counts.scenarios += 1;

    // 2. The Secret edited (drift) is restored, with working keys.
    let tampered = ("GOERAKEY".to_owned(), "tampered-by-a-user".to_owned());
    secrets
        .patch(
            "go-edited",
            &PatchParams::default(),
            &Patch::Merge(json!({"stringData": {"AWS_ACCESS_KEY_ID": tampered.0, "AWS_SECRET_ACCESS_KEY": tampered.1}})),
        )
        .await?;
    restored_and_working(
        suite,
        ns,
        "go-edited",
        "go-edited-9b1d7e4a",
        Some(&tampered),
    )
    .await?;
    summary.counts.scenarios += 1;

    // Both still Bound, the store as it was (nothing created, data kept).
    for name in ["go-deleted", "go-edited"] {
        let c = claims(client, ns).get(name).await?;
        ensure!(
            c.status.as_ref().and_then(|s| s.phase)
                == Some(lib_provisioner::api::ClaimPhase::Bound),
            "{name} is {:?}: {}",
            c.status.as_ref().and_then(|s| s.phase),
            super::message(&c)
        );
    }
    let buckets_after = store_buckets(&s3).await?;
    ensure!(
        buckets_after == buckets_before,
        "the store changed: before {buckets_before:?}, after {buckets_after:?}"
    );
    let mut x = suite.expect(&[ns]);
    x.unmarked
        .extend(["go-deleted-3c5a4e2f".into(), "go-edited-9b1d7e4a".into()]);
    x.preexisting.extend(buckets_before.keys().cloned());
    let a = converge(&suite.env, client, &x, T).await?;
    summary.check("Secrets of taken-over claims restored", &a)?;
    let log = proc.log();
    summary.note(
        "re-issues (provision calls)",
        count_operations(&log, "provision"),
    );
    Ok(())
}
