//! `DriverGrantBucketAccess`, `DriverRevokeBucketAccess`: onto
//! [`Provisioner::grant_access`] and [`Provisioner::revoke_access`].

use tonic::Status;

use super::buckets::{bucket_identity, parameters};
use super::proto::{
    self, DriverGrantBucketAccessRequest, DriverGrantBucketAccessResponse,
    DriverRevokeBucketAccessRequest, access_mode, authentication_type,
    driver_grant_bucket_access_response::BucketInfo,
};
use super::protocol::{self, Protocol, s3_credentials, s3_info};
use super::status::{invalid, status_of, teardown_status_of};
use crate::core::provisioner::{AccessMode, AccessRequest, AccessRevocation, Provisioner};

/// The longest id COSI records (`status.accountID`, `status.bucketID`).
const MAX_ID: usize = 2048;

/// One credential for the request's buckets, each in its mode.
pub(super) async fn grant<P: Provisioner>(
    p: &P,
    served: &[Protocol],
    req: DriverGrantBucketAccessRequest,
) -> Result<DriverGrantBucketAccessResponse, Status> {
    let name = req.account_name;
    if name.is_empty() {
        return Err(invalid(
            "DriverGrantBucketAccess names no account (empty account_name)",
        ));
    }
    protocol::granted(req.protocol.as_ref(), served)?;
    key_authentication(req.authentication_type.as_ref())?;
    if req.buckets.is_empty() {
        return Err(invalid(
            "DriverGrantBucketAccess names no bucket: name at least one",
        ));
    }
    let mut request = AccessRequest::new(bucket_identity(&name), &name)
        .with_parameters(parameters(req.parameters));
    for b in &req.buckets {
        if b.bucket_id.is_empty() {
            return Err(invalid(
                "DriverGrantBucketAccess names a bucket with an empty bucket_id",
            ));
        }
        request = request.with_bucket(&b.bucket_id, mode(&b.bucket_id, b.access_mode.as_ref())?);
    }
    let grant = p.grant_access(&request).await.map_err(|e| status_of(&e))?;
    check_id(&grant.account_id)?;
    Ok(DriverGrantBucketAccessResponse {
        account_id: grant.account_id,
        buckets: request
            .buckets
            .iter()
            .map(|b| BucketInfo {
                bucket_id: b.bucket_name.clone(),
                bucket_info: Some(s3_info(&b.bucket_name, &grant.endpoint)),
            })
            .collect(),
        credentials: Some(s3_credentials(&grant.credentials)),
    })
}

/// Ends the account's access; gone already is OK.
pub(super) async fn revoke<P: Provisioner>(
    p: &P,
    req: DriverRevokeBucketAccessRequest,
) -> Result<(), Status> {
    let id = req.account_id;
    if id.is_empty() {
        return Err(invalid(
            "DriverRevokeBucketAccess names no account (empty account_id)",
        ));
    }
    let mut revocation = AccessRevocation::new(bucket_identity(&id), &id)
        .with_parameters(parameters(req.parameters));
    for b in req.buckets {
        revocation = revocation.with_bucket(b.bucket_id);
    }
    p.revoke_access(&revocation)
        .await
        .map_err(|e| teardown_status_of(&e))
}

/// Only access keys: a provisioner's [`Credentials`](crate::core::provisioner::Credentials)
/// are key pairs.
fn key_authentication(t: Option<&proto::AuthenticationType>) -> Result<(), Status> {
    let kind = t.map(|t| authentication_type::Type::try_from(t.r#type));
    match kind {
        Some(Ok(authentication_type::Type::Key)) => Ok(()),
        Some(Ok(authentication_type::Type::ServiceAccount)) => Err(invalid(
            "this driver issues access keys only: authenticationType ServiceAccount is not supported; use a BucketAccessClass with authenticationType Key",
        )),
        _ => Err(invalid(
            "the access request names no authentication type: use a BucketAccessClass with authenticationType Key",
        )),
    }
}

fn mode(bucket: &str, m: Option<&proto::AccessMode>) -> Result<AccessMode, Status> {
    match m.map(|m| access_mode::Mode::try_from(m.mode)) {
        Some(Ok(access_mode::Mode::ReadWrite)) => Ok(AccessMode::ReadWrite),
        Some(Ok(access_mode::Mode::ReadOnly)) => Ok(AccessMode::ReadOnly),
        Some(Ok(access_mode::Mode::WriteOnly)) => Ok(AccessMode::WriteOnly),
        _ => Err(invalid(format!(
            "bucket {bucket:?} is asked for without an access mode: set accessMode to ReadWrite, ReadOnly or WriteOnly"
        ))),
    }
}

/// An account id COSI can record (`^[a-zA-Z0-9/._-]+$`, at most 2048).
fn check_id(id: &str) -> Result<(), Status> {
    let fits = !id.is_empty()
        && id.len() <= MAX_ID
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-".contains(&b));
    if fits {
        Ok(())
    } else {
        Err(Status::internal(format!(
            "the provisioner returned account id {id:?}, which COSI cannot record (1 to {MAX_ID} letters, digits and /._-): the provisioner must return another"
        )))
    }
}
