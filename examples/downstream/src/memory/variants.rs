//! Variants of the in-memory provisioner for the conformance kit's own
//! proof: one correct (implements only `revoke_previous_key`), and flaws an
//! author could ship, each of which the kit must fail.

use async_trait::async_trait;
use lib_provisioner::provisioner::{
    BucketAccess, BucketRequest, Credentials, ProvisionError, Provisioner, Revocation,
    RotationRequest, TeardownRequest, UpdateRequest,
};

use super::{Key, Memory, keys_of};

/// What a variant changes; everything else is [`Memory`]'s.
#[derive(Clone, Copy, Debug)]
pub enum Variant {
    /// Correct: `revoke_previous_key` only (the trait's advice).
    RevokePreviousKeyOnly,
    /// A repeated provision mints a new key; the first stays.
    MintsKeyOnRepeat,
    /// Revoke answers Ok and removes nothing.
    RevokeKeepsKey,
    /// Update answers Ok and applies nothing.
    UpdateDoesNothing,
    /// Read-only claims get a key that writes.
    ReadOnlyWrites,
}

/// [`Memory`] with one [`Variant`].
pub struct Varied(pub Memory, pub Variant);

#[async_trait]
impl Provisioner for Varied {
    async fn provision(&self, req: &BucketRequest) -> Result<BucketAccess, ProvisionError> {
        let key = &keys_of(&req.claim.uid)[0];
        let repeat = self.0.step().await?.keys.contains_key(key);
        let access = self.0.provision(req).await?;
        let mut state = self.0.step().await?;
        match self.1 {
            Variant::MintsKeyOnRepeat if repeat => {
                let minted = format!("{key}-{}", state.keys.len());
                let secret = "minted".to_owned();
                let k = Key {
                    secret: secret.clone(),
                    bucket: req.bucket_name.clone(),
                    writes: true,
                };
                state.keys.insert(minted.clone(), k);
                Ok(BucketAccess::new(
                    "memory.invalid",
                    443,
                    Credentials::new(minted, secret),
                ))
            }
            Variant::ReadOnlyWrites => {
                if let Some(k) = state.keys.get_mut(&access.credentials.access_key_id) {
                    k.writes = true;
                }
                Ok(access)
            }
            _ => Ok(access),
        }
    }

    async fn grant(&self, req: &BucketRequest) -> Result<BucketAccess, ProvisionError> {
        self.0.grant(req).await
    }

    async fn delete(&self, req: &TeardownRequest) -> Result<(), ProvisionError> {
        self.0.delete(req).await
    }

    async fn revoke(&self, req: &TeardownRequest) -> Result<(), ProvisionError> {
        match self.1 {
            Variant::RevokeKeepsKey => Ok(()),
            _ => self.0.revoke(req).await,
        }
    }

    async fn update(&self, req: &UpdateRequest) -> Result<(), ProvisionError> {
        match self.1 {
            Variant::UpdateDoesNothing => Ok(()),
            _ => self.0.update(req).await,
        }
    }

    async fn rotate(&self, req: &RotationRequest) -> Result<BucketAccess, ProvisionError> {
        self.0.rotate(req).await
    }

    async fn revoke_previous(&self, req: &RotationRequest) -> Result<(), ProvisionError> {
        match self.1 {
            // The trait's default: nothing.
            Variant::RevokePreviousKeyOnly => Ok(()),
            _ => self.0.revoke_previous(req).await,
        }
    }

    async fn revoke_previous_key(
        &self,
        req: &RotationRequest,
    ) -> Result<Revocation, ProvisionError> {
        match self.1 {
            Variant::RevokePreviousKeyOnly => {
                self.0.revoke_previous(req).await?;
                Ok(Revocation::Revoked)
            }
            _ => self
                .revoke_previous(req)
                .await
                .map(|()| Revocation::Unreported),
        }
    }
}
