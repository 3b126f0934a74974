//! [`S3Provisioner`]: a [`Provisioner`] for S3-compatible stores.
//!
//! Each call reads its StorageClass's parameters ([`ClassParams`]) and the
//! admin Secret they name, then works on the store through [`Store`] and
//! issues credentials through a [`CredentialIssuer`].

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Secret;
use kube::{Api, Client};
use lib_provisioner::api::secret_keys::{ACCESS_KEY_ID, SECRET_ACCESS_KEY};
use lib_provisioner::provisioner::{
    AccessGrant, AccessRequest, AccessRevocation, BucketInfo, ConfigCheck, InventoryRequest, Made,
    OrphanRemoval, ReclaimPolicy,
};
use lib_provisioner::{
    BucketAccess, BucketRequest, Credentials, ProvisionError, Provisioner, Revocation,
    RotationRequest, TeardownRequest, UpdateRequest,
};
use tracing::{debug, info};

use crate::access::{Access, ClaimOptions};
use crate::admin::{AdminClients, BucketQuota};
use crate::bucket_config::{BucketConfig, SETTINGS};
use crate::credentials::{
    CREDENTIALS_MODE_KEY, CredentialIssuer, CredentialRequest, PerClaimCredentials,
    SharedAdminCredentials, StoreAdmin,
};
use crate::intents::KubeIntents;
use crate::ownership::{ClaimKind, Owner, SweepRecord};
use crate::params::{CLAIM_KEYS, ClassName, ClassParams, Ownership, SecretRef};
use crate::store::{
    Creation, DEFAULT_STATE_BUCKET, Deletion, Store, is_not_empty, not_empty_cosi, reserved,
};

/// Where intent ConfigMaps go unless configured: the namespace `deploy/`
/// installs the provisioner in.
pub const DEFAULT_INTENT_NAMESPACE: &str = "obc-system";

/// Crash points around a new bucket's settings, walked by the reliability
/// suite (`OBC_FAILPOINTS`) with the credentials' points: the bucket made
/// (owner tag, quota) and its settings not yet put; the settings put and
/// the claim's user not yet made.
pub const BUCKET_POINTS: &[&str] = &["before-bucket-settings", "after-bucket-settings"];

/// Clients kept for reuse; past this many (rotated credentials, many
/// classes) the cache starts over.
const MAX_CACHED_CLIENTS: usize = 64;

/// A [`Provisioner`] creating buckets on an S3-compatible store.
pub struct S3Provisioner {
    kube: Client,
    /// By [`CredentialIssuer::mode`], the `credentialsMode` values accepted.
    issuers: BTreeMap<&'static str, Arc<dyn CredentialIssuer>>,
    clients: Mutex<HashMap<ClientKey, Store>>,
    admin_clients: Arc<AdminClients>,
    /// Name of the bucket, on each store, holding creation intents
    /// (`ownership: marker`).
    state_bucket: String,
    /// Namespace of the intent ConfigMaps (`ownership: tags`).
    intent_namespace: String,
}

/// What an S3 client is built from. Holds a secret: no `Debug`.
#[derive(Clone, PartialEq, Eq, Hash)]
struct ClientKey {
    ownership: Ownership,
    url: String,
    region: String,
    access_key_id: String,
    secret_access_key: String,
}

/// A StorageClass resolved: parameters, admin credentials and a client.
struct Resolved {
    params: ClassParams,
    admin: StoreAdmin,
    store: Store,
}

impl S3Provisioner {
    /// A provisioner with both built-in credentials modes
    /// ([`PerClaimCredentials`], [`SharedAdminCredentials`]); `kube` reads
    /// the admin Secrets.
    pub fn new(kube: Client) -> Self {
        let admin_clients = Arc::new(AdminClients::default());
        let per_claim = PerClaimCredentials::with_clients(admin_clients.clone());
        Self {
            kube,
            issuers: BTreeMap::new(),
            clients: Mutex::new(HashMap::new()),
            admin_clients,
            state_bucket: DEFAULT_STATE_BUCKET.to_owned(),
            intent_namespace: DEFAULT_INTENT_NAMESPACE.to_owned(),
        }
        .with_issuer(Arc::new(per_claim))
        .with_issuer(Arc::new(SharedAdminCredentials::default()))
    }

    /// Issues credentials with `issuer` for classes whose `credentialsMode`
    /// is its [`mode`](CredentialIssuer::mode), replacing a built-in one of
    /// that mode.
    pub fn with_issuer(mut self, issuer: Arc<dyn CredentialIssuer>) -> Self {
        self.issuers.insert(issuer.mode(), issuer);
        self
    }

    fn issuer(&self, mode: &str) -> Option<&Arc<dyn CredentialIssuer>> {
        self.issuers.get(mode)
    }

    /// Keeps the provisioner's creation intents in bucket `name` on each
    /// store (default [`DEFAULT_STATE_BUCKET`]; see `crate::store`). No
    /// claim is ever given a bucket of that name.
    pub fn with_state_bucket(mut self, name: impl Into<String>) -> Self {
        self.state_bucket = name.into();
        self
    }

    /// The state bucket's name.
    pub fn state_bucket(&self) -> &str {
        &self.state_bucket
    }

    /// Keeps creation intents of classes with `ownership: tags` as
    /// ConfigMaps in `namespace` (default [`DEFAULT_INTENT_NAMESPACE`]: the
    /// provisioner's own, where its RBAC lets it write).
    pub fn with_intent_namespace(mut self, namespace: impl Into<String>) -> Self {
        self.intent_namespace = namespace.into();
        self
    }

    /// The class's parameters checked, its admin credentials, its store;
    /// `class` names the class in messages.
    async fn resolve(
        &self,
        class: ClassName<'_>,
        parameters: &BTreeMap<String, String>,
    ) -> Result<Resolved, ProvisionError> {
        let params = ClassParams::parse_for(class, parameters)?;
        let credentials = self.admin_credentials(&params.admin_secret, class).await?;
        let store = self.store(&params, &credentials);
        Ok(Resolved {
            admin: StoreAdmin {
                endpoint: params.endpoint.clone(),
                region: params.region.clone(),
                credentials,
            },
            params,
            store,
        })
    }

    async fn admin_credentials(
        &self,
        secret: &SecretRef,
        class: ClassName<'_>,
    ) -> Result<Credentials, ProvisionError> {
        let api: Api<Secret> = Api::namespaced(self.kube.clone(), &secret.namespace);
        match api.get_opt(&secret.name).await {
            Ok(Some(found)) => credentials_from_secret(secret, &found),
            Ok(None) => Err(ProvisionError::permanent(format!(
                "admin Secret {secret} not found: create it with keys {ACCESS_KEY_ID} and {SECRET_ACCESS_KEY}, or fix adminSecretName/adminSecretNamespace on {class}"
            ))),
            Err(kube::Error::Api(status)) if status.code == 403 => {
                Err(ProvisionError::permanent(format!(
                    "the provisioner may not read the admin Secret {secret}: grant its ServiceAccount get on secrets in namespace {} (see deploy/rbac.yaml)",
                    secret.namespace
                )))
            }
            Err(e) => Err(ProvisionError::retryable(format!(
                "could not read the admin Secret {secret}: {e}"
            ))),
        }
    }

    fn store(&self, params: &ClassParams, credentials: &Credentials) -> Store {
        let key = ClientKey {
            ownership: params.ownership,
            url: params.endpoint.url.clone(),
            region: params.region.clone(),
            access_key_id: credentials.access_key_id.clone(),
            secret_access_key: credentials.secret_access_key.clone(),
        };
        // A poisoned lock only means another thread panicked mid-insert:
        // the map is still usable.
        let mut clients = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(store) = clients.get(&key) {
            return store.clone();
        }
        if clients.len() >= MAX_CACHED_CLIENTS {
            clients.clear();
        }
        let mut store = Store::new(&params.endpoint, &params.region, credentials)
            .with_state_bucket(&self.state_bucket);
        if params.ownership == Ownership::Tags {
            store = store.with_tag_ownership(KubeIntents::new(
                self.kube.clone(),
                &self.intent_namespace,
                &params.endpoint.url,
            ));
        }
        clients.insert(key, store.clone());
        store
    }

    async fn issue(
        &self,
        r: &Resolved,
        req: &BucketRequest,
        access: Access,
    ) -> Result<BucketAccess, ProvisionError> {
        let mode = r.params.credentials_mode;
        let issuer = self.issuer(mode).ok_or_else(|| {
            ProvisionError::permanent(format!(
                "StorageClass {:?} asks for credentialsMode {mode:?}, which this provisioner does not offer",
                req.storage_class_name
            ))
        })?;
        let issued = issuer
            .issue(&r.admin, &credential_request(req, access))
            .await?;
        Ok(self.access_for(r, issuer.as_ref(), issued))
    }

    /// What the claim's Secret, ConfigMap and ObjectBucket get from issued
    /// credentials.
    fn access_for(
        &self,
        r: &Resolved,
        issuer: &dyn CredentialIssuer,
        issued: crate::credentials::IssuedCredentials,
    ) -> BucketAccess {
        let mut access = BucketAccess::new(
            r.params.endpoint.host.clone(),
            i32::from(r.params.endpoint.port),
            issued.credentials,
        )
        .with_region(r.params.region.clone());
        access.additional_state = issued.state;
        access
            .additional_state
            .entry(CREDENTIALS_MODE_KEY.to_owned())
            .or_insert_with(|| issuer.mode().to_owned());
        access
    }

    /// Sets the hard quota of a bucket created for a claim.
    async fn set_quota(
        &self,
        r: &Resolved,
        req: &BucketRequest,
        bytes: u64,
    ) -> Result<(), ProvisionError> {
        let admin = self
            .admin_clients
            .get(&r.admin.endpoint.url, &r.admin.region, &r.admin.credentials)
            .map_err(|e| ProvisionError::permanent(e.to_string()))?;
        match admin
            .set_bucket_quota(&req.bucket_name, &BucketQuota::hard(bytes))
            .await
        {
            Ok(()) => {
                debug!(bucket = %req.bucket_name, bytes, "bucket quota is set");
                Ok(())
            }
            Err(e) if e.is_retryable() => Err(ProvisionError::retryable(e.to_string())),
            Err(e) => Err(ProvisionError::permanent(format!(
                "{e}. additionalConfig maxSize needs the MinIO admin API's bucket quotas, which the store at {} refused: remove maxSize from the claim, or use a MinIO-compatible store (with admin credentials in StorageClass {:?})",
                r.admin.endpoint.url, req.storage_class_name
            ))),
        }
    }

    /// The mode to revoke in when the ObjectBucket records none: the
    /// process may have died after `issue` created a user and before the
    /// library recorded it (a reserved ObjectBucket), so a class in a mode
    /// that creates users is revoked in that mode (removing a user that was
    /// never made is a no-op). A takeover from another provisioner has no
    /// user of ours either way.
    fn unrecorded_mode(&self, req: &TeardownRequest) -> Option<&'static str> {
        let params = ClassParams::parse(&req.storage_class_name, &req.parameters).ok()?;
        let issuer = self.issuer(params.credentials_mode)?;
        issuer.revoke_needs_store().then(|| issuer.mode())
    }

    /// Revokes the claim's credentials, as recorded at provisioning.
    async fn revoke_credentials(
        &self,
        req: &TeardownRequest,
        store: Option<&StoreAdmin>,
    ) -> Result<(), ProvisionError> {
        let recorded = req.additional_state.get(CREDENTIALS_MODE_KEY);
        let Some(mode) = recorded.map(String::as_str).or(self.unrecorded_mode(req)) else {
            // Provisioned by another implementation (a takeover), or by a
            // class whose mode creates nothing: no credentials of ours.
            debug!(bucket = %req.bucket_name, "no credentialsMode recorded; nothing to revoke");
            return Ok(());
        };
        let Some(issuer) = self.issuer(mode) else {
            return Err(ProvisionError::permanent(format!(
                "the credentials of bucket {:?} were issued in mode {mode:?}, which this provisioner (modes {}) cannot revoke: run a provisioner that supports {mode:?}, or delete them by hand and remove the {CREDENTIALS_MODE_KEY} entry from the ObjectBucket's additionalState",
                req.bucket_name,
                self.issuers.keys().copied().collect::<Vec<_>>().join(", ")
            )));
        };
        let access = match req.additional_state.get(crate::credentials::ACCESS_KEY) {
            Some(a) if a == Access::ReadOnly.as_str() => Access::ReadOnly,
            _ => Access::ReadWrite,
        };
        let creq = CredentialRequest {
            bucket: &req.bucket_name,
            claim_uid: &req.claim.uid,
            claim_namespace: &req.claim.namespace,
            claim_name: &req.claim.name,
            storage_class: &req.storage_class_name,
            access,
        };
        let resolved;
        let store = match store {
            Some(store) => Some(store),
            None if issuer.revoke_needs_store() => {
                resolved = self
                    .resolve(ClassName::Bucket(&req.storage_class_name), &req.parameters)
                    .await?;
                Some(&resolved.admin)
            }
            None => None,
        };
        issuer.revoke(store, &creq, &req.additional_state).await
    }
}

impl S3Provisioner {
    /// Creates `req.bucket_name` for `req.claim` (or finds it made for the
    /// claim already) and sets its quota: all of provisioning but the
    /// credentials.
    async fn make_bucket(
        &self,
        req: &BucketRequest,
    ) -> Result<(Resolved, ClaimOptions), ProvisionError> {
        if req.bucket_name == self.state_bucket {
            return Err(reserved(&req.bucket_name).with_nothing_created());
        }
        let r = self
            .resolve(ClassName::Bucket(&req.storage_class_name), &req.parameters)
            .await
            .map_err(ProvisionError::with_nothing_created)?;
        // Checked before anything is created: a bad option leaves nothing.
        let options =
            claim_options(&r, req, false).map_err(ProvisionError::with_nothing_created)?;
        let settings =
            bucket_settings(&r.params, req).map_err(ProvisionError::with_nothing_created)?;
        let claim = format!("{}/{}", req.claim.namespace, req.claim.name);
        let owner = Owner {
            claim_uid: &req.claim.uid,
            claim: &claim,
            sweep: sweep_record(req),
        };
        // From here on a failure may follow CreateBucket: only the store's
        // refusals before it say that nothing was created.
        let locked = settings.object_lock.is_some();
        let how = match r
            .store
            .create_owned(&req.bucket_name, &owner, locked)
            .await?
        {
            Creation::Created => "created",
            Creation::Existing => "existed already",
            Creation::TakenOver(_) => "taken over after an interrupted creation",
        };
        info!(bucket = %req.bucket_name, %claim, endpoint = %r.params.endpoint.url, how, "bucket is provisioned");
        // Set on every attempt: one that died after CreateBucket left none.
        if let Some(bytes) = options.max_size {
            self.set_quota(&r, req, bytes).await?;
        }
        // Put on every attempt, after the bucket and before the user: an
        // attempt that died in between is completed by the next.
        lib_provisioner::failpoint::hit_provisioner(BUCKET_POINTS[0]);
        let changed = r
            .store
            .apply_settings(&req.bucket_name, &settings, None)
            .await?;
        lib_provisioner::failpoint::hit_provisioner(BUCKET_POINTS[1]);
        if !changed.is_empty() {
            info!(bucket = %req.bucket_name, changed = %changed.join(", "), "bucket settings are applied");
        }
        Ok((r, options))
    }
}

/// What the bucket records for the store sweep: the claim's API and the
/// reclaim policy. Nothing for the COSI gRPC path, whose requests name no
/// namespace and carry no deletion policy (upstream's sidecar sends
/// neither): such a bucket is only ever reported.
fn sweep_record(req: &BucketRequest) -> Option<SweepRecord> {
    if req.claim.namespace.is_empty() {
        return None;
    }
    let kind = if ClassName::Bucket(&req.storage_class_name).is_cosi() {
        ClaimKind::BucketClaim
    } else {
        ClaimKind::ObjectBucketClaim
    };
    Some(SweepRecord {
        kind,
        reclaim: req.reclaim_policy,
    })
}

fn credential_request(req: &BucketRequest, access: Access) -> CredentialRequest<'_> {
    CredentialRequest {
        bucket: &req.bucket_name,
        claim_uid: &req.claim.uid,
        claim_namespace: &req.claim.namespace,
        claim_name: &req.claim.name,
        storage_class: &req.storage_class_name,
        access,
    }
}

/// The claim's `additionalConfig` options, checked against its class (the
/// allow-list first: a key the class does not allow is refused as such).
fn claim_options(
    r: &Resolved,
    req: &BucketRequest,
    brownfield: bool,
) -> Result<ClaimOptions, ProvisionError> {
    r.params
        .allowed
        .check(&req.additional_config, &CLAIM_KEYS)?;
    let setting = SETTINGS
        .iter()
        .find(|k| req.additional_config.contains_key(**k));
    if let (true, Some(key)) = (brownfield, setting) {
        return Err(ProvisionError::permanent(format!(
            "claim {}/{}: additionalConfig {key} applies to buckets created for a claim, but this StorageClass hands out its existing bucket (bucketName), which other claims share: remove {key}, or configure the bucket itself",
            req.claim.namespace, req.claim.name
        )));
    }
    ClaimOptions::parse(&req.additional_config, r.params.access, brownfield).map_err(|why| {
        ProvisionError::permanent(format!(
            "claim {}/{}: {why}",
            req.claim.namespace, req.claim.name
        ))
    })
}

/// The bucket settings for `req`: its config over its class's defaults.
fn bucket_settings(
    params: &ClassParams,
    req: &BucketRequest,
) -> Result<BucketConfig, ProvisionError> {
    params
        .settings
        .resolve(&req.additional_config, &req.bucket_name)
        .map_err(|why| {
            let who = if req.claim.namespace.is_empty() {
                "the BucketClass's parameters".to_owned()
            } else {
                format!("claim {}/{}", req.claim.namespace, req.claim.name)
            };
            ProvisionError::permanent(format!("{who}: {why}"))
        })
}

/// Reads the admin key pair from a Secret. Values are trimmed (a Secret made
/// from files often ends in a newline) and never echoed.
pub fn credentials_from_secret(
    name: &SecretRef,
    secret: &Secret,
) -> Result<Credentials, ProvisionError> {
    let value = |key: &str| -> Option<String> {
        let from_data = secret
            .data
            .as_ref()
            .and_then(|d| d.get(key))
            .map(|b| String::from_utf8(b.0.clone()));
        let from_string_data = secret
            .string_data
            .as_ref()
            .and_then(|d| d.get(key))
            .cloned()
            .map(Ok);
        match from_data.or(from_string_data) {
            Some(Ok(v)) => Some(v.trim().to_owned()).filter(|v| !v.is_empty()),
            _ => None,
        }
    };
    let (id, secret_key) = (value(ACCESS_KEY_ID), value(SECRET_ACCESS_KEY));
    let missing: Vec<&str> = [
        (ACCESS_KEY_ID, id.is_none()),
        (SECRET_ACCESS_KEY, secret_key.is_none()),
    ]
    .into_iter()
    .filter_map(|(k, absent)| absent.then_some(k))
    .collect();
    match (id, secret_key) {
        (Some(id), Some(secret_key)) => Ok(Credentials::new(id, secret_key)),
        _ => Err(ProvisionError::permanent(format!(
            "admin Secret {name} lacks {} (or holds an empty or non-UTF-8 value): it must hold {ACCESS_KEY_ID} and {SECRET_ACCESS_KEY}",
            missing.join(" and ")
        ))),
    }
}

#[async_trait]
impl Provisioner for S3Provisioner {
    async fn provision(&self, req: &BucketRequest) -> Result<BucketAccess, ProvisionError> {
        if req.reissue {
            return self.reissue(req, false).await;
        }
        let (r, options) = self.make_bucket(req).await?;
        self.issue(&r, req, options.access).await
    }

    async fn grant(&self, req: &BucketRequest) -> Result<BucketAccess, ProvisionError> {
        if req.reissue {
            return self.reissue(req, true).await;
        }
        if req.bucket_name == self.state_bucket {
            return Err(ProvisionError::permanent(format!(
                "bucket {:?} is the provisioner's state bucket (--state-bucket, OBC_STATE_BUCKET) and is never handed to a claim: fix the bucketName parameter of StorageClass {:?}",
                req.bucket_name, req.storage_class_name
            )).with_nothing_created());
        }
        let r = self
            .resolve(ClassName::Bucket(&req.storage_class_name), &req.parameters)
            .await
            .map_err(ProvisionError::with_nothing_created)?;
        let options = claim_options(&r, req, true).map_err(ProvisionError::with_nothing_created)?;
        match r.store.exists(&req.bucket_name).await {
            Ok(true) => {}
            Ok(false) => {
                return Err(ProvisionError::permanent(format!(
                    "bucket {} does not exist: create it on {}, or fix the bucketName parameter of StorageClass {:?}",
                    req.bucket_name, r.params.endpoint.url, req.storage_class_name
                ))
                .with_nothing_created());
            }
            Err(f) => return Err(f.into_provision_error().with_nothing_created()),
        }
        self.issue(&r, req, options.access).await
    }

    async fn delete(&self, req: &TeardownRequest) -> Result<(), ProvisionError> {
        let class = ClassName::Bucket(&req.storage_class_name);
        let r = self.resolve(class, &req.parameters).await?;
        let claim = format!("{}/{}", req.claim.namespace, req.claim.name);
        match r
            .store
            .delete_owned(
                &req.bucket_name,
                &req.claim.uid,
                r.params.force_delete,
                // Bound ObjectBuckets record the bucket as the claim's: what
                // the Go library leaves (it writes no marker), so a takeover
                // of its claims deletes their buckets under Delete too.
                req.provisioned,
            )
            .await
            .map_err(|e| worded_for(class, &req.bucket_name, e))?
        {
            Deletion::Deleted { objects } => {
                info!(bucket = %req.bucket_name, %claim, objects, "bucket is deleted");
            }
            Deletion::AlreadyGone => {
                debug!(bucket = %req.bucket_name, %claim, "bucket is already gone")
            }
            Deletion::NotOurs(why) => {
                info!(bucket = %req.bucket_name, %claim, "keeping the bucket: {why}");
            }
        }
        // Credentials last: until the bucket is gone, the claim's owner may
        // still need them (to empty it, say).
        self.revoke_credentials(req, Some(&r.admin)).await
    }

    /// Revokes the claim's credentials; a bucket of the claim's kept under
    /// `Retain` is recorded as kept in its tags first. A COSI bucket has no
    /// credentials of its own (each BucketAccess is revoked with it).
    async fn revoke(&self, req: &TeardownRequest) -> Result<(), ProvisionError> {
        if req.reclaim_policy == ReclaimPolicy::Retain && req.provisioned {
            self.record_kept(req).await?;
        }
        if ClassName::Bucket(&req.storage_class_name).is_cosi() {
            return Ok(());
        }
        self.revoke_credentials(req, None).await
    }

    /// Issues the claim's other user (per-claim credentials); shared-admin
    /// classes cannot rotate (every claim holds the admin key).
    async fn rotate(&self, req: &RotationRequest) -> Result<BucketAccess, ProvisionError> {
        self.rotate_credentials(req).await
    }

    async fn revoke_previous(&self, req: &RotationRequest) -> Result<(), ProvisionError> {
        self.revoke_previous_credentials(req).await.map(drop)
    }

    /// Removes the claim's previous user and says whether it was there; a
    /// key that is not one of the claim's users is kept, and the claim's
    /// condition says so.
    async fn revoke_previous_key(
        &self,
        req: &RotationRequest,
    ) -> Result<Revocation, ProvisionError> {
        self.revoke_previous_credentials(req).await
    }

    /// Applies a changed `maxSize` and bucket settings; refuses a changed
    /// `accessMode`, versioning back to unset, and object lock.
    async fn update(&self, req: &UpdateRequest) -> Result<(), ProvisionError> {
        self.apply_update(req).await
    }

    /// Puts back bucket settings changed on the store behind the claim.
    async fn check_config(&self, req: &UpdateRequest) -> Result<ConfigCheck, ProvisionError> {
        self.check_settings(req).await
    }

    /// Provisioning without a user: the bucket and its ownership record.
    async fn create_bucket(&self, req: &BucketRequest) -> Result<BucketInfo, ProvisionError> {
        self.create_bare_bucket(req).await
    }

    /// HEADs an administrator's bucket; never creates it.
    async fn existing_bucket(&self, req: &BucketRequest) -> Result<BucketInfo, ProvisionError> {
        self.find_existing_bucket(req).await
    }

    /// One user per principal, each bucket in exactly its mode.
    async fn grant_access(&self, req: &AccessRequest) -> Result<AccessGrant, ProvisionError> {
        self.grant_principal(req).await
    }

    /// Removes the principal's user and policy.
    async fn revoke_access(&self, req: &AccessRevocation) -> Result<(), ProvisionError> {
        self.revoke_principal(req).await
    }

    /// The class's family's users and policies (by name), and buckets
    /// carrying the owner tag.
    async fn inventory(&self, req: &InventoryRequest) -> Result<Vec<Made>, ProvisionError> {
        self.list_made(req).await
    }

    /// An orphaned user and its policy, or a policy; a bucket only when
    /// its tags record reclaim policy `Delete`.
    async fn remove_orphan(&self, req: &OrphanRemoval) -> Result<(), ProvisionError> {
        self.remove_made(req).await
    }
}

/// A deletion's error in the terms of the API the request came from: the
/// store words a bucket that is not empty for an ObjectBucketClaim.
fn worded_for(class: ClassName<'_>, bucket: &str, err: ProvisionError) -> ProvisionError {
    if class.is_cosi() && is_not_empty(&err) {
        not_empty_cosi(bucket)
    } else {
        err
    }
}

mod after_bind;
mod buckets;
mod inventory;
mod kept;
mod principal;
mod reissue;

#[cfg(test)]
#[path = "s3_tests.rs"]
mod tests;
