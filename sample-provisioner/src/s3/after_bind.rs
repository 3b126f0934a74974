//! What [`S3Provisioner`] does for a Bound claim: a changed
//! `additionalConfig` applied, its bucket settings checked, credentials
//! rotated.

use std::sync::Arc;

use lib_provisioner::provisioner::ConfigCheck;
use lib_provisioner::{BucketAccess, ProvisionError, Revocation, RotationRequest, UpdateRequest};
use tracing::{info, warn};

use super::{Resolved, S3Provisioner, bucket_settings, claim_options, credential_request};
use crate::access::{Access, ClaimOptions};
use crate::bucket_config::check_change;
use crate::credentials::{CREDENTIALS_MODE_KEY, CredentialIssuer};
use crate::params::{ClassName, ClassParams};

impl S3Provisioner {
    /// Issues the claim's other user (per-claim credentials); shared-admin
    /// classes cannot rotate (every claim holds the admin key).
    pub(super) async fn rotate_credentials(
        &self,
        req: &RotationRequest,
    ) -> Result<BucketAccess, ProvisionError> {
        let (r, issuer, creq_access) = self.rotation_parts(req).await?;
        let issued = issuer
            .rotate(
                &r.admin,
                &credential_request(&req.bucket, creq_access),
                &req.previous_access_key_id,
            )
            .await?;
        Ok(self.access_for(&r, issuer.as_ref(), issued))
    }

    pub(super) async fn revoke_previous_credentials(
        &self,
        req: &RotationRequest,
    ) -> Result<Revocation, ProvisionError> {
        let (r, issuer, access) = self.rotation_parts(req).await?;
        issuer
            .revoke_previous(
                &r.admin,
                &credential_request(&req.bucket, access),
                &req.previous_access_key_id,
            )
            .await
    }

    /// Applies a changed `maxSize` (set, raised, lowered or removed) and
    /// bucket settings (replaced whole, removed with their key); refuses an
    /// `accessMode` change, which would need the claim's credentials to be
    /// reissued, versioning back to unset, and any object lock change.
    /// Checked in full before anything changes.
    pub(super) async fn apply_update(&self, req: &UpdateRequest) -> Result<(), ProvisionError> {
        let b = &req.bucket;
        let r = self
            .resolve(ClassName::Bucket(&b.storage_class_name), &b.parameters)
            .await?;
        let brownfield = b
            .parameters
            .get(lib_provisioner::api::BROWNFIELD_BUCKET_PARAMETER)
            .is_some_and(|v| !v.is_empty());
        let new = claim_options(&r, b, brownfield)?;
        let old = ClaimOptions::parse(&req.previous_config, r.params.access, brownfield)
            .unwrap_or_default();
        if new.access != old.access {
            return Err(ProvisionError::permanent(format!(
                "additionalConfig accessMode cannot change after the bucket is provisioned (from {:?} to {:?}): the claim's credentials carry it; restore {:?}, or create a new claim with the access you need",
                old.access.as_str(),
                new.access.as_str(),
                old.access.as_str()
            )));
        }
        let settings = bucket_settings(&r.params, b)?;
        let was = r
            .params
            .settings
            .resolve(&req.previous_config, &b.bucket_name)
            .unwrap_or_default();
        check_change(&was, &settings).map_err(|why| {
            ProvisionError::permanent(format!(
                "claim {}/{}: additionalConfig {why}",
                b.claim.namespace, b.claim.name
            ))
        })?;
        if new.max_size != old.max_size {
            // 0 clears the quota.
            self.set_quota(&r, b, new.max_size.unwrap_or(0)).await?;
            info!(bucket = %b.bucket_name, max_size = ?new.max_size, "bucket quota is updated");
        }
        let changed = r
            .store
            .apply_settings(&b.bucket_name, &settings, Some(&was))
            .await?;
        if !changed.is_empty() {
            info!(bucket = %b.bucket_name, changed = %changed.join(", "), "bucket settings are updated");
        }
        Ok(())
    }

    /// Compares the bucket's settings with the applied config and puts back
    /// what differs. Settings the config does not manage are not looked at;
    /// nor is `maxSize` (the quota API's answer is the store's).
    pub(super) async fn check_settings(
        &self,
        req: &UpdateRequest,
    ) -> Result<ConfigCheck, ProvisionError> {
        let b = &req.bucket;
        let class = ClassName::Bucket(&b.storage_class_name);
        // Decided from the recorded parameters alone: a claim that manages
        // no setting costs no read (not even of the admin Secret), which
        // at 100,000 claims is most of the hourly checks.
        let settings = bucket_settings(&ClassParams::parse_for(class, &b.parameters)?, b)?;
        if settings.is_empty() {
            return Ok(ConfigCheck::NotChecked);
        }
        let r = self.resolve(class, &b.parameters).await?;
        let restored = r
            .store
            .apply_settings(&b.bucket_name, &settings, Some(&settings))
            .await?;
        if restored.is_empty() {
            return Ok(ConfigCheck::InPlace);
        }
        warn!(bucket = %b.bucket_name, restored = %restored.join(", "), "bucket settings changed on the store were put back");
        Ok(ConfigCheck::Restored(
            restored.into_iter().map(str::to_owned).collect(),
        ))
    }

    /// The class (as recorded at bind), the issuer of the claim's
    /// credentials, and the access they carry, for a rotation.
    async fn rotation_parts(
        &self,
        req: &RotationRequest,
    ) -> Result<(Resolved, Arc<dyn CredentialIssuer>, Access), ProvisionError> {
        let b = &req.bucket;
        let r = self
            .resolve(ClassName::Bucket(&b.storage_class_name), &b.parameters)
            .await?;
        let mode = req
            .additional_state
            .get(CREDENTIALS_MODE_KEY)
            .map(String::as_str)
            .unwrap_or(r.params.credentials_mode);
        let issuer = self.issuer(mode).cloned().ok_or_else(|| {
            ProvisionError::permanent(format!(
                "the claim's credentials were issued in mode {mode:?}, which this provisioner does not offer"
            ))
        })?;
        let access = match req.additional_state.get(crate::credentials::ACCESS_KEY) {
            Some(a) if a == Access::ReadOnly.as_str() => Access::ReadOnly,
            _ => Access::ReadWrite,
        };
        Ok((r, issuer, access))
    }
}
