//! Seeding bound claims by writing their objects directly, as the library
//! would have left them, instead of provisioning them one by one: 100,000
//! claims at the measured 60 claims/s would take half an hour, written
//! directly they take minutes.
//!
//! One claim is provisioned by the controller first (the template); every
//! seeded claim is a copy of its four objects (the claim, its ObjectBucket,
//! Secret and ConfigMap) with the names, the bucket name and the claim's UID
//! replaced, and the ConfigMap's data hash recomputed. The children are
//! written under the library's field manager, as the library writes them.
//! Whether the copies are faithful is measured, not assumed: the restart
//! over them must write nothing and read nothing ([`crate::scale::restart`]
//! prints both).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Client, Resource};
use lib_provisioner::api::{
    CONFIG_MAP_HASH_ANNOTATION, GENERATED_NAME_ANNOTATION, ObjectBucket, ObjectBucketClaim,
};
use serde_json::Value;

use crate::report::{loadavg, out};

/// Creates in flight while seeding.
const PARALLEL: usize = 64;
/// The library's field manager: the children's writer as the library's
/// caches see it (`lib_provisioner::core::writes::FIELD_MANAGER`).
const LIBRARY_MANAGER: &str = "lib-provisioner";
/// The seeder's own field manager, for the objects a user or the library's
/// status writes would own.
const SEEDER: &str = "bench-seed";

/// The template claim's name: distinct enough that replacing it everywhere
/// in its objects' JSON (names, the ObjectBucket's name, owner and claim
/// references, status messages) replaces nothing else.
pub const TEMPLATE: &str = "zz-seed-template-zz";

/// The four objects of one claim the controller bound, as JSON.
pub struct Template {
    name: String,
    uid: String,
    bucket: String,
    claim: Value,
    object_bucket: Value,
    secret: Value,
    config_map: Value,
}

impl Template {
    /// Reads the objects of the bound claim `ns/name`. Every occurrence of
    /// `name` in them is replaced in a copy, so it must be a name that
    /// occurs nowhere else ([`TEMPLATE`]).
    pub async fn read(client: &Client, ns: &str, name: &str) -> Result<Self> {
        let claim = get(client, &resource::<ObjectBucketClaim>(), Some(ns), name).await?;
        let uid = claim
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .context("the template claim has no uid")?
            .to_owned();
        let bucket = claim
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(GENERATED_NAME_ANNOTATION))
            .and_then(Value::as_str)
            .context("the template claim has no generated bucket name")?
            .to_owned();
        let ob_name = claim
            .pointer("/spec/objectBucketName")
            .and_then(Value::as_str)
            .context("the template claim is not bound")?
            .to_owned();
        let object_bucket = get(client, &resource::<ObjectBucket>(), None, &ob_name).await?;
        let secret = get(client, &resource::<Secret>(), Some(ns), name).await?;
        let config_map = get(client, &resource::<ConfigMap>(), Some(ns), name).await?;
        Ok(Self {
            name: name.to_owned(),
            uid,
            bucket,
            claim,
            object_bucket,
            secret,
            config_map,
        })
    }

    /// `value` with the template's names and bucket replaced by claim
    /// `name`'s, and its UID by `uid` (if known yet).
    fn copy(&self, value: &Value, name: &str, uid: Option<&str>) -> Result<Value> {
        let mut text = serde_json::to_string(value)?
            .replace(&self.bucket, &bucket_of(&self.bucket, name))
            .replace(&self.name, name);
        if let Some(uid) = uid {
            text = text.replace(&self.uid, uid);
        }
        let mut copy: Value = serde_json::from_str(&text)?;
        fresh_metadata(&mut copy);
        Ok(copy)
    }
}

/// A seeded claim's bucket: the template's (which has the class's prefix)
/// and the claim's name.
fn bucket_of(template: &str, name: &str) -> String {
    format!("{template}-{name}")
}

/// Seeds `n` bound claims named by `name` in `ns`, copies of `template`.
pub async fn seed(
    client: &Client,
    template: &Template,
    ns: &str,
    n: usize,
    name: impl Fn(usize) -> String,
) -> Result<Duration> {
    let t0 = Instant::now();
    let done = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let step = (n / 10).max(1);
    futures::stream::iter(0..n)
        .map(|i| {
            let done = done.clone();
            let name = name(i);
            async move {
                seed_one(client, template, ns, &name)
                    .await
                    .with_context(|| format!("seeding claim {ns}/{name}"))?;
                let d = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                if d.is_multiple_of(step) || d == n {
                    out(format!(
                        "    ... {d}/{n} seeded ({:.0} claims/s; load average {})",
                        d as f64 / t0.elapsed().as_secs_f64(),
                        loadavg()
                    ));
                }
                anyhow::Ok(())
            }
        })
        .buffer_unordered(PARALLEL)
        .try_for_each(|()| async { Ok(()) })
        .await?;
    Ok(t0.elapsed())
}

/// One claim's six writes: the claim, then side by side its status, the
/// ObjectBucket and its status, the Secret and the ConfigMap.
async fn seed_one(client: &Client, t: &Template, ns: &str, name: &str) -> Result<()> {
    let api = |ar: ApiResource| Api::<DynamicObject>::namespaced_with(client.clone(), ns, &ar);
    let claims = api(resource::<ObjectBucketClaim>());
    let claim = t.copy(&t.claim, name, None)?;
    let created = claims.create(&post(SEEDER), &dynamic(&claim)?).await?;
    let uid = created.metadata.uid.clone().context("no uid")?;
    let generation = created.metadata.generation.context("no generation")?;
    let claim_status = async {
        let mut status = claim.get("status").cloned().unwrap_or(Value::Null);
        set_observed_generation(&mut status, generation);
        write_status(&claims, name, status).await
    };
    let object_bucket = async {
        let buckets = Api::<DynamicObject>::all_with(client.clone(), &resource::<ObjectBucket>());
        let ob = t.copy(&t.object_bucket, name, Some(&uid))?;
        let ob_name = ob
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .context("no ObjectBucket name")?;
        create(&buckets, &ob).await?;
        let status = ob.get("status").cloned().unwrap_or(Value::Null);
        write_status(&buckets, ob_name, status).await
    };
    let secret = async {
        let secret = t.copy(&t.secret, name, Some(&uid))?;
        create(&api(resource::<Secret>()), &secret).await
    };
    let config_map = async {
        let mut config_map = t.copy(&t.config_map, name, Some(&uid))?;
        rehash_config_map(&mut config_map)?;
        create(&api(resource::<ConfigMap>()), &config_map).await
    };
    futures::try_join!(claim_status, object_bucket, secret, config_map)?;
    Ok(())
}

/// Creates `object` as the library would have: under its field manager.
async fn create(api: &Api<DynamicObject>, object: &Value) -> Result<()> {
    api.create(&post(LIBRARY_MANAGER), &dynamic(object)?)
        .await?;
    Ok(())
}

/// Writes `status` onto object `name` (the status subresource: a create
/// drops it).
async fn write_status(api: &Api<DynamicObject>, name: &str, status: Value) -> Result<()> {
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({ "status": status })),
    )
    .await?;
    Ok(())
}

/// The ConfigMap's data hash annotation, recomputed after its bucket name
/// changed: SHA-256 (hex) of each key and value followed by a NUL, in key
/// order (the format the library documents for `objectbucket.io/configmap-hash`).
fn rehash_config_map(cm: &mut Value) -> Result<()> {
    use sha2::{Digest, Sha256};
    let data: BTreeMap<String, String> =
        serde_json::from_value(cm.get("data").cloned().unwrap_or_default())?;
    let mut hasher = Sha256::new();
    for (k, v) in &data {
        hasher.update(k.as_bytes());
        hasher.update([0]);
        hasher.update(v.as_bytes());
        hasher.update([0]);
    }
    let hash: String = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let Some(annotations) = cm
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    else {
        bail!("the template ConfigMap has no annotations");
    };
    annotations.insert(CONFIG_MAP_HASH_ANNOTATION.to_owned(), Value::String(hash));
    Ok(())
}

/// Every `observedGeneration` in a status (its own and its conditions'),
/// set to the seeded claim's generation: the template's was bumped by its
/// binding patch, a seeded claim's is its first.
fn set_observed_generation(value: &mut Value, generation: i64) {
    match value {
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                if k == "observedGeneration" {
                    *v = Value::from(generation);
                } else {
                    set_observed_generation(v, generation);
                }
            }
        }
        Value::Array(items) => items
            .iter_mut()
            .for_each(|v| set_observed_generation(v, generation)),
        _ => {}
    }
}

/// The server-set metadata of a copy removed (a create sets it anew).
fn fresh_metadata(object: &mut Value) {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        for key in [
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "generation",
            "managedFields",
            "selfLink",
        ] {
            meta.remove(key);
        }
    }
}

fn dynamic(value: &Value) -> Result<DynamicObject> {
    Ok(serde_json::from_value(value.clone())?)
}

fn post(manager: &str) -> PostParams {
    PostParams {
        field_manager: Some(manager.to_owned()),
        ..PostParams::default()
    }
}

fn resource<K: Resource<DynamicType = ()>>() -> ApiResource {
    ApiResource::erase::<K>(&())
}

async fn get(client: &Client, ar: &ApiResource, ns: Option<&str>, name: &str) -> Result<Value> {
    let api = match ns {
        Some(ns) => Api::<DynamicObject>::namespaced_with(client.clone(), ns, ar),
        None => Api::<DynamicObject>::all_with(client.clone(), ar),
    };
    let object = api
        .get(name)
        .await
        .with_context(|| format!("reading the template's {} {name}", ar.kind))?;
    Ok(serde_json::to_value(object)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_observed_generation_is_set() {
        let mut status = serde_json::json!({
            "phase": "Bound",
            "observedGeneration": 2,
            "conditions": [{"type": "Bound", "observedGeneration": 2}],
        });
        set_observed_generation(&mut status, 1);
        assert_eq!(status["observedGeneration"], 1);
        assert_eq!(status["conditions"][0]["observedGeneration"], 1);
    }
}
