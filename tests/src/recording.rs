//! A provisioner for library tests that records every call and keeps its
//! "buckets" in memory, plus helpers to run the library's controller
//! in-process against a [`crate::TestEnv`].
//!
//! It follows the idempotency contract exactly as a real backend must, so
//! the counts it records are what the library made a backend do.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, Result};
use async_trait::async_trait;
use kube::api::{Api, PostParams};
use kube::{Client, ResourceExt};
use lib_provisioner::api::{ClaimPhase, ObjectBucketClaim, ObjectBucketClaimSpec};
use lib_provisioner::provisioner::Revocation;
use lib_provisioner::{
    BucketAccess, BucketRequest, ControllerBuilder, Credentials, ProvisionError, Provisioner,
    RotationRequest, TeardownRequest, UpdateRequest,
};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::testenv::wait_for;

/// One call the library made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Call {
    Provision(String),
    Grant(String),
    Delete(String),
    Revoke(String),
    /// `update`, with the bucket name.
    Update(String),
    /// `rotate`, with the previous access key id the library handed in.
    Rotate(String),
    /// `revoke_previous`, with the access key id it was asked to revoke.
    RevokePrevious(String),
}

/// How the recorder answers `rotate` (see [`Recorder::rotate_with`]); by
/// default it cannot rotate, like the trait's default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rotation {
    /// A new access key id each time (`AK-<uid>-r<n>`), and a new
    /// `additional_state` naming it (`key`, `rotation`; no `user`: a key
    /// provisioning returned is dropped).
    NewKey,
    /// The claim's access key id kept, only the secret changed: a backend
    /// that cannot issue a second key.
    KeepKeyId,
}

/// How the recorder answers `revoke_previous`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Revoking {
    /// Revokes whatever key it is handed (trusts the library completely).
    #[default]
    Any,
    /// Keeps every key and says so: a backend whose keys cannot be removed
    /// one by one.
    Nothing,
}

#[derive(Default)]
struct State {
    calls: Vec<Call>,
    /// bucket name -> UID of the claim it was created for.
    buckets: BTreeMap<String, String>,
    /// Buckets that existed before any claim (brownfield).
    existing: BTreeSet<String>,
    /// Claim UIDs holding credentials.
    grants: BTreeSet<String>,
    /// Fail every call with this error until cleared.
    failing: Option<(bool, String)>,
    /// Teardowns wait here while set.
    gate: Option<Gate>,
    /// `rotate`'s answer; `None`: unsupported.
    rotation: Option<Rotation>,
    /// `revoke_previous`'s behaviour.
    revoking: Revoking,
    /// Rotations issued so far (numbers the new keys).
    rotations: usize,
    /// Access key id -> UID of the claim it was issued for, while it works.
    live_keys: BTreeMap<String, String>,
    /// `revoke_previous` waits here while set.
    revoke_gate: Option<Gate>,
    /// `update` refuses with this message (permanent) while set; otherwise
    /// it is unsupported (the trait's default).
    update_refusal: Option<String>,
}

/// Holds teardowns (Delete and Revoke) at their start until opened, so a
/// test can change objects while a deletion pass is between its reads and
/// its writes. See [`Recorder::hold_teardowns`].
#[derive(Clone)]
pub struct Gate {
    entered: Arc<tokio::sync::watch::Sender<usize>>,
    open: Arc<tokio::sync::watch::Sender<bool>>,
}

impl Gate {
    /// Waits until `n` teardowns have reached the gate.
    pub async fn entered(&self, n: usize, timeout: Duration) -> Result<()> {
        let mut rx = self.entered.subscribe();
        tokio::time::timeout(timeout, rx.wait_for(|k| *k >= n))
            .await
            .with_context(|| format!("{n} teardowns did not reach the gate in {timeout:?}"))?
            .context("gate dropped")?;
        Ok(())
    }

    /// Lets every held and later teardown through.
    pub fn open(&self) {
        self.open.send_replace(true);
    }

    async fn pass(&self) {
        self.entered.send_modify(|k| *k += 1);
        let mut rx = self.open.subscribe();
        // The sender lives in `self`: the wait ends only when opened.
        let _ = rx.wait_for(|open| *open).await;
    }
}

/// The recording provisioner. Cheap to clone; clones share state.
#[derive(Clone, Default)]
pub struct Recorder {
    state: Arc<Mutex<State>>,
    /// While true, every call waits (a store that accepts the connection
    /// and never answers); counts the calls that started waiting.
    hanging: Arc<tokio::sync::watch::Sender<(bool, usize)>>,
}

impl Recorder {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Every call so far.
    pub fn calls(&self) -> Vec<Call> {
        self.lock().calls.clone()
    }

    /// How many calls match.
    pub fn count(&self, f: impl Fn(&Call) -> bool) -> usize {
        self.lock().calls.iter().filter(|c| f(c)).count()
    }

    /// Buckets that exist in the "store".
    pub fn buckets(&self) -> BTreeSet<String> {
        let s = self.lock();
        s.buckets.keys().chain(s.existing.iter()).cloned().collect()
    }

    /// Claims (by UID) that hold credentials.
    pub fn grants(&self) -> BTreeSet<String> {
        self.lock().grants.clone()
    }

    /// Makes `name` exist before any claim, as a brownfield bucket.
    pub fn add_existing_bucket(&self, name: &str) {
        self.lock().existing.insert(name.to_owned());
    }

    /// Records a bucket as created for `claim_uid` (a fixture of earlier work).
    pub fn add_owned_bucket(&self, name: &str, claim_uid: &str) {
        self.lock()
            .buckets
            .insert(name.to_owned(), claim_uid.to_owned());
    }

    /// Fails every call until [`Recorder::heal`]: retryable or permanent.
    pub fn fail(&self, retryable: bool, message: &str) {
        self.lock().failing = Some((retryable, message.to_owned()));
    }

    /// Stops failing.
    pub fn heal(&self) {
        self.lock().failing = None;
    }

    /// Makes every later call hang until [`Recorder::answer`]: a store that
    /// never answers. Calls already hanging stay so until then too.
    pub fn hang(&self) {
        self.hanging.send_modify(|(on, _)| *on = true);
    }

    /// Lets hanging and later calls through.
    pub fn answer(&self) {
        self.hanging.send_modify(|(on, _)| *on = false);
    }

    /// How many calls have hung so far.
    pub fn hung(&self) -> usize {
        self.hanging.borrow().1
    }

    async fn maybe_hang(&self) {
        let mut rx = self.hanging.subscribe();
        if !rx.borrow().0 {
            return;
        }
        self.hanging.send_modify(|(_, n)| *n += 1);
        // The sender lives in `self`: the wait ends only when answered (or
        // when the library abandons the call).
        let _ = rx.wait_for(|(on, _)| !*on).await;
    }

    /// Makes every later teardown wait at the returned gate until it opens.
    pub fn hold_teardowns(&self) -> Gate {
        let gate = Gate {
            entered: Arc::new(tokio::sync::watch::channel(0).0),
            open: Arc::new(tokio::sync::watch::channel(false).0),
        };
        self.lock().gate = Some(gate.clone());
        gate
    }

    async fn gate(&self) {
        let gate = self.lock().gate.clone();
        if let Some(gate) = gate {
            gate.pass().await;
        }
    }

    /// Makes `rotate` answer as `mode` says.
    pub fn rotate_with(&self, mode: Rotation) {
        self.lock().rotation = Some(mode);
    }

    /// Makes `revoke_previous` behave as `mode` says.
    pub fn revoke_with(&self, mode: Revoking) {
        self.lock().revoking = mode;
    }

    /// Makes `update` refuse (permanently) with `message`.
    pub fn refuse_updates(&self, message: &str) {
        self.lock().update_refusal = Some(message.to_owned());
    }

    /// Whether access key `key` still works (issued and not revoked).
    pub fn key_works(&self, key: &str) -> bool {
        self.lock().live_keys.contains_key(key)
    }

    /// Makes every later `revoke_previous` wait at the returned gate until
    /// it opens: a rotation stopped after the Secret's switch.
    pub fn hold_revocations(&self) -> Gate {
        let gate = Gate {
            entered: Arc::new(tokio::sync::watch::channel(0).0),
            open: Arc::new(tokio::sync::watch::channel(false).0),
        };
        self.lock().revoke_gate = Some(gate.clone());
        gate
    }

    fn check_failing(s: &State) -> Result<(), ProvisionError> {
        match &s.failing {
            Some((true, m)) => Err(ProvisionError::retryable(m.clone())),
            Some((false, m)) => Err(ProvisionError::permanent(m.clone())),
            None => Ok(()),
        }
    }

    fn access(req_uid: &str) -> BucketAccess {
        BucketAccess::new(
            "s3.test.local",
            9000,
            Credentials::new(format!("AK-{req_uid}"), format!("SK-{req_uid}")),
        )
        .with_region("test-1")
        .with_state("user", format!("user-{req_uid}"))
    }
}

#[async_trait]
impl Provisioner for Recorder {
    async fn provision(&self, req: &BucketRequest) -> Result<BucketAccess, ProvisionError> {
        self.maybe_hang().await;
        let mut s = self.lock();
        s.calls.push(Call::Provision(req.bucket_name.clone()));
        Self::check_failing(&s)?;
        if s.existing.contains(&req.bucket_name) {
            return Err(ProvisionError::permanent(format!(
                "bucket {} exists and was not created for this claim",
                req.bucket_name
            )));
        }
        let owner = s
            .buckets
            .entry(req.bucket_name.clone())
            .or_insert_with(|| req.claim.uid.clone());
        if *owner != req.claim.uid {
            return Err(ProvisionError::permanent(format!(
                "bucket {} belongs to another claim",
                req.bucket_name
            )));
        }
        s.grants.insert(req.claim.uid.clone());
        let access = Self::access(&req.claim.uid);
        s.live_keys.insert(
            access.credentials.access_key_id.clone(),
            req.claim.uid.clone(),
        );
        Ok(access)
    }

    async fn grant(&self, req: &BucketRequest) -> Result<BucketAccess, ProvisionError> {
        self.maybe_hang().await;
        let mut s = self.lock();
        s.calls.push(Call::Grant(req.bucket_name.clone()));
        Self::check_failing(&s)?;
        if !s.existing.contains(&req.bucket_name) && !s.buckets.contains_key(&req.bucket_name) {
            return Err(ProvisionError::permanent(format!(
                "bucket {} does not exist",
                req.bucket_name
            )));
        }
        s.grants.insert(req.claim.uid.clone());
        let access = Self::access(&req.claim.uid);
        s.live_keys.insert(
            access.credentials.access_key_id.clone(),
            req.claim.uid.clone(),
        );
        Ok(access)
    }

    async fn delete(&self, req: &TeardownRequest) -> Result<(), ProvisionError> {
        self.maybe_hang().await;
        self.gate().await;
        let mut s = self.lock();
        s.calls.push(Call::Delete(req.bucket_name.clone()));
        Self::check_failing(&s)?;
        if s.buckets.get(&req.bucket_name) == Some(&req.claim.uid) {
            s.buckets.remove(&req.bucket_name);
        }
        s.grants.remove(&req.claim.uid);
        Ok(())
    }

    async fn revoke(&self, req: &TeardownRequest) -> Result<(), ProvisionError> {
        self.maybe_hang().await;
        self.gate().await;
        let mut s = self.lock();
        s.calls.push(Call::Revoke(req.bucket_name.clone()));
        Self::check_failing(&s)?;
        s.grants.remove(&req.claim.uid);
        Ok(())
    }

    async fn update(&self, req: &UpdateRequest) -> Result<(), ProvisionError> {
        self.maybe_hang().await;
        let mut s = self.lock();
        s.calls.push(Call::Update(req.bucket.bucket_name.clone()));
        Self::check_failing(&s)?;
        match &s.update_refusal {
            Some(message) => Err(ProvisionError::permanent(message.clone())),
            None => Err(ProvisionError::unsupported(
                "the recording provisioner applies no changes to spec.additionalConfig",
            )),
        }
    }

    async fn rotate(&self, req: &RotationRequest) -> Result<BucketAccess, ProvisionError> {
        self.maybe_hang().await;
        let mut s = self.lock();
        s.calls
            .push(Call::Rotate(req.previous_access_key_id.clone()));
        Self::check_failing(&s)?;
        let uid = req.bucket.claim.uid.clone();
        s.rotations += 1;
        let n = s.rotations;
        let key = match s.rotation {
            None => {
                return Err(ProvisionError::unsupported(
                    "the recording provisioner was not asked to rotate",
                ));
            }
            Some(Rotation::NewKey) => format!("AK-{uid}-r{n}"),
            Some(Rotation::KeepKeyId) => format!("AK-{uid}"),
        };
        s.live_keys.insert(key.clone(), uid.clone());
        let mut access = BucketAccess::new(
            "s3.test.local",
            9000,
            Credentials::new(key.clone(), format!("SK-{uid}-r{n}")),
        )
        .with_region("test-1");
        if s.rotation == Some(Rotation::NewKey) {
            access = access
                .with_state("key", key)
                .with_state("rotation", req.rotation.clone());
        } else {
            access = access.with_state("user", format!("user-{uid}"));
        }
        Ok(access)
    }

    async fn revoke_previous(&self, req: &RotationRequest) -> Result<(), ProvisionError> {
        self.revoke_previous_key(req).await.map(|_| ())
    }

    async fn revoke_previous_key(
        &self,
        req: &RotationRequest,
    ) -> Result<Revocation, ProvisionError> {
        self.maybe_hang().await;
        let gate = self.lock().revoke_gate.clone();
        if let Some(gate) = gate {
            gate.pass().await;
        }
        let mut s = self.lock();
        let key = req.previous_access_key_id.clone();
        s.calls.push(Call::RevokePrevious(key.clone()));
        Self::check_failing(&s)?;
        let mode = s.revoking;
        Ok(match mode {
            Revoking::Any if s.live_keys.remove(&key).is_some() => Revocation::Revoked,
            Revoking::Any => Revocation::AlreadyGone,
            Revoking::Nothing => {
                Revocation::Kept("the recording provisioner keeps every key".into())
            }
        })
    }
}

/// The provisioner name the library tests use.
pub const PROVISIONER: &str = "test.objectbucket.io/recorder";

/// A controller running in this process; stopped when dropped.
pub struct RunningController {
    stop: Option<oneshot::Sender<()>>,
    handle: Option<JoinHandle<Result<(), lib_provisioner::RunError>>>,
}

impl RunningController {
    /// Starts the library's controller with `provisioner`.
    pub fn start<P: Provisioner>(client: Client, provisioner: P) -> Self {
        Self::start_with(client, ControllerBuilder::new(PROVISIONER, provisioner))
    }

    /// Starts a configured builder.
    pub fn start_with<P: Provisioner>(client: Client, builder: ControllerBuilder<P>) -> Self {
        let (tx, rx) = oneshot::channel();
        let builder = builder.backoff(Duration::from_millis(200), Duration::from_secs(2));
        let handle = tokio::spawn(builder.run(client, async move {
            let _ = rx.await;
        }));
        Self {
            stop: Some(tx),
            handle: Some(handle),
        }
    }

    /// Stops it and waits for in-flight work to finish.
    pub async fn stop(mut self) -> Result<()> {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(h) = self.handle.take() {
            h.await.context("controller task panicked")??;
        }
        Ok(())
    }
}

impl Drop for RunningController {
    fn drop(&mut self) {
        if let Some(h) = &self.handle {
            h.abort();
        }
    }
}

pub use crate::setup::{events_for, install_crds, wait_event};

/// Creates a StorageClass for [`PROVISIONER`].
pub async fn create_class(
    client: &Client,
    name: &str,
    reclaim: &str,
    params: &[(&str, &str)],
) -> Result<()> {
    create_class_for(client, name, PROVISIONER, reclaim, params).await
}

/// Creates a StorageClass for any provisioner.
pub async fn create_class_for(
    client: &Client,
    name: &str,
    provisioner: &str,
    reclaim: &str,
    params: &[(&str, &str)],
) -> Result<()> {
    crate::setup::create_class(client, name, provisioner, reclaim, params.iter().copied()).await
}

/// Creates a claim.
pub async fn create_claim(
    client: &Client,
    ns: &str,
    name: &str,
    spec: ObjectBucketClaimSpec,
) -> Result<ObjectBucketClaim> {
    Api::<ObjectBucketClaim>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &ObjectBucketClaim::new(name, spec))
        .await
        .with_context(|| format!("creating claim {ns}/{name}"))
}

/// Waits until the claim reaches `phase`, and returns it.
pub async fn wait_phase(
    client: &Client,
    ns: &str,
    name: &str,
    phase: ClaimPhase,
    timeout: Duration,
) -> Result<ObjectBucketClaim> {
    let api = Api::<ObjectBucketClaim>::namespaced(client.clone(), ns);
    wait_for(
        timeout,
        format!("claim {ns}/{name} to be {}", phase.as_str()),
        || async {
            let claim = api.get_opt(name).await?;
            Ok(claim.filter(|c| c.status.as_ref().and_then(|s| s.phase) == Some(phase)))
        },
    )
    .await
}

/// Waits until a Get of `name` says NotFound.
pub async fn wait_gone<K>(api: &Api<K>, name: &str, timeout: Duration) -> Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    wait_for(timeout, format!("{name} to be gone"), || async {
        Ok(api.get_opt(name).await?.is_none().then_some(()))
    })
    .await
}

/// The claim's status message, for assertions.
pub fn message(claim: &ObjectBucketClaim) -> String {
    claim
        .status
        .as_ref()
        .and_then(|s| s.message.clone())
        .unwrap_or_else(|| format!("<no message on {}>", claim.name_any()))
}
