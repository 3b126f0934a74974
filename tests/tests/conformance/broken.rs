//! Provisioners that each break one rule of the contract, as wrappers
//! around the sample: the kit must fail each, naming the rule.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use lib_provisioner::api::BROWNFIELD_BUCKET_PARAMETER;
use lib_provisioner::conformance::{Answer, Op, ProbeError};
use lib_provisioner::{
    BucketAccess, BucketRequest, Credentials, ProvisionError, Provisioner, Revocation,
    RotationRequest, TeardownRequest, UpdateRequest,
};
use rand::Rng;
use sample_provisioner::S3Provisioner;
use sample_provisioner::admin::AdminClient;
use sample_provisioner::credentials::{policy_document, policy_name};

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
    /// Teardown: delete and revoke answer Ok and never reach the store
    /// (they update the provisioner's own records only).
    NeverReachesStore,
    /// Repeat: every provision after the first mints a new user for the
    /// claim (the previous one stays).
    MintsKeyOnRepeat,
    /// Abandon: provision makes a staging user first and removes it at
    /// its end: a dropped call leaves it.
    LeavesKeyWhenDropped,
    /// Teardown: revoke rewrites the claim's policy without its bucket
    /// statement (no listing), and keeps the object statement.
    RevokeRemovesListOnly,
    /// Scope: the policy names `bucket*`, reaching every bucket whose name
    /// starts with the claim's.
    PolicyWildcard,
    /// Update answers Ok and applies nothing.
    UpdateDoesNothing,
    /// Update applies the claim's new config as if nothing had been
    /// applied before (it drops `previous_config`): settings whose keys the
    /// claim removed (lifecycle rules, bucket policy) stay on the bucket.
    UpdateForgetsRemovals,
    /// Reissue provisions as for a new claim: a gone bucket is made again.
    ReissueCreates,
    /// Delete swallows BucketNotEmpty: Ok, with the bucket and its data left.
    DeleteLeavesData,
    /// One user per bucket for brownfield grants: a grant revokes the
    /// previous claim's access to the same bucket.
    GrantRevokesOthers,
    /// Read-only credentials may also delete objects.
    ReadOnlyDeletes,
    /// Correct: implements only `revoke_previous_key` (the trait's advice);
    /// `revoke_previous` is the default, which does nothing.
    RevokePreviousKeyOnly,
}

/// The sample with one [`Flaw`].
pub struct Broken {
    inner: Arc<S3Provisioner>,
    flaw: Flaw,
    root: Credentials,
    /// The store's admin API (RustFS), and its S3 API as root.
    admin: Option<AdminClient>,
    s3: aws_sdk_s3::Client,
    /// Brownfield grants by bucket: the last claim's teardown.
    grants: Mutex<BTreeMap<String, TeardownRequest>>,
    /// Buckets provisioned and not deleted, by this wrapper.
    live: Arc<Mutex<BTreeSet<String>>>,
    /// Buckets whose provision started, and those it finished.
    started: Mutex<BTreeSet<String>>,
    finished: Mutex<BTreeSet<String>>,
}

fn set(m: &Mutex<BTreeSet<String>>) -> std::sync::MutexGuard<'_, BTreeSet<String>> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Broken {
    /// The wrapper's own record of the buckets it provisioned and did not
    /// delete, for [`RecordsProbe`].
    pub fn records(&self) -> Arc<Mutex<BTreeSet<String>>> {
        self.live.clone()
    }

    fn admin(&self) -> &AdminClient {
        self.admin
            .as_ref()
            .expect("this flaw needs the store's admin API")
    }

    /// A new user, `<prefix><random>`, with the claim's policy if
    /// `claim_uid` is given.
    async fn extra_user(&self, prefix: &str, claim_uid: Option<&str>) -> Credentials {
        let n: u32 = rand::rng().random();
        let name = format!("{prefix}{n:08x}");
        let secret = format!("{:032x}", rand::rng().random::<u128>());
        let admin = self.admin();
        admin.add_user(&name, &secret).await.unwrap();
        if let Some(uid) = claim_uid {
            admin
                .set_user_policy(&name, &policy_name(uid))
                .await
                .unwrap();
        }
        Credentials::new(name, secret)
    }

    pub fn new(
        inner: Arc<S3Provisioner>,
        flaw: Flaw,
        root: Credentials,
        endpoint: &str,
        admin_api: bool,
    ) -> Self {
        let admin = admin_api.then(|| {
            AdminClient::new(endpoint, obc_tests::testenv::S3_REGION, root.clone()).unwrap()
        });
        let s3 = obc_tests::testenv::s3_client_for(
            endpoint,
            &root.access_key_id,
            &root.secret_access_key,
        );
        Self {
            inner,
            flaw,
            root,
            admin,
            s3,
            grants: Mutex::default(),
            live: Arc::default(),
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
            Flaw::MintsKeyOnRepeat if set(&self.live).contains(b) => {
                let mut access = self.inner.provision(req).await?;
                access.credentials = self.extra_user("obcm", Some(&req.claim.uid)).await;
                Ok(access)
            }
            Flaw::LeavesKeyWhenDropped => {
                let staging = self.extra_user("obcs", None).await;
                let access = self.inner.provision(req).await;
                self.admin()
                    .remove_user(&staging.access_key_id)
                    .await
                    .unwrap();
                access
            }
            Flaw::PolicyWildcard => {
                let access = self.inner.provision(req).await?;
                let wide = policy_document(&format!("{b}*"), Default::default());
                self.admin()
                    .add_canned_policy(&policy_name(&req.claim.uid), &wide)
                    .await
                    .unwrap();
                Ok(access)
            }
            Flaw::ReadOnlyDeletes if req.additional_config.contains_key("accessMode") => {
                let access = self.inner.provision(req).await?;
                let mut doc = policy_document(b, sample_provisioner::access::Access::ReadOnly);
                doc["Statement"][1]["Action"]
                    .as_array_mut()
                    .unwrap()
                    .push("s3:DeleteObject".into());
                self.admin()
                    .add_canned_policy(&policy_name(&req.claim.uid), &doc)
                    .await
                    .unwrap();
                Ok(access)
            }
            Flaw::ReissueCreates if req.reissue => {
                let mut fresh = req.clone();
                fresh.reissue = false;
                self.inner.provision(&fresh).await
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
        if let Flaw::GrantRevokesOthers = self.flaw {
            let previous = self.grants.lock().unwrap().get(&req.bucket_name).cloned();
            if let Some(previous) = previous.filter(|p| p.claim.uid != req.claim.uid) {
                self.inner.revoke(&previous).await?;
            }
        }
        let access = self.inner.grant(req).await?;
        if let Flaw::GrantRevokesOthers = self.flaw {
            let mut td =
                TeardownRequest::new(req.claim.clone(), &req.bucket_name, &req.storage_class_name)
                    .with_parameters(req.parameters.clone())
                    .provisioned_as(req.object_bucket_name.clone());
            td.reclaim_policy = lib_provisioner::api::ReclaimPolicy::Retain;
            td.additional_state = access.additional_state.clone();
            self.grants
                .lock()
                .unwrap()
                .insert(req.bucket_name.clone(), td);
        }
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
            Flaw::NeverReachesStore => {
                set(&self.live).remove(&req.bucket_name);
                return Ok(());
            }
            Flaw::DeleteLeavesData => {
                self.inner.revoke(req).await?;
                let _ = self
                    .s3
                    .delete_bucket()
                    .bucket(&req.bucket_name)
                    .send()
                    .await;
                set(&self.live).remove(&req.bucket_name);
                return Ok(());
            }
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
            Flaw::KeepsKeysOnRevoke | Flaw::NeverReachesStore => Ok(()),
            Flaw::RevokeRemovesListOnly => {
                let mut doc = policy_document(&req.bucket_name, Default::default());
                doc["Statement"].as_array_mut().unwrap().remove(0);
                self.admin()
                    .add_canned_policy(&policy_name(&req.claim.uid), &doc)
                    .await
                    .unwrap();
                Ok(())
            }
            _ => self.inner.revoke(req).await,
        }
    }

    async fn update(&self, req: &UpdateRequest) -> Result<(), ProvisionError> {
        match self.flaw {
            Flaw::UpdateDoesNothing => Ok(()),
            Flaw::UpdateForgetsRemovals => {
                let mut forgetful = req.clone();
                forgetful.previous_config = BTreeMap::new();
                self.inner.update(&forgetful).await
            }
            _ => self.inner.update(req).await,
        }
    }

    async fn rotate(&self, req: &RotationRequest) -> Result<BucketAccess, ProvisionError> {
        self.inner.rotate(req).await
    }

    async fn revoke_previous(&self, req: &RotationRequest) -> Result<(), ProvisionError> {
        match self.flaw {
            // The trait's default: nothing.
            Flaw::RevokePreviousKeyOnly => Ok(()),
            _ => self.inner.revoke_previous(req).await,
        }
    }

    async fn revoke_previous_key(
        &self,
        req: &RotationRequest,
    ) -> Result<Revocation, ProvisionError> {
        match self.flaw {
            Flaw::RevokePreviousKeyOnly => self.inner.revoke_previous_key(req).await,
            _ => self
                .revoke_previous(req)
                .await
                .map(|()| Revocation::Unreported),
        }
    }
}

/// The read-only request of the sample.
pub fn read_only() -> BTreeMap<String, String> {
    BTreeMap::from([("accessMode".to_owned(), "read-only".to_owned())])
}

/// A probe as an author might write it first: answering from the
/// provisioner's own records instead of the store. It passes a provisioner
/// whose delete never reaches the store, which the kit's `S3Probe` fails.
pub struct RecordsProbe {
    pub records: Arc<Mutex<BTreeSet<String>>>,
    pub foreign: Mutex<BTreeSet<String>>,
}

#[async_trait]
impl lib_provisioner::conformance::StoreProbe for RecordsProbe {
    fn name(&self) -> String {
        "RecordsProbe (the provisioner's own records)".to_owned()
    }
    async fn bucket_exists(&self, bucket: &str) -> Result<bool, ProbeError> {
        Ok(set(&self.records).contains(bucket) || set(&self.foreign).contains(bucket))
    }
    async fn list_buckets(&self) -> Result<BTreeSet<String>, ProbeError> {
        Ok(set(&self.records)
            .union(&set(&self.foreign))
            .cloned()
            .collect())
    }
    async fn create_foreign_bucket(&self, bucket: &str) -> Result<(), ProbeError> {
        set(&self.foreign).insert(bucket.to_owned());
        Ok(())
    }
    async fn remove_bucket(&self, bucket: &str) -> Result<(), ProbeError> {
        set(&self.foreign).remove(bucket);
        Ok(())
    }
    async fn try_access(
        &self,
        _: &BucketAccess,
        bucket: &str,
        _: Op,
    ) -> Result<Answer, ProbeError> {
        Ok(if set(&self.records).contains(bucket) {
            Answer::Allowed
        } else {
            Answer::Denied("no record of access".to_owned())
        })
    }
}
