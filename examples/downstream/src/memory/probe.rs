//! The conformance kit's view of the in-memory store: what an author
//! writes for their own store (a few calls of its client each).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use lib_provisioner::BucketAccess;
use lib_provisioner::conformance::{Answer, Op, ProbeError, StoreProbe};
use lib_provisioner::provisioner::{Made, MadeKind};

use super::{Bucket, State};

pub struct MemoryProbe(pub Arc<Mutex<State>>);

impl MemoryProbe {
    fn state(&self) -> Result<MutexGuard<'_, State>, ProbeError> {
        self.0
            .lock()
            .map_err(|_| ProbeError::new("state lock poisoned"))
    }
}

#[async_trait]
impl StoreProbe for MemoryProbe {
    async fn bucket_exists(&self, bucket: &str) -> Result<bool, ProbeError> {
        Ok(self.state()?.buckets.contains_key(bucket))
    }

    async fn list_buckets(&self) -> Result<BTreeSet<String>, ProbeError> {
        Ok(self.state()?.buckets.keys().cloned().collect())
    }

    async fn create_foreign_bucket(&self, bucket: &str) -> Result<(), ProbeError> {
        let foreign = Bucket {
            owner: None,
            quota: None,
        };
        self.state()?.buckets.insert(bucket.to_owned(), foreign);
        Ok(())
    }

    async fn remove_bucket(&self, bucket: &str) -> Result<(), ProbeError> {
        self.state()?.buckets.remove(bucket);
        Ok(())
    }

    async fn try_access(
        &self,
        access: &BucketAccess,
        bucket: &str,
        op: Op,
    ) -> Result<Answer, ProbeError> {
        let state = self.state()?;
        let creds = &access.credentials;
        Ok(match state.keys.get(&creds.access_key_id) {
            None => Answer::Denied("unknown key".into()),
            Some(k) if k.secret != creds.secret_access_key => Answer::Denied("wrong secret".into()),
            Some(k) if k.bucket != bucket => Answer::Denied("another bucket".into()),
            Some(k) if !k.writes && !matches!(op, Op::List | Op::Read) => {
                Answer::Denied("read-only key".into())
            }
            Some(_) if !state.buckets.contains_key(bucket) => {
                Answer::Denied("no such bucket".into())
            }
            Some(_) => Answer::Allowed,
        })
    }

    /// The quota the store holds for the bucket, against `maxSize`.
    async fn config_applied(
        &self,
        bucket: &str,
        config: &std::collections::BTreeMap<String, String>,
    ) -> Result<Option<bool>, ProbeError> {
        let state = self.state()?;
        Ok(state
            .buckets
            .get(bucket)
            .map(|b| b.quota.as_ref() == config.get("maxSize")))
    }

    /// Every key the store holds: the kit checks that each is gone with
    /// its claim.
    async fn inventory(&self) -> Result<Option<Vec<Made>>, ProbeError> {
        let keys = self.state()?.keys.keys().cloned().collect::<Vec<_>>();
        Ok(Some(
            keys.into_iter()
                .map(|k| Made::new(MadeKind::Principal, "memory", k))
                .collect(),
        ))
    }
}
