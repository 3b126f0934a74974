//! One store user per access principal (a COSI BucketAccess), with one
//! canned policy that gives each of its buckets exactly its mode.
//!
//! Names derive from the principal's UID alone ([`principal_user_name`],
//! [`principal_policy_name`]): a retry after a crash finds its own work, a
//! revocation needs nothing but the UID (the COSI gRPC sidecar sends only
//! ids), and no principal can name another's user. The `cosi` prefix never
//! starts a claim's user (`obc…`), so a principal never reaches a claim's.
//!
//! Every step repeats safely: the policy is an upsert, adding the user again
//! gives it a fresh secret, attaching replaces; removing what is gone is a
//! no-op.

use lib_provisioner::cosi::api::account_name_for_access;
use lib_provisioner::provisioner::AccessMode;
use lib_provisioner::{Credentials, ProvisionError};
use sha2::{Digest, Sha256};
use tracing::{debug, info};

use super::StoreAdmin;
use crate::admin::{AdminClient, AdminClients, AdminError};

/// The `credentialsMode` recorded in a grant's state.
pub const PER_PRINCIPAL_MODE: &str = "per-principal";

/// The hex SHA-256 of a principal's UID: fixed-length, store-safe names
/// whatever the UID looks like (`ba-<uuid>` on the gRPC path, a UUID from
/// the Kubernetes API).
fn digest(principal_uid: &str) -> String {
    hex::encode(Sha256::digest(principal_uid.as_bytes()))
}

/// The access key of a principal's user: `cosi` and 16 hex digits of the
/// UID's digest (20 characters, the longest every MinIO tool takes).
pub fn principal_user_name(principal_uid: &str) -> String {
    format!("cosi{}", &digest(principal_uid)[..16])
}

/// The canned policy of a principal.
pub fn principal_policy_name(principal_uid: &str) -> String {
    format!("cosi-access-{}", &digest(principal_uid)[..32])
}

/// The S3 actions of a mode: on the bucket, and on its objects.
fn actions(mode: AccessMode) -> (&'static [&'static str], &'static [&'static str]) {
    match mode {
        AccessMode::ReadOnly => (
            &["s3:ListBucket", "s3:GetBucketLocation"],
            &["s3:GetObject"],
        ),
        AccessMode::WriteOnly => (
            &["s3:GetBucketLocation"],
            &[
                "s3:PutObject",
                "s3:AbortMultipartUpload",
                "s3:ListMultipartUploadParts",
            ],
        ),
        // ReadWrite, and any mode added later gets no more than it.
        _ => (
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
    }
}

/// The policy allowing each bucket its mode and nothing else.
pub fn grant_policy_document(buckets: &[(&str, AccessMode)]) -> serde_json::Value {
    let statements: Vec<serde_json::Value> = buckets
        .iter()
        .flat_map(|(bucket, mode)| {
            let (on_bucket, on_objects) = actions(*mode);
            [
                serde_json::json!({
                    "Effect": "Allow",
                    "Action": on_bucket,
                    "Resource": [format!("arn:aws:s3:::{bucket}")],
                }),
                serde_json::json!({
                    "Effect": "Allow",
                    "Action": on_objects,
                    "Resource": [format!("arn:aws:s3:::{bucket}/*")],
                }),
            ]
        })
        .collect();
    serde_json::json!({ "Version": "2012-10-17", "Statement": statements })
}

/// What a grant made: the user's key pair and the names of user and policy.
pub struct PrincipalGrant {
    /// The user's access key and a fresh secret.
    pub credentials: Credentials,
    /// The user (its access key).
    pub user: String,
    /// The canned policy attached to it.
    pub policy: String,
}

/// Gives principal `principal_uid` its user, allowed `buckets` in their modes.
pub async fn grant(
    clients: &AdminClients,
    store: &StoreAdmin,
    principal_uid: &str,
    buckets: &[(&str, AccessMode)],
) -> Result<PrincipalGrant, ProvisionError> {
    let admin = client(clients, store)?;
    let fail = |e| admin_error(e, store);
    let (user, policy) = (
        principal_user_name(principal_uid),
        principal_policy_name(principal_uid),
    );
    admin
        .add_canned_policy(&policy, &grant_policy_document(buckets))
        .await
        .map_err(fail)?;
    let secret = super::per_claim::new_secret();
    admin.add_user(&user, &secret).await.map_err(fail)?;
    admin.set_user_policy(&user, &policy).await.map_err(fail)?;
    info!(%user, %policy, buckets = buckets.len(), "issued the principal its own user");
    Ok(PrincipalGrant {
        credentials: Credentials::new(user.clone(), secret),
        user,
        policy,
    })
}

/// Removes principal `principal_uid`'s user, then its policy. Returns
/// whether a user was there.
///
/// Also the user the COSI gRPC path of earlier versions made for the same
/// principal: it keyed the principal by its account name `ba-<uid>`
/// rather than by `<uid>`, the UID both driver modes hand over now.
pub async fn revoke(
    clients: &AdminClients,
    store: &StoreAdmin,
    principal_uid: &str,
) -> Result<bool, ProvisionError> {
    let admin = client(clients, store)?;
    let mut removed = false;
    for key in [
        principal_uid.to_owned(),
        account_name_for_access(principal_uid),
    ] {
        removed |= remove(&admin, store, &key).await?;
    }
    Ok(removed)
}

/// Removes the user and the policy keyed by `key`.
async fn remove(
    admin: &AdminClient,
    store: &StoreAdmin,
    key: &str,
) -> Result<bool, ProvisionError> {
    let fail = |e| admin_error(e, store);
    let (user, policy) = (principal_user_name(key), principal_policy_name(key));
    // The user first: once it is gone nothing holds the policy.
    let removed = admin.remove_user(&user).await.map_err(fail)?;
    admin.remove_canned_policy(&policy).await.map_err(fail)?;
    if removed {
        info!(%user, %policy, "removed the principal's user and policy");
    } else {
        debug!(%user, "the principal's user was already gone");
    }
    Ok(removed)
}

fn client(clients: &AdminClients, store: &StoreAdmin) -> Result<AdminClient, ProvisionError> {
    clients
        .get(&store.endpoint.url, &store.region, &store.credentials)
        .map_err(|e| ProvisionError::permanent(e.to_string()))
}

/// An admin failure as the principal's status shows it.
fn admin_error(e: AdminError, store: &StoreAdmin) -> ProvisionError {
    if e.is_retryable() {
        return ProvisionError::retryable(e.to_string()).with_source(e);
    }
    if e.is_denied() {
        return ProvisionError::permanent(format!(
            "{e}. The admin credentials named by the class parameters may not manage users on {}: give the admin Secret a key with admin rights (users and policies)",
            store.endpoint.url
        ));
    }
    ProvisionError::permanent(format!(
        "{e}. Access keys per principal need the MinIO admin API on {} (MinIO, RustFS)",
        store.endpoint.url
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_derive_from_the_principal_uid_and_never_look_like_a_claims() {
        let uid = "ba-0b1f6c1e-2a3b-4c5d-8e9f-0123456789ab";
        let user = principal_user_name(uid);
        assert_eq!(user.len(), 20);
        assert!(user.starts_with("cosi"), "{user}");
        assert_eq!(user, principal_user_name(uid), "stable");
        assert_ne!(
            user,
            principal_user_name("ba-0b1f6c1e-2a3b-4c5d-8e9f-0123456789ac")
        );
        assert!(principal_policy_name(uid).starts_with("cosi-access-"));
        assert_ne!(user, crate::credentials::per_claim::user_name(uid));
    }

    fn allowed(doc: &serde_json::Value, resource: &str) -> Vec<String> {
        doc["Statement"]
            .as_array()
            .expect("statements")
            .iter()
            .filter(|s| s["Resource"][0] == resource)
            .flat_map(|s| s["Action"].as_array().expect("actions").clone())
            .map(|a| a.as_str().expect("string").to_owned())
            .collect()
    }

    #[test]
    fn each_bucket_gets_exactly_its_mode() {
        let doc = grant_policy_document(&[
            ("rw", AccessMode::ReadWrite),
            ("ro", AccessMode::ReadOnly),
            ("wo", AccessMode::WriteOnly),
        ]);
        let text = doc.to_string();
        assert!(
            !text.contains("s3:*") && !text.contains("ListAllMyBuckets"),
            "{text}"
        );
        assert!(allowed(&doc, "arn:aws:s3:::rw/*").contains(&"s3:PutObject".to_owned()));
        assert!(allowed(&doc, "arn:aws:s3:::rw/*").contains(&"s3:GetObject".to_owned()));
        let ro = allowed(&doc, "arn:aws:s3:::ro/*");
        assert_eq!(ro, ["s3:GetObject"]);
        let wo = allowed(&doc, "arn:aws:s3:::wo/*");
        assert!(
            wo.contains(&"s3:PutObject".to_owned()) && !wo.contains(&"s3:GetObject".to_owned())
        );
        assert!(!allowed(&doc, "arn:aws:s3:::wo").contains(&"s3:ListBucket".to_owned()));
    }
}
