//! Provisioners that each break one rule of the contract, as wrappers
//! around the sample: the kit must fail each, naming the rule.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use lib_provisioner::api::BROWNFIELD_BUCKET_PARAMETER;
use lib_provisioner::{
    BucketAccess, BucketRequest, Credentials, ProvisionError, Provisioner, RotationRequest,
    TeardownRequest, UpdateRequest,
};
use sample_provisioner::S3Provisioner;

/// What a wrapper changes; everything else goes to the sample.
#[derive(Clone, Copy, Debug)]
pub enum Flaw {
    /// Repeat: a second provision answers "already exists".
    FailsWhenItExists,
    /// Repeat: a second provision makes a second bucket.
    SecondBucketOnRetry,
    /// Abandon: records the bucket as its own only after the whole call,
    /// and refuses a bucket it started but did not record.
    ForgetsWhenDropped,
    /// GoneIsDone: delete and revoke of what it does not know fail.
    FailsWhenGone,
    /// Ownership: a refused provision grants the existing bucket instead.
    TakesOverExisting,
    /// Scope: hands every claim the store's root key.
    HandsOutRootKey,
    /// Scope: ignores a claim's read-only request.
    IgnoresReadOnly,
    /// Teardown: delete only revokes, the bucket stays.
    KeepsBucketOnDelete,
    /// Teardown: revoke does nothing.
    KeepsKeysOnRevoke,
}

/// The sample with one [`Flaw`].
pub struct Broken {
    inner: Arc<S3Provisioner>,
    flaw: Flaw,
    root: Credentials,
    /// Buckets provisioned and not deleted, by this wrapper.
    live: Mutex<BTreeSet<String>>,
    /// Buckets whose provision started, and those it finished.
    started: Mutex<BTreeSet<String>>,
    finished: Mutex<BTreeSet<String>>,
}

fn set(m: &Mutex<BTreeSet<String>>) -> std::sync::MutexGuard<'_, BTreeSet<String>> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Broken {
    pub fn new(inner: Arc<S3Provisioner>, flaw: Flaw, root: Credentials) -> Self {
        Self {
            inner,
            flaw,
            root,
            live: Mutex::default(),
            started: Mutex::default(),
            finished: Mutex::default(),
        }
    }

    async fn provision_as_designed(
        &self,
        req: &BucketRequest,
    ) -> Result<BucketAccess, ProvisionError> {
        let b = &req.bucket_name;
        match self.flaw {
            Flaw::FailsWhenItExists if set(&self.live).contains(b) => {
                Err(ProvisionError::permanent(format!(
                    "BucketAlreadyExists: bucket {b} already exists"
                )))
            }
            Flaw::SecondBucketOnRetry if set(&self.live).contains(b) => {
                let mut again = req.clone();
                again.bucket_name = format!("{b}-2");
                self.inner.provision(&again).await
            }
            Flaw::ForgetsWhenDropped => {
                if set(&self.started).contains(b) && !set(&self.finished).contains(b) {
                    return Err(ProvisionError::permanent(format!(
                        "bucket {b} exists but was not recorded as this claim's"
                    )));
                }
                set(&self.started).insert(b.clone());
                let access = self.inner.provision(req).await?;
                set(&self.finished).insert(b.clone());
                Ok(access)
            }
            Flaw::TakesOverExisting => match self.inner.provision(req).await {
                Err(e) if !e.is_retryable() => {
                    let mut grant = req.clone();
                    grant
                        .parameters
                        .insert(BROWNFIELD_BUCKET_PARAMETER.to_owned(), b.clone());
                    self.inner.grant(&grant).await
                }
                other => other,
            },
            Flaw::IgnoresReadOnly => {
                let mut rw = req.clone();
                rw.additional_config.remove("accessMode");
                self.inner.provision(&rw).await
            }
            _ => self.inner.provision(req).await,
        }
    }
}

#[async_trait]
impl Provisioner for Broken {
    async fn provision(&self, req: &BucketRequest) -> Result<BucketAccess, ProvisionError> {
        let mut access = self.provision_as_designed(req).await?;
        set(&self.live).insert(req.bucket_name.clone());
        if let Flaw::HandsOutRootKey = self.flaw {
            access.credentials = self.root.clone();
        }
        Ok(access)
    }

    async fn grant(&self, req: &BucketRequest) -> Result<BucketAccess, ProvisionError> {
        let access = self.inner.grant(req).await?;
        set(&self.live).insert(req.bucket_name.clone());
        Ok(access)
    }

    async fn delete(&self, req: &TeardownRequest) -> Result<(), ProvisionError> {
        match self.flaw {
            Flaw::FailsWhenGone if !set(&self.live).contains(&req.bucket_name) => {
                return Err(ProvisionError::permanent(format!(
                    "NoSuchBucket: bucket {} does not exist",
                    req.bucket_name
                )));
            }
            Flaw::KeepsBucketOnDelete => return self.inner.revoke(req).await,
            _ => {}
        }
        self.inner.delete(req).await?;
        set(&self.live).remove(&req.bucket_name);
        Ok(())
    }

    async fn revoke(&self, req: &TeardownRequest) -> Result<(), ProvisionError> {
        match self.flaw {
            Flaw::FailsWhenGone if !set(&self.live).remove(&req.bucket_name) => {
                Err(ProvisionError::permanent(format!(
                    "NoSuchUser: claim {} has no access to revoke",
                    req.claim
                )))
            }
            Flaw::KeepsKeysOnRevoke => Ok(()),
            _ => self.inner.revoke(req).await,
        }
    }

    async fn update(&self, req: &UpdateRequest) -> Result<(), ProvisionError> {
        self.inner.update(req).await
    }

    async fn rotate(&self, req: &RotationRequest) -> Result<BucketAccess, ProvisionError> {
        self.inner.rotate(req).await
    }

    async fn revoke_previous(&self, req: &RotationRequest) -> Result<(), ProvisionError> {
        self.inner.revoke_previous(req).await
    }
}

/// The read-only request of the sample.
pub fn read_only() -> BTreeMap<String, String> {
    BTreeMap::from([("accessMode".to_owned(), "read-only".to_owned())])
}
