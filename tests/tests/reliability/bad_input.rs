//! Bad input: malformed claims, classes and raw objects get a clear
//! message and nothing else, and claims the provisioner rejected can be
//! deleted.

use std::time::{Duration, Instant};

use anyhow::{Result, ensure};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::ResourceExt;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, PostParams};
use lib_provisioner::api::{ClaimPhase, FINALIZER, ObjectBucket};
use obc_tests::reliability::{
    Kind, PROVISIONER, Summary, agreement, converge, create_class, events_for, register_secret,
    sample_params, store_buckets, wait_all_bound, wait_all_gone, wait_event,
};
use serde_json::json;

use super::{Suite, T, claims, create, delete_claim, logs, message, phase, still_running};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_a_clear_message_and_nothing_else() {
    Suite::run("bad input corpus", &["bad"], bad_input).await;
}

mod corpus;

use corpus::{GOOD, REFUSED_BEFORE_PREPARING, bad_claims, raw_rejections, spec_of};

async fn bad_input(suite: &Suite, summary: &mut Summary) -> Result<()> {
    let client = &suite.admin;
    let env = &suite.env;
    let ns = "bad";
    env.ensure_namespace(ns).await?;
    env.ensure_namespace("unwatched").await?;
    let good = GOOD;
    let mut params = sample_params(env);
    params.insert("forceDelete".into(), "true".into());
    create_class(client, good, PROVISIONER, "Delete", params).await?;

    let password = "hunter2-not-a-real-password";
    register_secret(password);
    let bad_classes = corpus::bad_classes(env, password);
    for (name, p) in &bad_classes {
        create_class(client, name, PROVISIONER, "Delete", p.clone()).await?;
    }
    create_class(
        client,
        "c-foreign",
        "other.example.com/bucket",
        "Delete",
        sample_params(env),
    )
    .await?;
    // An admin Secret with only half the key pair.
    let half: Secret = serde_json::from_value(json!({
        "metadata": {"name": "half-admin", "namespace": obc_tests::reliability::SYSTEM_NAMESPACE},
        "stringData": {"AWS_ACCESS_KEY_ID": "only-the-id"}
    }))?;
    Api::<Secret>::namespaced(client.clone(), obc_tests::reliability::SYSTEM_NAMESPACE)
        .create(&PostParams::default(), &half)
        .await?;
    // A user's own Secret with a claim's name, and a bucket someone else filled.
    let mut own = Secret::default();
    own.metadata.name = Some("taken-secret".into());
    Api::<Secret>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &own)
        .await?;
    let s3 = env.s3_client();
    s3.create_bucket().bucket("someone-elses").send().await?;
    s3.put_object()
        .bucket("someone-elses")
        .key("data.bin")
        .body(aws_sdk_s3::primitives::ByteStream::from_static(b"theirs"))
        .send()
        .await?;

    let mut proc = {
        let mut l = suite.launch("bad-input");
        l.namespaces = vec![ns.into()];
        l.start(logs())?
    };

    let cases = bad_claims(password);
    for c in &cases {
        create(client, ns, c.name, c.spec.clone()).await?;
    }
    // Served alongside: valid claims, one with a 200 KiB additionalConfig
    // (the sample ignores it; it must not hurt), and two claims asking for
    // one bucket name.
    let valid = ["valid-gen", "valid-exact", "huge-config", "first"];
    create(client, ns, "valid-gen", spec_of(good, None, Some("valid"))).await?;
    create(
        client,
        ns,
        "valid-exact",
        spec_of(good, Some("valid-exact-1"), None),
    )
    .await?;
    let mut huge = spec_of(good, None, Some("huge"));
    huge.additional_config = Some(
        (0..200)
            .map(|i| (format!("key-{i:03}"), "x".repeat(1024)))
            .collect(),
    );
    create(client, ns, "huge-config", huge).await?;
    create(
        client,
        ns,
        "first",
        spec_of(good, Some("contested-1"), None),
    )
    .await?;
    wait_all_bound(client, ns, &["first".to_owned()], T).await?;
    create(
        client,
        ns,
        "second",
        spec_of(good, Some("contested-1"), None),
    )
    .await?;
    // Not ours: a class of another provisioner, a namespace not served.
    create(client, ns, "foreign", spec_of("c-foreign", None, Some("x"))).await?;
    create(
        client,
        "unwatched",
        "elsewhere",
        spec_of(good, None, Some("x")),
    )
    .await?;
    summary.counts.bad_inputs = cases.len() + 3; // + second, foreign, unwatched

    let api = claims(client, ns);
    let mut problems = Vec::new();
    for c in &cases {
        let claim = match obc_tests::wait_for(
            T,
            format!("{} to be {}", c.name, c.phase.as_str()),
            || async {
                let claim = api.get(c.name).await?;
                Ok((phase(&claim) == Some(c.phase)).then_some(claim))
            },
        )
        .await
        {
            Ok(claim) => claim,
            Err(e) => {
                let now = api.get(c.name).await.ok();
                problems.push(format!(
                    "{}: {e:#} (now {:?}: {})",
                    c.name,
                    now.as_ref().and_then(phase),
                    now.as_ref().map(message).unwrap_or_default()
                ));
                continue;
            }
        };
        let m = message(&claim);
        if !m.contains(c.needle) {
            problems.push(format!("{}: message {m:?} lacks {:?}", c.name, c.needle));
        }
        if let Some(secret) = c.not
            && m.contains(secret)
        {
            problems.push(format!("{}: message echoes a credential", c.name));
        }
        if let Err(e) = wait_event(client, ns, c.name, |_, note| note.contains(c.needle)).await {
            problems.push(format!("{}: {e:#}", c.name));
        }
    }
    let second = obc_tests::wait_for(T, "second to fail", || async {
        let c = api.get("second").await?;
        Ok((phase(&c) == Some(ClaimPhase::Failed)).then_some(c))
    })
    .await?;
    if !(message(&second).contains("already claimed by") && message(&second).contains("bad/first"))
    {
        problems.push(format!("second: {}", message(&second)));
    }
    let valid_names: Vec<String> = valid.iter().map(|v| (*v).to_owned()).collect();
    wait_all_bound(client, ns, &valid_names, T).await?;
    // The controller keeps serving: a claim created now binds promptly.
    let late = Instant::now();
    create(client, ns, "late-valid", spec_of(good, None, Some("late"))).await?;
    wait_all_bound(
        client,
        ns,
        &["late-valid".to_owned()],
        Duration::from_secs(15),
    )
    .await?;
    summary.note(
        "late valid claim bound in",
        format!("{:.1}s", late.elapsed().as_secs_f64()),
    );

    // Nothing was created for the bad claims.
    let obs: Api<ObjectBucket> = Api::all(client.clone());
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    for name in cases.iter().map(|c| c.name).chain(["second", "foreign"]) {
        if !object_bucket_not_kept(&obs, &format!("obc-{ns}-{name}")).await? {
            problems.push(format!("{name} has an ObjectBucket"));
        }
        if name != "taken-secret" && secrets.get_opt(name).await?.is_some() {
            problems.push(format!("{name} has a Secret"));
        }
        if cms.get_opt(name).await?.is_some() {
            problems.push(format!("{name} has a ConfigMap"));
        }
    }
    if !secrets
        .get("taken-secret")
        .await?
        .owner_references()
        .is_empty()
    {
        problems.push("the user's Secret was taken over".into());
    }
    // The claims the library refuses never got the finalizer, so they never
    // reached the provisioner either.
    for name in REFUSED_BEFORE_PREPARING {
        if api
            .get(name)
            .await?
            .finalizers()
            .iter()
            .any(|f| f == FINALIZER)
        {
            problems.push(format!("{name} got the finalizer"));
        }
    }
    for (ns, name) in [(ns, "foreign"), ("unwatched", "elsewhere")] {
        let c = claims(client, ns).get(name).await?;
        if c.status.is_some() || !c.finalizers().is_empty() || !c.labels().is_empty() {
            problems.push(format!("{ns}/{name} was touched: {:?}", c.metadata));
        }
    }
    // The huge claim's Events stay small.
    let huge_events = events_for(client, ns, "huge-config").await;
    if huge_events.iter().any(|(_, n)| n.len() > 2048) {
        problems.push("an Event about huge-config is larger than 2 KiB".into());
    }
    let store = store_buckets(&env.s3_client()).await?;
    let mut x = suite.expect(&[ns]);
    x.preexisting.insert("someone-elses".into());
    x.not_bound = cases
        .iter()
        .map(|c| format!("{ns}/{}", c.name))
        .chain([format!("{ns}/second"), format!("{ns}/foreign")])
        .collect();
    let a = converge(env, client, &x, T).await?;
    if !a.ok() {
        problems.push(format!("with bad claims around:\n{}", a.problems()));
    }
    summary.record(&a);
    let expected_buckets = 2 + valid.len() + 1; // shared + someone-elses + valid + late
    if store.len() != expected_buckets {
        problems.push(format!(
            "{} buckets in the store, expected {expected_buckets}: {:?}",
            store.len(),
            store.keys()
        ));
    }

    // Admission rejects wrong types with a message naming the field.
    let gvk = GroupVersionKind::gvk("objectbucket.io", "v1alpha1", "ObjectBucketClaim");
    let raw: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), ns, &ApiResource::from_gvk(&gvk));
    let rejected = raw_rejections();
    for (name, spec, needle) in &rejected {
        let mut obj = DynamicObject::new(name, &ApiResource::from_gvk(&gvk)).within(ns);
        obj.data = json!({"spec": spec});
        match raw.create(&PostParams::default(), &obj).await {
            Ok(_) => problems.push(format!("{name}: the apiserver accepted {spec}")),
            Err(kube::Error::Api(status)) => {
                if !(400..500).contains(&status.code) || !status.message.contains(needle) {
                    problems.push(format!(
                        "{name}: rejection {} does not name {needle:?}: {}",
                        status.code, status.message
                    ));
                }
            }
            Err(e) => problems.push(format!("{name}: {e}")),
        }
    }
    // A StorageClass with a reclaim policy buckets do not support.
    let mut recycle = StorageClass {
        provisioner: PROVISIONER.into(),
        reclaim_policy: Some("Recycle".into()),
        parameters: Some(sample_params(env)),
        ..Default::default()
    };
    recycle.metadata.name = Some("c-recycle".into());
    match Api::<StorageClass>::all(client.clone())
        .create(&PostParams::default(), &recycle)
        .await
    {
        Err(kube::Error::Api(status)) if status.message.contains("reclaimPolicy") => {}
        other => problems.push(format!("a Recycle StorageClass: {other:?}")),
    }
    summary.counts.bad_inputs += rejected.len() + 1;

    // Fixing a claim makes it bind: the class it names appears.
    let mut fixed = sample_params(env);
    fixed.insert("forceDelete".into(), "true".into());
    create_class(client, "no-such-class", PROVISIONER, "Delete", fixed).await?;
    if let Err(e) = wait_all_bound(client, ns, &["unknown-class".to_owned()], T).await {
        problems.push(format!("unknown-class once its class exists: {e:#}"));
    }
    x.not_bound.remove(&format!("{ns}/unknown-class"));
    let a = converge(env, client, &x, T).await?;
    if !a.ok() {
        problems.push(format!(
            "once unknown-class's class exists:\n{}",
            a.problems()
        ));
    }
    summary.record(&a);

    // Every bad claim can be deleted, and deleting leaves nothing (the fixed
    // one's bucket goes with it).
    let all_bad: Vec<String> = cases
        .iter()
        .map(|c| c.name.to_owned())
        .chain(["second".into()])
        .collect();
    x.deleted
        .push(delete_claim(client, ns, "unknown-class", &Kind::GeneratedDelete).await?);
    for name in all_bad.iter().filter(|n| *n != "unknown-class") {
        api.delete(name, &DeleteParams::default()).await?;
    }
    if let Err(e) = wait_all_gone(client, ns, &all_bad, T).await {
        problems.push(format!("bad claims cannot be deleted: {e:#}"));
    }
    x.not_bound = [format!("{ns}/foreign")].into();
    let a = agreement(env, client, &x).await?;
    if !a.ok() {
        problems.push(format!("after deleting the bad claims:\n{}", a.problems()));
    }
    summary.record(&a);
    still_running(&mut proc)?;
    summary.counts.scenarios = 1;
    summary.note("valid claims served alongside", valid.len() + 1);
    ensure!(
        problems.is_empty(),
        "bad input problems:\n  {}",
        problems.join("\n  ")
    );
    Ok(())
}

/// A claim whose provisioning the provisioner rejected for good (its class
/// is invalid for it) got the finalizer, and a bucket name, before the
/// rejection; deleting it must not wait forever for a teardown that fails
/// for the same reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_the_provisioner_rejected_can_be_deleted() {
    Suite::run("deleting rejected claims", &["rejected"], delete_rejected).await;
}

async fn delete_rejected(suite: &Suite, summary: &mut Summary) -> Result<()> {
    let client = &suite.admin;
    let env = &suite.env;
    let ns = "rejected";
    env.ensure_namespace(ns).await?;
    let mut classes = Vec::new();
    for (name, key, value) in [
        ("r-inline-key", "secretKey", "not-a-real-key-0000"),
        ("r-no-secret", "adminSecretName", "missing-admin"),
        ("r-typo", "forcedelete", "true"),
    ] {
        let mut p = sample_params(env);
        p.insert(key.into(), value.into());
        create_class(client, name, PROVISIONER, "Delete", p).await?;
        classes.push(name);
    }
    let mut proc = suite.launch("rejected").start(logs())?;
    let mut names = Vec::new();
    for (i, class) in classes.iter().enumerate() {
        for (j, spec) in [
            spec_of(class, None, Some("gen")),
            spec_of(class, Some(&format!("rejected-{i}")), None),
        ]
        .into_iter()
        .enumerate()
        {
            let name = format!("{class}-{j}");
            create(client, ns, &name, spec).await?;
            names.push(name);
        }
    }
    let api = claims(client, ns);
    for name in &names {
        obc_tests::wait_for(T, format!("{name} to fail"), || async {
            Ok((phase(&api.get(name).await?) == Some(ClaimPhase::Failed)).then_some(()))
        })
        .await?;
        api.delete(name, &DeleteParams::default()).await?;
    }
    summary.counts.bad_inputs = names.len();
    let gone = wait_all_gone(client, ns, &names, Duration::from_secs(20)).await;
    let a = agreement(env, client, &suite.expect(&[ns])).await?;
    summary.record(&a);
    still_running(&mut proc)?;
    gone?;
    summary.counts.scenarios = 1;
    Ok(())
}

/// Whether no ObjectBucket of `name` is kept: absent now, or gone within
/// a few seconds. A failed claim is retried with backoff, and each retry
/// reserves its ObjectBucket for the length of the provisioner's call (the
/// record of what the call might make); one that stays is a leftover.
async fn object_bucket_not_kept(obs: &Api<ObjectBucket>, name: &str) -> Result<bool> {
    let deadline = Instant::now() + Duration::from_secs(15);
    while Instant::now() < deadline {
        if obs.get_opt(name).await?.is_none() {
            return Ok(true);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(false)
}
