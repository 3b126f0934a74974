//! [`PerClaimCredentials`]: one user per claim, allowed only its bucket,
//! through the store's MinIO admin API.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use lib_provisioner::failpoint;
use lib_provisioner::{Credentials, ProvisionError, Revocation};
use rand::Rng;
use rand::distr::Alphanumeric;
use tracing::{debug, info};

use super::{
    CREDENTIALS_MODE_KEY, CredentialIssuer, CredentialRequest, IssuedCredentials, StoreAdmin,
};
use crate::access::{Access, PER_CLAIM_MODE};
use crate::admin::{AdminClient, AdminClients, AdminError};

/// `additional_state` key naming the claim's user (its access key).
pub const USER_KEY: &str = "user";
/// `additional_state` key naming the claim's canned policy.
pub const POLICY_KEY: &str = "policy";
/// `additional_state` key recording the access granted.
pub const ACCESS_KEY: &str = "access";

/// Crash points between the issuer's admin calls, walked by the
/// reliability suite (`OBC_FAILPOINTS`).
pub const POINTS: &[&str] = &[
    "after-policy-created",
    "after-user-created",
    "after-policy-attached",
];

/// Gives each claim its own user on the store, with a canned policy that
/// allows only the claim's bucket (read-write, or read-only).
///
/// Names derive from the claim's UID ([`user_name`], [`policy_name`]), so
/// every step repeats safely after a crash: the policy is an upsert, adding
/// the user again gives it a fresh secret (the library then writes that
/// one into the claim's Secret), and attaching replaces. Revoking derives
/// the names again rather than trusting the ObjectBucket's copy, so an
/// edited ObjectBucket cannot make the provisioner delete another user.
///
/// A rotation issues the claim's other user ([`rotated_user_name`] and
/// [`user_name`] alternate), attached to the same policy; the previous one
/// is removed once the claim's Secret holds the new key. Teardown removes
/// both.
#[derive(Debug, Default)]
pub struct PerClaimCredentials {
    clients: Arc<AdminClients>,
}

/// The access key of the user of claim `claim_uid`: `obc` and the UID's
/// first 17 hex digits (20 characters, the longest every MinIO tool takes).
pub fn user_name(claim_uid: &str) -> String {
    let hex: String = claim_uid
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .take(17)
        .collect();
    format!("obc{hex}")
}

/// The other user of claim `claim_uid`, which a rotation alternates with
/// [`user_name`]: `obc`, 16 hex digits of the UID, and `r` (never a hex
/// digit, so never another claim's [`user_name`]).
pub fn rotated_user_name(claim_uid: &str) -> String {
    let mut name = user_name(claim_uid);
    name.truncate(19);
    name.push('r');
    name
}

/// The user a rotation away from `previous` issues: the claim's other one.
fn rotation_target(claim_uid: &str, previous: &str) -> String {
    if previous == user_name(claim_uid) {
        rotated_user_name(claim_uid)
    } else {
        user_name(claim_uid)
    }
}

/// The canned policy of claim `claim_uid`.
pub fn policy_name(claim_uid: &str) -> String {
    format!("obc-claim-{claim_uid}")
}

/// The policy allowing `access` on `bucket` and nothing else.
pub fn policy_document(bucket: &str, access: Access) -> serde_json::Value {
    let (bucket_actions, object_actions): (&[&str], &[&str]) = match access {
        Access::ReadWrite => (
            &[
                "s3:ListBucket",
                "s3:GetBucketLocation",
                "s3:ListBucketMultipartUploads",
            ],
            &[
                "s3:GetObject",
                "s3:PutObject",
                "s3:DeleteObject",
                "s3:AbortMultipartUpload",
                "s3:ListMultipartUploadParts",
            ],
        ),
        Access::ReadOnly => (
            &["s3:ListBucket", "s3:GetBucketLocation"],
            &["s3:GetObject"],
        ),
    };
    serde_json::json!({
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Action": bucket_actions,
                "Resource": [format!("arn:aws:s3:::{bucket}")],
            },
            {
                "Effect": "Allow",
                "Action": object_actions,
                "Resource": [format!("arn:aws:s3:::{bucket}/*")],
            },
        ],
    })
}

impl PerClaimCredentials {
    /// An issuer sharing `clients` (with the provisioner's quota calls).
    pub fn with_clients(clients: Arc<AdminClients>) -> Self {
        Self { clients }
    }

    /// The claim's policy, then `user` with a fresh secret, attached to it.
    async fn issue_to(
        &self,
        store: &StoreAdmin,
        req: &CredentialRequest<'_>,
        user: &str,
    ) -> Result<IssuedCredentials, ProvisionError> {
        let admin = self.client(store)?;
        let fail = |e| admin_error(e, store, req);
        let policy = policy_name(req.claim_uid);
        admin
            .add_canned_policy(&policy, &policy_document(req.bucket, req.access))
            .await
            .map_err(fail)?;
        failpoint::hit_provisioner("after-policy-created");
        let secret = new_secret();
        admin.add_user(user, &secret).await.map_err(fail)?;
        failpoint::hit_provisioner("after-user-created");
        admin.set_user_policy(user, &policy).await.map_err(fail)?;
        failpoint::hit_provisioner("after-policy-attached");
        info!(bucket = req.bucket, %user, %policy, access = %req.access, "issued the claim its own user");
        Ok(IssuedCredentials {
            credentials: Credentials::new(user.to_owned(), secret),
            state: BTreeMap::from([
                (CREDENTIALS_MODE_KEY.to_owned(), PER_CLAIM_MODE.to_owned()),
                (USER_KEY.to_owned(), user.to_owned()),
                (POLICY_KEY.to_owned(), policy),
                (ACCESS_KEY.to_owned(), req.access.as_str().to_owned()),
            ]),
        })
    }

    fn client(&self, store: &StoreAdmin) -> Result<AdminClient, ProvisionError> {
        self.clients
            .get(&store.endpoint.url, &store.region, &store.credentials)
            .map_err(|e| ProvisionError::permanent(e.to_string()))
    }
}

/// A random secret key of 40 letters and digits.
pub(super) fn new_secret() -> String {
    rand::rng()
        .sample_iter(Alphanumeric)
        .take(40)
        .map(char::from)
        .collect()
}

/// Turns an admin failure into what the claim's status and Event say.
fn admin_error(e: AdminError, store: &StoreAdmin, req: &CredentialRequest<'_>) -> ProvisionError {
    let class = req.storage_class;
    if e.is_retryable() {
        return ProvisionError::retryable(e.to_string()).with_source(e);
    }
    if e.is_denied() {
        return ProvisionError::permanent(format!(
            "{e}. The admin credentials of StorageClass {class:?} may not manage users on {}: give the admin Secret a key with admin rights (users and policies), or set credentialsMode: shared-admin on the class for a store without a user API",
            store.endpoint.url
        ));
    }
    if matches!(
        e,
        AdminError::Service {
            status: 400 | 404 | 405 | 501,
            ..
        }
    ) {
        return ProvisionError::permanent(format!(
            "{e}. The store at {} does not offer MinIO's admin API, which credentialsMode per-claim (the default) needs to give each claim its own user: use a MinIO-compatible store, or set credentialsMode: shared-admin on StorageClass {class:?} (every claim then gets the admin credentials)",
            store.endpoint.url
        ));
    }
    ProvisionError::permanent(e.to_string())
}

#[async_trait]
impl CredentialIssuer for PerClaimCredentials {
    fn mode(&self) -> &'static str {
        PER_CLAIM_MODE
    }

    async fn issue(
        &self,
        store: &StoreAdmin,
        req: &CredentialRequest<'_>,
    ) -> Result<IssuedCredentials, ProvisionError> {
        let issued = self.issue_to(store, req, &user_name(req.claim_uid)).await?;
        // A claim has one live user: one left by a rotation goes.
        let admin = self.client(store)?;
        let other = rotated_user_name(req.claim_uid);
        if admin
            .remove_user(&other)
            .await
            .map_err(|e| admin_error(e, store, req))?
        {
            info!(bucket = req.bucket, user = %other, "removed the claim's rotated user");
        }
        Ok(issued)
    }

    async fn rotate(
        &self,
        store: &StoreAdmin,
        req: &CredentialRequest<'_>,
        previous: &str,
    ) -> Result<IssuedCredentials, ProvisionError> {
        let target = rotation_target(req.claim_uid, previous);
        self.issue_to(store, req, &target).await
    }

    async fn revoke_previous(
        &self,
        store: &StoreAdmin,
        req: &CredentialRequest<'_>,
        previous: &str,
    ) -> Result<Revocation, ProvisionError> {
        // Only the claim's own users; a key handed out by another
        // implementation (a takeover) is not ours to remove.
        let ours = [user_name(req.claim_uid), rotated_user_name(req.claim_uid)];
        if !ours.iter().any(|u| u == previous) {
            debug!(
                bucket = req.bucket,
                "the previous key is not a user of this claim; nothing to revoke"
            );
            return Ok(Revocation::Kept(format!(
                "{previous} is not one of the users this provisioner made for the claim, so it was left alone; an administrator removes it from the store if it should go"
            )));
        }
        let admin = self.client(store)?;
        if admin
            .remove_user(previous)
            .await
            .map_err(|e| admin_error(e, store, req))?
        {
            info!(bucket = req.bucket, user = %previous, "revoked the claim's previous user");
            return Ok(Revocation::Revoked);
        }
        Ok(Revocation::AlreadyGone)
    }

    async fn revoke(
        &self,
        store: Option<&StoreAdmin>,
        req: &CredentialRequest<'_>,
        _state: &BTreeMap<String, String>,
    ) -> Result<(), ProvisionError> {
        let Some(store) = store else {
            return Err(ProvisionError::permanent(
                "revoking a per-claim user needs the store: the StorageClass and its admin Secret must exist",
            ));
        };
        let admin = self.client(store)?;
        let fail = |e| admin_error(e, store, req);
        let (user, policy) = (user_name(req.claim_uid), policy_name(req.claim_uid));
        // The users first (the claim's, and the one a rotation alternates
        // with): once they are gone nothing holds the policy.
        let removed = admin.remove_user(&user).await.map_err(fail)?;
        let rotated = admin
            .remove_user(&rotated_user_name(req.claim_uid))
            .await
            .map_err(fail)?;
        admin.remove_canned_policy(&policy).await.map_err(fail)?;
        let removed = removed || rotated;
        if removed {
            info!(bucket = req.bucket, %user, %policy, "removed the claim's user and policy");
        } else {
            debug!(bucket = req.bucket, %user, "the claim's user was already gone");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_derive_from_the_claim_uid() {
        let uid = "0B1F6C1E-2a3b-4c5d-8e9f-0123456789ab";
        assert_eq!(user_name(uid), "obc0b1f6c1e2a3b4c5d8");
        assert_eq!(user_name(uid).len(), 20);
        assert_eq!(policy_name(uid), format!("obc-claim-{uid}"));
        assert_ne!(
            user_name(uid),
            user_name("0b1f6c1e-2a3b-4c5d-9e9f-0123456789ab")
        );
    }

    #[test]
    fn a_rotation_alternates_between_the_claims_two_users() {
        let uid = "0b1f6c1e-2a3b-4c5d-8e9f-0123456789ab";
        let (base, rotated) = (user_name(uid), rotated_user_name(uid));
        assert_eq!(rotated, "obc0b1f6c1e2a3b4c5dr");
        assert_eq!(rotated.len(), 20);
        assert_eq!(rotation_target(uid, &base), rotated);
        assert_eq!(rotation_target(uid, &rotated), base);
        // A key that is not the claim's (a takeover) rotates to its own user.
        assert_eq!(rotation_target(uid, "AKIAOTHER"), base);
    }

    #[test]
    fn policies_name_only_the_bucket() {
        let rw = policy_document("photos", Access::ReadWrite);
        let text = rw.to_string();
        assert!(text.contains("arn:aws:s3:::photos\"") && text.contains("arn:aws:s3:::photos/*"));
        assert!(
            !text.contains("s3:*") && !text.contains("ListAllMyBuckets"),
            "{text}"
        );
        assert!(text.contains("s3:PutObject"));
        let ro = policy_document("photos", Access::ReadOnly).to_string();
        assert!(ro.contains("s3:GetObject"));
        for write in ["PutObject", "DeleteObject", "AbortMultipartUpload"] {
            assert!(!ro.contains(write), "{write} in {ro}");
        }
    }

    #[test]
    fn secrets_are_long_and_fresh() {
        let (a, b) = (new_secret(), new_secret());
        assert_eq!(a.len(), 40);
        assert_ne!(a, b);
    }
}
