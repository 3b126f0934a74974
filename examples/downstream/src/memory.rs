//! An object store in memory, and a provisioner for it that meets the
//! library's contract (`lib_provisioner::provisioner`): buckets record the
//! claim they were made for, each claim gets keys of its own, and every
//! method can be repeated or dropped half-way. Each step yields, as a call
//! to a real store would, so the conformance kit can drop a call between
//! any two of them (`probe.rs`, used by the tests).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use lib_provisioner::provisioner::{
    BucketAccess, BucketRequest, Credentials, ProvisionError, Provisioner, RotationRequest,
    TeardownRequest, UpdateRequest,
};

#[cfg(test)]
pub mod probe;
#[cfg(test)]
pub mod variants;

/// A bucket: who it was made for (`None`: not by the provisioner).
#[derive(Clone, Debug)]
pub struct Bucket {
    pub owner: Option<String>,
    pub quota: Option<String>,
}

/// A key: the bucket it reaches, and whether it may write.
#[derive(Clone, Debug)]
#[cfg_attr(
    not(test),
    expect(
        dead_code,
        reason = "read by the store's data path, which this example does not serve; its tests' probe reads them"
    )
)]
pub struct Key {
    pub secret: String,
    pub bucket: String,
    pub writes: bool,
}

/// The store: buckets and keys by name.
#[derive(Debug, Default)]
pub struct State {
    pub buckets: BTreeMap<String, Bucket>,
    pub keys: BTreeMap<String, Key>,
}

/// The provisioner, on a store shared with whoever holds the `Arc`.
#[derive(Clone, Default)]
pub struct Memory(pub Arc<Mutex<State>>);

/// The claim's two keys: a rotation alternates between them.
fn keys_of(uid: &str) -> [String; 2] {
    [format!("key-{uid}"), format!("key-{uid}-r")]
}

impl Memory {
    /// One step on the store: yields first, as a request to a store would.
    async fn step(&self) -> Result<MutexGuard<'_, State>, ProvisionError> {
        tokio::task::yield_now().await;
        self.0
            .lock()
            .map_err(|_| ProvisionError::retryable("state lock poisoned"))
    }

    /// Gives `key` access to `req`'s bucket, with a fresh secret.
    async fn issue(&self, req: &BucketRequest, key: &str) -> Result<BucketAccess, ProvisionError> {
        let writes =
            req.additional_config.get("accessMode").map(String::as_str) != Some("read-only");
        let secret = format!("secret-{}", rand_suffix());
        self.step().await?.keys.insert(
            key.to_owned(),
            Key {
                secret: secret.clone(),
                bucket: req.bucket_name.clone(),
                writes,
            },
        );
        Ok(
            BucketAccess::new("memory.invalid", 443, Credentials::new(key, secret))
                .with_state("reclaim", format!("{:?}", req.reclaim_policy)),
        )
    }
}

/// A value that differs between calls (no secret needs more in memory).
fn rand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default()
}

#[async_trait]
impl Provisioner for Memory {
    async fn provision(&self, req: &BucketRequest) -> Result<BucketAccess, ProvisionError> {
        let uid = &req.claim.uid;
        {
            let mut state = self.step().await?;
            // A re-issue never creates the bucket it is bound to.
            if req.reissue && !state.buckets.contains_key(&req.bucket_name) {
                return Err(ProvisionError::permanent(format!(
                    "bucket {} is gone: delete the claim, or create a new one",
                    req.bucket_name
                )));
            }
            let bucket = state
                .buckets
                .entry(req.bucket_name.clone())
                .or_insert(Bucket {
                    owner: Some(uid.clone()),
                    quota: None,
                });
            if bucket.owner.as_ref() != Some(uid) {
                return Err(ProvisionError::permanent(format!(
                    "bucket {} exists and was not created for this claim: choose another bucketName",
                    req.bucket_name
                )));
            }
        }
        self.issue(req, &keys_of(uid)[0]).await
    }

    async fn grant(&self, req: &BucketRequest) -> Result<BucketAccess, ProvisionError> {
        if !self.step().await?.buckets.contains_key(&req.bucket_name) {
            return Err(ProvisionError::permanent(format!(
                "bucket {} does not exist: fix the StorageClass's bucketName",
                req.bucket_name
            )));
        }
        self.issue(req, &keys_of(&req.claim.uid)[0]).await
    }

    async fn delete(&self, req: &TeardownRequest) -> Result<(), ProvisionError> {
        {
            let mut state = self.step().await?;
            let ours = state
                .buckets
                .get(&req.bucket_name)
                .is_some_and(|b| b.owner.as_ref() == Some(&req.claim.uid));
            if ours {
                state.buckets.remove(&req.bucket_name);
            }
        }
        self.revoke(req).await
    }

    async fn revoke(&self, req: &TeardownRequest) -> Result<(), ProvisionError> {
        for key in keys_of(&req.claim.uid) {
            self.step().await?.keys.remove(&key); // gone already: fine
        }
        Ok(())
    }

    async fn update(&self, req: &UpdateRequest) -> Result<(), ProvisionError> {
        let quota = req.bucket.additional_config.get("maxSize").cloned();
        let mut state = self.step().await?;
        if let Some(bucket) = state.buckets.get_mut(&req.bucket.bucket_name) {
            bucket.quota = quota;
        }
        Ok(())
    }

    async fn rotate(&self, req: &RotationRequest) -> Result<BucketAccess, ProvisionError> {
        let [first, second] = keys_of(&req.bucket.claim.uid);
        let target = if req.previous_access_key_id == first {
            second
        } else {
            first
        };
        self.issue(&req.bucket, &target).await
    }

    async fn revoke_previous(&self, req: &RotationRequest) -> Result<(), ProvisionError> {
        // Only the claim's own keys.
        if keys_of(&req.bucket.claim.uid).contains(&req.previous_access_key_id) {
            self.step().await?.keys.remove(&req.previous_access_key_id);
        }
        Ok(())
    }
}
