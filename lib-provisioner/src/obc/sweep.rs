//! What the store sweep sees of the OBC family: StorageClasses of this
//! provisioner, and the UIDs of live claims and of the claims ObjectBuckets
//! are bound to; from the caches ([`CacheSource`], the controller) or from
//! the API ([`ApiSource`], the audit).

use std::collections::BTreeSet;

use async_trait::async_trait;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::ListParams;
use kube::runtime::reflector::Store;
use kube::{Api, Client, ResourceExt};
use tokio::sync::watch;

use crate::core::sweep::{Snapshot, SweepClass, SweepSource};
use crate::obc::api::{ObjectBucket, ObjectBucketClaim};
use crate::obc::{CachedBucket, CachedClaim};

/// The StorageClasses of `provisioner_name`, as classes the sweep lists.
fn classes<'a>(
    all: impl IntoIterator<Item = &'a StorageClass>,
    provisioner_name: &str,
) -> Vec<SweepClass> {
    all.into_iter()
        .filter(|c| c.provisioner == provisioner_name)
        .map(|c| SweepClass {
            kind: "StorageClass".to_owned(),
            name: c.name_any(),
            parameters: c.parameters.clone().unwrap_or_default(),
        })
        .collect()
}

/// Every claim's UID, and every claim UID an ObjectBucket records (a claim
/// whose finalizer was stripped is torn down from its ObjectBucket: what it
/// owns stays owned until then).
fn owners<'a>(
    claims: impl IntoIterator<Item = &'a ObjectBucketClaim>,
    buckets: impl IntoIterator<Item = &'a ObjectBucket>,
) -> BTreeSet<String> {
    let mut uids: BTreeSet<String> = claims.into_iter().filter_map(|c| c.uid()).collect();
    uids.extend(
        buckets
            .into_iter()
            .filter_map(|b| b.spec.claim_ref.as_ref().and_then(|r| r.uid.clone())),
    );
    uids
}

/// From the controller's caches, once they have listed.
pub(crate) struct CacheSource {
    pub provisioner_name: String,
    pub classes: Store<StorageClass>,
    pub claims: Store<CachedClaim>,
    pub buckets: Store<CachedBucket>,
    pub synced: watch::Receiver<bool>,
}

#[async_trait]
impl SweepSource for CacheSource {
    fn family(&self) -> &'static str {
        "OBC"
    }

    async fn snapshot(&self) -> Result<Snapshot, String> {
        if !*self.synced.borrow() {
            return Err("the caches have not listed yet".to_owned());
        }
        let (claims, buckets) = (self.claims.state(), self.buckets.state());
        Ok(Snapshot {
            classes: classes(
                self.classes.state().iter().map(AsRef::as_ref),
                &self.provisioner_name,
            ),
            owners: owners(
                claims.iter().map(|c| c.without_maps()),
                buckets.iter().map(|b| b.without_maps()),
            ),
        })
    }
}

/// From the API (lists, no watch): the audit's.
pub(crate) struct ApiSource {
    pub client: Client,
    pub provisioner_name: String,
    /// `[None]`: every namespace.
    pub namespaces: Vec<Option<String>>,
}

#[async_trait]
impl SweepSource for ApiSource {
    fn family(&self) -> &'static str {
        "OBC"
    }

    async fn snapshot(&self) -> Result<Snapshot, String> {
        let lp = ListParams::default();
        let fail = |what: &str, e: kube::Error| format!("listing {what}: {e}");
        let storage = Api::<StorageClass>::all(self.client.clone())
            .list(&lp)
            .await
            .map_err(|e| fail("StorageClasses", e))?;
        let buckets = Api::<ObjectBucket>::all(self.client.clone())
            .list(&lp)
            .await
            .map_err(|e| fail("ObjectBuckets", e))?;
        let mut claims = Vec::new();
        for ns in &self.namespaces {
            let api: Api<ObjectBucketClaim> = match ns {
                Some(ns) => Api::namespaced(self.client.clone(), ns),
                None => Api::all(self.client.clone()),
            };
            claims.extend(
                api.list(&lp)
                    .await
                    .map_err(|e| fail("ObjectBucketClaims", e))?
                    .items,
            );
        }
        Ok(Snapshot {
            classes: classes(&storage.items, &self.provisioner_name),
            owners: owners(&claims, &buckets.items),
        })
    }
}
