//! Who gets which credentials for a bucket.
//!
//! [`S3Provisioner`](crate::s3::S3Provisioner) asks a [`CredentialIssuer`]
//! for a claim's credentials once the bucket exists, and asks it to revoke
//! them at teardown. The class's `credentialsMode` picks the issuer:
//!
//! - [`PerClaimCredentials`] (`per-claim`, the default): each claim gets its
//!   own user, whose policy allows only its bucket, through the store's
//!   MinIO admin API (MinIO, RustFS).
//! - [`SharedAdminCredentials`] (`shared-admin`, only when the class says
//!   so): every claim gets the class's admin credentials, for stores with no
//!   user API (plain S3, s3s-fs).
//!
//! Access by principal (COSI's BucketAccess) has its own user per
//! principal, in classes of mode `per-claim`: [`per_principal`].
//!
//! Another store's user API (Ceph RGW's admin ops, AWS IAM) is one more
//! implementation: create a user and a policy limited to the bucket in
//! `issue`, record their names in the returned state, delete them in
//! `revoke`.

use std::collections::{BTreeMap, HashSet};
use std::sync::Mutex;

use async_trait::async_trait;
use lib_provisioner::{Credentials, ProvisionError, Revocation};
use tracing::warn;

use crate::access::Access;
pub use crate::access::{PER_CLAIM_MODE, SHARED_ADMIN_MODE};
use crate::params::StoreEndpoint;

pub mod made_names;
mod per_claim;
pub mod per_principal;

pub use per_claim::{
    ACCESS_KEY, POINTS, POLICY_KEY, PerClaimCredentials, USER_KEY, policy_document, policy_name,
    rotated_user_name, user_name,
};

/// `additional_state` key naming how a claim's credentials were issued.
pub const CREDENTIALS_MODE_KEY: &str = "credentialsMode";

/// The store a credential is issued on, with the admin credentials that
/// manage it.
#[derive(Clone, Debug)]
pub struct StoreAdmin {
    /// The store's endpoint.
    pub endpoint: StoreEndpoint,
    /// The store's region.
    pub region: String,
    /// The StorageClass's admin credentials (their `Debug` redacts the secret).
    pub credentials: Credentials,
}

/// One claim's access to one bucket.
#[derive(Clone, Copy, Debug)]
pub struct CredentialRequest<'a> {
    /// The bucket.
    pub bucket: &'a str,
    /// The claim's UID (stable across retries: derive user names from it).
    pub claim_uid: &'a str,
    /// The claim's namespace.
    pub claim_namespace: &'a str,
    /// The claim's name.
    pub claim_name: &'a str,
    /// The StorageClass name.
    pub storage_class: &'a str,
    /// What the credentials may do.
    pub access: Access,
}

/// Credentials handed to a claim, and what revoking them will need.
#[derive(Clone, Debug)]
pub struct IssuedCredentials {
    /// Written only into the claim's Secret.
    pub credentials: Credentials,
    /// Stored in the ObjectBucket (readable cluster-wide: no secrets) and
    /// handed back to [`CredentialIssuer::revoke`]. Must hold
    /// [`CREDENTIALS_MODE_KEY`].
    pub state: BTreeMap<String, String>,
}

/// Issues and revokes a claim's credentials for a bucket.
///
/// Both methods follow the library's idempotency contract: `issue` for a
/// claim that already has credentials returns them again (or rotates
/// them); `revoke` of credentials that are gone succeeds.
#[async_trait]
pub trait CredentialIssuer: Send + Sync + 'static {
    /// The [`CREDENTIALS_MODE_KEY`] value this issuer records.
    fn mode(&self) -> &'static str;

    /// Whether `revoke` needs the store (endpoint and admin credentials).
    /// When it does not, a claim can be torn down even after its
    /// StorageClass or admin Secret is gone.
    fn revoke_needs_store(&self) -> bool {
        true
    }

    /// Credentials for `req.claim_uid` on `req.bucket`, which exists.
    async fn issue(
        &self,
        store: &StoreAdmin,
        req: &CredentialRequest<'_>,
    ) -> Result<IssuedCredentials, ProvisionError>;

    /// Removes what `issue` created. `store` is `None` only when
    /// [`revoke_needs_store`](Self::revoke_needs_store) is false; `state` is
    /// what `issue` returned.
    async fn revoke(
        &self,
        store: Option<&StoreAdmin>,
        req: &CredentialRequest<'_>,
        state: &BTreeMap<String, String>,
    ) -> Result<(), ProvisionError>;

    /// New credentials for the claim while `previous` (an access key id)
    /// keeps working; repeated after a crash before the claim's Secret held
    /// them. The default cannot rotate.
    async fn rotate(
        &self,
        store: &StoreAdmin,
        req: &CredentialRequest<'_>,
        previous: &str,
    ) -> Result<IssuedCredentials, ProvisionError> {
        let _ = (store, req, previous);
        Err(ProvisionError::unsupported(format!(
            "credentialsMode {} cannot rotate a claim's credentials",
            self.mode()
        )))
    }

    /// Revokes `previous`, which the claim's Secret no longer holds, and
    /// says what became of it. The default keeps it: a mode that cannot
    /// rotate has no previous key of its own to remove.
    async fn revoke_previous(
        &self,
        store: &StoreAdmin,
        req: &CredentialRequest<'_>,
        previous: &str,
    ) -> Result<Revocation, ProvisionError> {
        let _ = (store, req, previous);
        Ok(Revocation::Kept(format!(
            "credentialsMode {} issues no per-claim keys, so it removes none",
            self.mode()
        )))
    }
}

/// Hands every claim the StorageClass's admin credentials.
///
/// For stores without a user API. Every claim of the class can then reach
/// every bucket of the store: use it for tests and single-tenant stores only.
/// Logs a warning saying so, once per StorageClass.
#[derive(Debug, Default)]
pub struct SharedAdminCredentials {
    warned: Mutex<HashSet<String>>,
}

impl SharedAdminCredentials {
    /// Whether this is the first issue for `class` (then it warns).
    fn first_for(&self, class: &str) -> bool {
        self.warned
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(class.to_owned())
    }
}

#[async_trait]
impl CredentialIssuer for SharedAdminCredentials {
    fn mode(&self) -> &'static str {
        SHARED_ADMIN_MODE
    }

    async fn rotate(
        &self,
        _store: &StoreAdmin,
        req: &CredentialRequest<'_>,
        _previous: &str,
    ) -> Result<IssuedCredentials, ProvisionError> {
        Err(ProvisionError::unsupported(format!(
            "StorageClass {:?} uses credentialsMode shared-admin: every claim holds the class's admin key, which only the store's administrator can rotate (then update the admin Secret and delete the claims' Secrets to hand the new key out); use credentialsMode per-claim for claims with credentials of their own",
            req.storage_class
        )))
    }

    fn revoke_needs_store(&self) -> bool {
        false
    }

    async fn issue(
        &self,
        store: &StoreAdmin,
        req: &CredentialRequest<'_>,
    ) -> Result<IssuedCredentials, ProvisionError> {
        if self.first_for(req.storage_class) {
            warn!(
                storage_class = req.storage_class,
                endpoint = %store.endpoint.url,
                "per-bucket credentials are unavailable on this store: claims of this class get the class's admin credentials ({CREDENTIALS_MODE_KEY}={SHARED_ADMIN_MODE}) and can reach every bucket"
            );
        }
        Ok(IssuedCredentials {
            credentials: store.credentials.clone(),
            state: BTreeMap::from([(
                CREDENTIALS_MODE_KEY.to_owned(),
                SHARED_ADMIN_MODE.to_owned(),
            )]),
        })
    }

    async fn revoke(
        &self,
        _store: Option<&StoreAdmin>,
        _req: &CredentialRequest<'_>,
        _state: &BTreeMap<String, String>,
    ) -> Result<(), ProvisionError> {
        // Nothing was created for the claim: the admin credentials stay, and
        // the library deletes the claim's Secret.
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::parse_endpoint;

    #[tokio::test]
    async fn shared_admin_hands_out_the_admin_credentials_and_records_the_mode() {
        let issuer = SharedAdminCredentials::default();
        let store = StoreAdmin {
            endpoint: parse_endpoint("http://127.0.0.1:9000").expect("valid"),
            region: "us-east-1".into(),
            credentials: Credentials::new("AKID", "secret"),
        };
        let req = CredentialRequest {
            bucket: "b",
            claim_uid: "uid",
            claim_namespace: "ns",
            claim_name: "c",
            storage_class: "s3",
            access: Access::ReadWrite,
        };
        let issued = issuer.issue(&store, &req).await.expect("issues");
        assert_eq!(issued.credentials, store.credentials);
        assert_eq!(
            issued.state.get(CREDENTIALS_MODE_KEY).map(String::as_str),
            Some(SHARED_ADMIN_MODE)
        );
        assert!(!issuer.first_for("s3"), "warned once for the class");
        assert!(issuer.first_for("other"));
        // Revoking needs nothing and is repeatable.
        assert!(!issuer.revoke_needs_store());
        issuer
            .revoke(None, &req, &issued.state)
            .await
            .expect("revokes");
        issuer
            .revoke(None, &req, &issued.state)
            .await
            .expect("again");
    }
}
