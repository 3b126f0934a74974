//! What the store sweep sees of the COSI family: BucketClasses and
//! BucketAccessClasses of this driver, and the UIDs of live BucketClaims,
//! BucketAccesses and the claims Buckets are bound to; from the caches
//! ([`CacheSource`], the controller) or from the API ([`ApiSource`], the
//! audit).

use std::collections::BTreeSet;

use async_trait::async_trait;
use kube::api::ListParams;
use kube::runtime::reflector::Store;
use kube::{Api, Client, ResourceExt};
use tokio::sync::watch;

use super::api::{Bucket, BucketAccess, BucketAccessClass, BucketClaim, BucketClass};
use crate::core::sweep::{Snapshot, SweepClass, SweepSource};

/// Everything the family sees, borrowed.
struct Seen<'a> {
    classes: Vec<&'a BucketClass>,
    access_classes: Vec<&'a BucketAccessClass>,
    claims: Vec<&'a BucketClaim>,
    accesses: Vec<&'a BucketAccess>,
    buckets: Vec<&'a Bucket>,
}

impl Seen<'_> {
    /// The classes of `driver`, and every owner's UID: claims, accesses,
    /// and the claims Buckets record (a Bucket outlives a claim whose
    /// finalizer was stripped until it is torn down itself).
    fn snapshot(&self, driver: &str) -> Snapshot {
        let class = |kind: &str, name: String, parameters: Option<&_>| SweepClass {
            kind: kind.to_owned(),
            name,
            parameters: parameters.cloned().unwrap_or_default(),
        };
        let mut classes: Vec<SweepClass> = self
            .classes
            .iter()
            .filter(|c| c.spec.driver_name == driver)
            .map(|c| class("BucketClass", c.name_any(), c.spec.parameters.as_ref()))
            .collect();
        classes.extend(
            self.access_classes
                .iter()
                .filter(|c| c.spec.driver_name == driver)
                .map(|c| {
                    class(
                        "BucketAccessClass",
                        c.name_any(),
                        c.spec.parameters.as_ref(),
                    )
                }),
        );
        let mut owners: BTreeSet<String> = self.claims.iter().filter_map(|c| c.uid()).collect();
        owners.extend(self.accesses.iter().filter_map(|a| a.uid()));
        owners.extend(
            self.buckets
                .iter()
                .filter_map(|b| b.spec.bucket_claim_ref.uid.clone()),
        );
        Snapshot { classes, owners }
    }
}

/// From the controller's caches, once they have listed.
pub(crate) struct CacheSource {
    pub driver: String,
    pub classes: Store<BucketClass>,
    pub access_classes: Store<BucketAccessClass>,
    pub claims: Store<BucketClaim>,
    pub accesses: Store<BucketAccess>,
    pub buckets: Store<Bucket>,
    pub synced: watch::Receiver<bool>,
}

#[async_trait]
impl SweepSource for CacheSource {
    fn family(&self) -> &'static str {
        "COSI"
    }

    async fn snapshot(&self) -> Result<Snapshot, String> {
        if !*self.synced.borrow() {
            return Err("the caches have not listed yet".to_owned());
        }
        let (classes, access_classes) = (self.classes.state(), self.access_classes.state());
        let (claims, accesses, buckets) = (
            self.claims.state(),
            self.accesses.state(),
            self.buckets.state(),
        );
        let seen = Seen {
            classes: classes.iter().map(AsRef::as_ref).collect(),
            access_classes: access_classes.iter().map(AsRef::as_ref).collect(),
            claims: claims.iter().map(AsRef::as_ref).collect(),
            accesses: accesses.iter().map(AsRef::as_ref).collect(),
            buckets: buckets.iter().map(AsRef::as_ref).collect(),
        };
        Ok(seen.snapshot(&self.driver))
    }
}

/// From the API (lists, no watch): the audit's.
pub(crate) struct ApiSource {
    pub client: Client,
    pub driver: String,
}

async fn list<K>(client: &Client, what: &str) -> Result<Vec<K>, String>
where
    K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    Api::<K>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .map_err(|e| format!("listing {what}: {e}"))
}

#[async_trait]
impl SweepSource for ApiSource {
    fn family(&self) -> &'static str {
        "COSI"
    }

    async fn snapshot(&self) -> Result<Snapshot, String> {
        let c = &self.client;
        let classes: Vec<BucketClass> = list(c, "BucketClasses").await?;
        let access_classes: Vec<BucketAccessClass> = list(c, "BucketAccessClasses").await?;
        let claims: Vec<BucketClaim> = list(c, "BucketClaims").await?;
        let accesses: Vec<BucketAccess> = list(c, "BucketAccesses").await?;
        let buckets: Vec<Bucket> = list(c, "Buckets").await?;
        let seen = Seen {
            classes: classes.iter().collect(),
            access_classes: access_classes.iter().collect(),
            claims: claims.iter().collect(),
            accesses: accesses.iter().collect(),
            buckets: buckets.iter().collect(),
        };
        Ok(seen.snapshot(&self.driver))
    }
}
