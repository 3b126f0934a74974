//! Access by principal ([`Provisioner::grant_access`],
//! [`Provisioner::revoke_access`]): one store user per principal, named
//! after its UID, whose one policy gives each bucket exactly its mode
//! (see [`crate::credentials::per_principal`]).
//!
//! The account id is the request's account name (COSI: `ba-<BucketAccess
//! UID>`). The principal's UID is the BucketAccess's UID in both driver
//! modes (the gRPC path recovers it from the account id), so a user made
//! in one mode is revoked in the other; a revocation also removes the user
//! earlier versions' gRPC path keyed by the whole account id.
//!
//! [`Provisioner::grant_access`]: lib_provisioner::Provisioner::grant_access
//! [`Provisioner::revoke_access`]: lib_provisioner::Provisioner::revoke_access

use std::collections::BTreeSet;

use lib_provisioner::ProvisionError;
use lib_provisioner::provisioner::{AccessGrant, AccessMode, AccessRequest, AccessRevocation};
use tracing::info;

use super::buckets::store_endpoint;
use super::{Resolved, S3Provisioner};
use crate::access::{Access, PER_CLAIM_MODE};
use crate::credentials::per_principal::{self, PER_PRINCIPAL_MODE};
use crate::credentials::{CREDENTIALS_MODE_KEY, POLICY_KEY, USER_KEY};
use crate::params::ClassName;

impl S3Provisioner {
    /// Gives the principal its user, allowed the request's buckets only.
    pub(super) async fn grant_principal(
        &self,
        req: &AccessRequest,
    ) -> Result<AccessGrant, ProvisionError> {
        self.check_access_request(req)?;
        let r = self
            .resolve(ClassName::Access(&req.class_name), &req.parameters)
            .await
            .map_err(ProvisionError::with_nothing_created)?;
        check_modes(&r, req)?;
        crate::bucket_records::check(&r.params, req)?;
        for bucket in &req.buckets {
            self.require_bucket(&r, &bucket.bucket_name).await?;
        }
        let buckets: Vec<(&str, AccessMode)> = req
            .buckets
            .iter()
            .map(|b| (b.bucket_name.as_str(), b.mode))
            .collect();
        let made =
            per_principal::grant(&self.admin_clients, &r.admin, &req.principal.uid, &buckets)
                .await?;
        info!(principal = %req.principal, account = %req.account_name, buckets = buckets.len(), "granted access");
        let mut grant = AccessGrant::new(&req.account_name, made.credentials, store_endpoint(&r))
            .with_state(CREDENTIALS_MODE_KEY, PER_PRINCIPAL_MODE)
            .with_state(USER_KEY, made.user);
        grant
            .additional_state
            .insert(POLICY_KEY.to_owned(), made.policy);
        Ok(grant)
    }

    /// Removes the principal's user and policy (gone already: done).
    pub(super) async fn revoke_principal(
        &self,
        req: &AccessRevocation,
    ) -> Result<(), ProvisionError> {
        if req.principal.uid.is_empty() {
            return Err(ProvisionError::permanent(format!(
                "the revocation of account {:?} names no principal UID, from which its user's name derives",
                req.account_id
            )));
        }
        let r = self
            .resolve(ClassName::Access(&req.class_name), &req.parameters)
            .await?;
        per_principal::revoke(&self.admin_clients, &r.admin, &req.principal.uid).await?;
        Ok(())
    }

    /// What is wrong with a request before the store is asked anything.
    fn check_access_request(&self, req: &AccessRequest) -> Result<(), ProvisionError> {
        let refuse = |why: String| Err(ProvisionError::permanent(why).with_nothing_created());
        if req.principal.uid.is_empty() || req.account_name.is_empty() {
            return refuse(format!(
                "the access request for {} lacks the principal's UID or the account name, from which its user's name derives",
                req.principal
            ));
        }
        if req.buckets.is_empty() {
            return refuse(format!(
                "the access request for {} names no bucket: name at least one",
                req.principal
            ));
        }
        let mut seen = BTreeSet::new();
        for bucket in &req.buckets {
            if bucket.bucket_name == self.state_bucket {
                return refuse(format!(
                    "bucket {:?} is the provisioner's state bucket (--state-bucket, OBC_STATE_BUCKET) and is never handed out",
                    bucket.bucket_name
                ));
            }
            if !seen.insert(bucket.bucket_name.as_str()) {
                return refuse(format!(
                    "bucket {:?} is named twice in the access request for {}: name each bucket once, with one mode",
                    bucket.bucket_name, req.principal
                ));
            }
        }
        Ok(())
    }

    /// The bucket exists (access is never given to a bucket to come, and a
    /// grant never creates one).
    async fn require_bucket(&self, r: &Resolved, bucket: &str) -> Result<(), ProvisionError> {
        match r.store.exists(bucket).await {
            Ok(true) => Ok(()),
            Ok(false) => Err(ProvisionError::not_found(format!(
                "bucket {bucket:?} does not exist on {}: access is granted once it does",
                r.params.endpoint.url
            ))
            .with_nothing_created()),
            Err(f) => Err(f.into_provision_error().with_nothing_created()),
        }
    }
}

/// The class's modes: per-claim credentials (a user of its own), and an
/// `accessMode: read-only` class grants nothing but ReadOnly.
fn check_modes(r: &Resolved, req: &AccessRequest) -> Result<(), ProvisionError> {
    if r.params.credentials_mode != PER_CLAIM_MODE {
        return Err(ProvisionError::permanent(format!(
            "the class's credentialsMode is {:?}, which hands every principal the admin key and cannot limit it to its buckets and modes: use credentialsMode {PER_CLAIM_MODE} (the default) on a store with MinIO's admin API",
            r.params.credentials_mode
        ))
        .with_nothing_created());
    }
    let wider = req.buckets.iter().find(|b| b.mode != AccessMode::ReadOnly);
    if let (Access::ReadOnly, Some(b)) = (r.params.access, wider) {
        return Err(ProvisionError::unsupported_access_mode(
            b.mode,
            format!(
                "the class grants read-only access (accessMode: read-only), and bucket {:?} was asked {}: ask for ReadOnly, or use a class without accessMode: read-only",
                b.bucket_name, b.mode
            ),
        )
        .with_nothing_created());
    }
    Ok(())
}
