//! The benchmark's COSI objects: classes per mode, claims and accesses by
//! name, created and deleted by the benchmark's own client, and the
//! watches that see them ready and gone ([`Tracks`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::{ApiResource, DeleteParams, Patch, PatchParams};
use obc_tests::cosi_e2e::{self, Kind};
use serde_json::json;

use super::modes::Mode;
use super::track::{Ready, Track};

/// How long one object may take.
pub const T: Duration = Duration::from_secs(60);

/// One watch per kind the phases wait on.
pub struct Tracks {
    pub claims: Arc<Track>,
    pub accesses: Arc<Track>,
    pub buckets: Arc<Track>,
    pub secrets: Arc<Track>,
}

impl Tracks {
    pub async fn spawn(client: &Client) -> Result<Self> {
        Ok(Self {
            claims: Track::spawn(client.clone(), Kind::BucketClaim.resource(), Ready::Status)
                .await?,
            accesses: Track::spawn(client.clone(), Kind::BucketAccess.resource(), Ready::Status)
                .await?,
            buckets: Track::spawn(client.clone(), Kind::Bucket.resource(), Ready::Status).await?,
            secrets: Track::spawn(
                client.clone(),
                ApiResource::erase::<Secret>(&()),
                Ready::Exists,
            )
            .await?,
        })
    }

    pub fn stop(&self) {
        for t in [&self.claims, &self.accesses, &self.buckets, &self.secrets] {
            t.stop();
        }
    }

    /// When claim `ns/name` became ready.
    pub async fn claim_ready(&self, ns: &str, name: &str) -> Result<Instant> {
        self.claims.ready(ns, name, T).await
    }

    /// When access `ns/name` was granted: ready, and its Secret written.
    pub async fn access_ready(&self, ns: &str, name: &str) -> Result<Instant> {
        let a = self.accesses.ready(ns, name, T).await?;
        let s = self.secrets.ready(ns, &secret_name(name), T).await?;
        Ok(a.max(s))
    }

    /// When access `ns/name` and its Secret were gone.
    pub async fn access_gone(&self, ns: &str, name: &str) -> Result<Instant> {
        let a = self.accesses.gone(ns, name, T).await?;
        let s = self.secrets.gone(ns, &secret_name(name), T).await?;
        Ok(a.max(s))
    }
}

/// The BucketClass of a mode (deletionPolicy Delete).
pub fn bucket_class(mode: Mode) -> String {
    format!("bench-{}", mode.name())
}

/// The BucketAccessClass of a mode (Key, MultipleBuckets).
pub fn access_class(mode: Mode) -> String {
    format!("bench-{}", mode.name())
}

/// Creates the mode's two classes.
pub async fn create_classes(client: &Client, mode: Mode) -> Result<()> {
    let driver = mode.driver();
    let spec = json!({"driverName": driver, "deletionPolicy": "Delete"});
    cosi_e2e::create(
        client,
        Kind::BucketClass,
        "",
        &bucket_class(mode),
        json!({"spec": spec}),
    )
    .await?;
    let spec = json!({"driverName": driver, "authenticationType": "Key", "multiBucketAccess": "MultipleBuckets"});
    cosi_e2e::create(
        client,
        Kind::BucketAccessClass,
        "",
        &access_class(mode),
        json!({"spec": spec}),
    )
    .await?;
    Ok(())
}

pub fn claim_name(i: usize) -> String {
    format!("bc-{i:05}")
}

pub fn access_name(i: usize) -> String {
    format!("ba-{i:05}")
}

/// The Secret of a benchmark access (one per access: the first claim's).
pub fn secret_name(access: &str) -> String {
    format!("{access}-keys")
}

pub async fn create_claim(client: &Client, mode: Mode, ns: &str, name: &str) -> Result<()> {
    let body = cosi_e2e::claim_of_class(&bucket_class(mode));
    cosi_e2e::create(client, Kind::BucketClaim, ns, name, body).await?;
    Ok(())
}

/// An access named `name` to `claims`, ReadWrite; the first claim's Secret
/// is [`secret_name`], the others' `<name>-<i>`.
pub async fn create_access(
    client: &Client,
    mode: Mode,
    ns: &str,
    name: &str,
    claims: &[String],
) -> Result<()> {
    let secrets: Vec<String> = (0..claims.len())
        .map(|i| match i {
            0 => secret_name(name),
            _ => format!("{name}-{i}"),
        })
        .collect();
    let entries: Vec<(&str, &str, &str)> = claims
        .iter()
        .zip(&secrets)
        .map(|(c, s)| (c.as_str(), "ReadWrite", s.as_str()))
        .collect();
    let body = cosi_e2e::access_of(&access_class(mode), &entries);
    cosi_e2e::create(client, Kind::BucketAccess, ns, name, body).await?;
    Ok(())
}

pub async fn delete(client: &Client, kind: Kind, ns: &str, name: &str) -> Result<()> {
    cosi_e2e::api(client, kind, ns)
        .delete(name, &DeleteParams::default())
        .await
        .with_context(|| format!("deleting {kind:?} {ns}/{name}"))?;
    Ok(())
}

/// Runs `f` for each of `names`, `parallel` at a time.
pub async fn each<F, Fut>(names: &[String], parallel: usize, f: F) -> Result<()>
where
    F: Fn(String) -> Fut,
    Fut: std::future::Future<Output = Result<()>>,
{
    futures::stream::iter(names.iter().cloned())
        .map(f)
        .buffer_unordered(parallel)
        .try_for_each(|()| async { Ok(()) })
        .await
}

/// A tenant's edit: an annotation on the object (what the `edit` role may
/// write on its BucketAccess or ConfigMap).
pub async fn annotate(
    api: &kube::Api<kube::api::DynamicObject>,
    name: &str,
    i: usize,
) -> Result<()> {
    let patch = json!({"metadata": {"annotations": {"bench.objectbucket.io/edit": i.to_string()}}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .with_context(|| format!("annotating {name}"))?;
    Ok(())
}

/// Deletes every BucketAccess, BucketClaim and Secret of `namespaces`
/// and every Bucket, removing their finalizers (for modes whose deletion
/// does not finish, [`Mode::deletes_complete`]); returns how many.
pub async fn strip_all(client: &Client, namespaces: &[&str]) -> Result<usize> {
    let secrets = ApiResource::erase::<Secret>(&());
    let mut apis = Vec::new();
    for ns in namespaces {
        apis.push(cosi_e2e::api(client, Kind::BucketAccess, ns));
        apis.push(kube::Api::namespaced_with(client.clone(), ns, &secrets));
        apis.push(cosi_e2e::api(client, Kind::BucketClaim, ns));
    }
    apis.push(cosi_e2e::api(client, Kind::Bucket, ""));
    let mut n = 0;
    for api in apis {
        for o in api.list(&Default::default()).await?.items {
            let name = o.metadata.name.clone().unwrap_or_default();
            let _ = api.delete(&name, &DeleteParams::default()).await;
            let patch = json!({"metadata": {"finalizers": null}});
            let _ = api
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await;
            n += 1;
        }
    }
    Ok(n)
}

/// The kind's resource as `apiserver_request_total` names it.
pub fn resource(kind: Kind) -> String {
    super::count::cosi(&Kind::resource(kind).plural)
}
