//! COSI test support (the Kubernetes side): a provisioner that records every COSI call and keeps
//! its buckets and accounts in memory (or in a JSON file, so that a crashed
//! and restarted process continues with the same store), and helpers to
//! install the COSI CRDs.
//!
//! It follows the idempotency contract as a real backend must, so the
//! counts it records are what the library made a backend do.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use anyhow::Result;
use async_trait::async_trait;
use lib_provisioner::provisioner::{
    AccessGrant, AccessMode, AccessRequest, AccessRevocation, BucketInfo, StoreEndpoint,
};
use lib_provisioner::{
    BucketAccess, BucketRequest, Credentials, ProvisionError, Provisioner, TeardownRequest,
};
use serde::{Deserialize, Serialize};

use crate::TestEnv;

/// The driver name the COSI tests serve.
pub const DRIVER: &str = "cosi.test.example";
/// The endpoint the recorder reports.
pub const ENDPOINT: &str = "http://s3.test.example:9000";

/// One COSI call the library made.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CosiCall {
    CreateBucket(String),
    ExistingBucket(String),
    Delete(String),
    /// The account name, and each bucket with its mode.
    GrantAccess(String, Vec<(String, String)>),
    RevokeAccess(String),
}

/// What the store holds.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct CosiState {
    pub calls: Vec<CosiCall>,
    /// Bucket name → the claim UID it was created for.
    pub buckets: BTreeMap<String, String>,
    /// Buckets an administrator made (static).
    pub existing: BTreeSet<String>,
    /// Account → its buckets and modes.
    pub accounts: BTreeMap<String, Vec<(String, String)>>,
}

/// The recording provisioner.
#[derive(Clone, Default)]
pub struct CosiRecorder {
    state: Arc<Mutex<CosiState>>,
    file: Option<PathBuf>,
    /// Whether one credential may reach several buckets.
    pub multi_bucket: bool,
}

impl CosiRecorder {
    /// An in-memory store that allows several buckets per credential.
    pub fn new() -> Self {
        Self {
            multi_bucket: true,
            ..Default::default()
        }
    }

    /// A store kept in `file` (read if it exists, written after each call).
    pub fn in_file(file: PathBuf) -> Result<Self> {
        let state = match std::fs::read(&file) {
            Ok(bytes) => serde_json::from_slice(&bytes)?,
            Err(_) => CosiState::default(),
        };
        Ok(Self {
            state: Arc::new(Mutex::new(state)),
            file: Some(file),
            multi_bucket: true,
        })
    }

    /// Reads a store file another process wrote.
    pub fn read_file(file: &std::path::Path) -> Result<CosiState> {
        Ok(match std::fs::read(file) {
            Ok(bytes) => serde_json::from_slice(&bytes)?,
            Err(_) => CosiState::default(),
        })
    }

    /// A store whose credentials reach one bucket only.
    pub fn single_bucket(mut self) -> Self {
        self.multi_bucket = false;
        self
    }

    /// A copy of the state.
    pub fn state(&self) -> CosiState {
        self.lock().clone()
    }

    /// The calls so far.
    pub fn calls(&self) -> Vec<CosiCall> {
        self.lock().calls.clone()
    }

    /// Adds a bucket an administrator made.
    pub fn add_existing(&self, name: &str) {
        self.with(|s| {
            s.existing.insert(name.to_owned());
        });
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, CosiState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn with<T>(&self, f: impl FnOnce(&mut CosiState) -> T) -> T {
        let mut state = self.lock();
        let out = f(&mut state);
        if let Some(file) = &self.file {
            // Written whole and renamed: a crash never leaves half a file.
            let tmp = file.with_extension("tmp");
            if let Ok(bytes) = serde_json::to_vec(&*state)
                && std::fs::write(&tmp, bytes).is_ok()
            {
                let _ = std::fs::rename(&tmp, file);
            }
        }
        out
    }
}

fn endpoint() -> StoreEndpoint {
    StoreEndpoint::new("s3.test.example", 9000).with_url(ENDPOINT)
}

#[async_trait]
impl Provisioner for CosiRecorder {
    async fn provision(&self, _: &BucketRequest) -> Result<BucketAccess, ProvisionError> {
        Err(ProvisionError::permanent(
            "the COSI recorder serves COSI only",
        ))
    }
    async fn grant(&self, _: &BucketRequest) -> Result<BucketAccess, ProvisionError> {
        Err(ProvisionError::permanent(
            "the COSI recorder serves COSI only",
        ))
    }
    async fn revoke(&self, _: &TeardownRequest) -> Result<(), ProvisionError> {
        Ok(())
    }

    async fn delete(&self, req: &TeardownRequest) -> Result<(), ProvisionError> {
        self.with(|s| {
            s.calls.push(CosiCall::Delete(req.bucket_name.clone()));
            // Only what was made for this claim (or the static one named).
            match s.buckets.get(&req.bucket_name) {
                Some(owner) if *owner == req.claim.uid => {
                    s.buckets.remove(&req.bucket_name);
                }
                _ => {
                    s.existing.remove(&req.bucket_name);
                }
            }
            Ok(())
        })
    }

    async fn create_bucket(&self, req: &BucketRequest) -> Result<BucketInfo, ProvisionError> {
        self.with(|s| {
            s.calls
                .push(CosiCall::CreateBucket(req.bucket_name.clone()));
            let owner = s
                .buckets
                .entry(req.bucket_name.clone())
                .or_insert_with(|| req.claim.uid.clone());
            if *owner != req.claim.uid {
                return Err(ProvisionError::already_exists(format!(
                    "bucket {} belongs to another claim",
                    req.bucket_name
                )));
            }
            Ok(BucketInfo::new(endpoint()))
        })
    }

    async fn existing_bucket(&self, req: &BucketRequest) -> Result<BucketInfo, ProvisionError> {
        self.with(|s| {
            s.calls
                .push(CosiCall::ExistingBucket(req.bucket_name.clone()));
            if s.existing.contains(&req.bucket_name) {
                Ok(BucketInfo::new(endpoint()))
            } else {
                Err(ProvisionError::not_found(format!(
                    "bucket {} does not exist in the store: create it there",
                    req.bucket_name
                )))
            }
        })
    }

    async fn grant_access(&self, req: &AccessRequest) -> Result<AccessGrant, ProvisionError> {
        let buckets: Vec<(String, String)> = req
            .buckets
            .iter()
            .map(|b| (b.bucket_name.clone(), b.mode.as_str().to_owned()))
            .collect();
        let multi = self.multi_bucket;
        self.with(|s| {
            s.calls.push(CosiCall::GrantAccess(
                req.account_name.clone(),
                buckets.clone(),
            ));
            if buckets.len() > 1 && !multi {
                return Err(ProvisionError::multi_bucket_unsupported(
                    "this store gives one credential access to one bucket only: create one BucketAccess per claim",
                )
                .with_nothing_created());
            }
            if let Some(b) = req
                .buckets
                .iter()
                .find(|b| !s.buckets.contains_key(&b.bucket_name) && !s.existing.contains(&b.bucket_name))
            {
                return Err(ProvisionError::not_found(format!("bucket {} does not exist", b.bucket_name)));
            }
            if req.buckets.iter().any(|b| b.mode == AccessMode::WriteOnly) {
                return Err(ProvisionError::unsupported_access_mode(
                    AccessMode::WriteOnly,
                    "this store cannot grant WriteOnly: ask for ReadWrite",
                ));
            }
            s.accounts.insert(req.account_name.clone(), buckets);
            Ok(AccessGrant::new(
                req.account_name.clone(),
                Credentials::new(format!("AK-{}", req.account_name), format!("SK-{}", req.account_name)),
                endpoint(),
            ))
        })
    }

    async fn revoke_access(&self, req: &AccessRevocation) -> Result<(), ProvisionError> {
        self.with(|s| {
            s.calls.push(CosiCall::RevokeAccess(req.account_id.clone()));
            s.accounts.remove(&req.account_id);
            Ok(())
        })
    }
}

/// Installs the COSI CRDs (`crds/cosi/`, as checked in).
pub async fn install_cosi_crds(env: &TestEnv) -> Result<()> {
    for (name, _) in lib_provisioner::cosi::api::crd_files() {
        let yaml = crate::setup::repo_file(&format!("crds/cosi/{name}"))?;
        env.install_crds(&yaml).await?;
    }
    Ok(())
}

/// Waits until BucketClaim `ns/name` is `readyToUse`, within `timeout`,
/// and returns it; panics (the test fails) otherwise.
pub async fn wait_claim_ready(
    client: &kube::Client,
    ns: &str,
    name: &str,
    timeout: std::time::Duration,
) -> lib_provisioner::cosi::api::BucketClaim {
    let api = kube::Api::<lib_provisioner::cosi::api::BucketClaim>::namespaced(client.clone(), ns);
    crate::wait_for(
        timeout,
        format!("BucketClaim {ns}/{name} to be ready"),
        || async {
            Ok(api
                .get_opt(name)
                .await?
                .filter(|c| c.status.as_ref().is_some_and(|s| s.ready_to_use)))
        },
    )
    .await
    .expect("claim ready")
}
