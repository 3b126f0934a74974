//! `DriverCreateBucket`, `DriverGetExistingBucket` (and its newer name
//! `DriverGetBucket`), `DriverDeleteBucket`: onto
//! [`Provisioner::create_bucket`], [`Provisioner::existing_bucket`] and
//! [`Provisioner::delete`].

use std::collections::{BTreeMap, HashMap};

use tonic::Status;

use super::proto::{
    DriverCreateBucketRequest, DriverCreateBucketResponse, DriverDeleteBucketRequest,
    DriverGetBucketRequest, DriverGetBucketResponse, DriverGetExistingBucketRequest,
    DriverGetExistingBucketResponse, ObjectProtocol, ObjectProtocolAndBucketInfo,
};
use super::protocol::{self, Protocol, s3_info};
use super::status::{invalid, status_of, teardown_status_of};
use crate::core::provisioner::{BucketRequest, ClaimIdentity, Provisioner, TeardownRequest};
use crate::cosi::api::owner_uid_of_id;

/// The identity the gRPC path gives a bucket's claim or an account's
/// principal, from the id alone (all a later `DriverDeleteBucket` or
/// `DriverRevokeBucketAccess` knows): named by the id, with the UID the id
/// names ([`owner_uid_of_id`]), the UID the in-process driver role hands
/// the provisioner for the same object (see the [module docs](super)).
pub(super) fn bucket_identity(id: &str) -> ClaimIdentity {
    ClaimIdentity::new("", id, owner_uid_of_id(id))
}

pub(super) fn parameters(map: HashMap<String, String>) -> BTreeMap<String, String> {
    map.into_iter().collect()
}

fn bucket_request(id: &str, parameters: HashMap<String, String>) -> BucketRequest {
    BucketRequest::new(bucket_identity(id), id, "").with_parameters(self::parameters(parameters))
}

/// `name` (the Bucket object's name) is the bucket's name in the store
/// and its id.
pub(super) async fn create<P: Provisioner>(
    p: &P,
    served: &[Protocol],
    req: DriverCreateBucketRequest,
) -> Result<DriverCreateBucketResponse, Status> {
    if req.name.is_empty() {
        return Err(invalid("DriverCreateBucket names no bucket (empty name)"));
    }
    protocol::requested(&req.protocols, served)?;
    let info = p
        .create_bucket(&bucket_request(&req.name, req.parameters))
        .await
        .map_err(|e| status_of(&e))?;
    Ok(DriverCreateBucketResponse {
        protocols: Some(s3_info(&req.name, &info.endpoint)),
        bucket_id: req.name,
    })
}

/// `existing_bucket_id` is the bucket's name in the store and stays its id.
pub(super) async fn existing<P: Provisioner>(
    p: &P,
    served: &[Protocol],
    req: DriverGetExistingBucketRequest,
) -> Result<DriverGetExistingBucketResponse, Status> {
    let found = look_up(p, served, "DriverGetExistingBucket", req.into()).await?;
    Ok(DriverGetExistingBucketResponse {
        bucket_id: found.id,
        protocols: Some(found.info),
    })
}

/// `DriverGetBucket`, upstream's newer name for `DriverGetExistingBucket`
/// (`bucket_id` for `existing_bucket_id`): the same look-up, the same
/// answers, so a sidecar of either side of the rename gets one behaviour.
pub(super) async fn get<P: Provisioner>(
    p: &P,
    served: &[Protocol],
    req: DriverGetBucketRequest,
) -> Result<DriverGetBucketResponse, Status> {
    let found = look_up(p, served, "DriverGetBucket", req.into()).await?;
    Ok(DriverGetBucketResponse {
        bucket_id: found.id,
        protocols: Some(found.info),
    })
}

/// What both names of the look-up ask.
struct Asked {
    id: String,
    protocols: Vec<ObjectProtocol>,
    parameters: HashMap<String, String>,
}

impl From<DriverGetExistingBucketRequest> for Asked {
    fn from(r: DriverGetExistingBucketRequest) -> Self {
        Self {
            id: r.existing_bucket_id,
            protocols: r.protocols,
            parameters: r.parameters,
        }
    }
}

impl From<DriverGetBucketRequest> for Asked {
    fn from(r: DriverGetBucketRequest) -> Self {
        Self {
            id: r.bucket_id,
            protocols: r.protocols,
            parameters: r.parameters,
        }
    }
}

/// A bucket found in the store: its id and what the sidecar records of it.
struct Found {
    id: String,
    info: ObjectProtocolAndBucketInfo,
}

/// The bucket named `asked.id` in the store, which stays its id; `rpc`
/// names the call in the refusal of an empty id.
async fn look_up<P: Provisioner>(
    p: &P,
    served: &[Protocol],
    rpc: &str,
    asked: Asked,
) -> Result<Found, Status> {
    let Asked {
        id,
        protocols,
        parameters,
    } = asked;
    if id.is_empty() {
        return Err(invalid(format!(
            "{rpc} names no bucket: set the Bucket's existingBucketID to the bucket's name in the store"
        )));
    }
    protocol::requested(&protocols, served)?;
    let info = p
        .existing_bucket(&bucket_request(&id, parameters))
        .await
        .map_err(|e| status_of(&e))?;
    Ok(Found {
        info: s3_info(&id, &info.endpoint),
        id,
    })
}

/// Deletes what [`create`] made for the id; gone already is OK.
pub(super) async fn delete<P: Provisioner>(
    p: &P,
    req: DriverDeleteBucketRequest,
) -> Result<(), Status> {
    let id = req.bucket_id;
    if id.is_empty() {
        return Err(invalid(
            "DriverDeleteBucket names no bucket (empty bucket_id)",
        ));
    }
    let teardown = TeardownRequest::new(bucket_identity(&id), &id, "")
        .with_parameters(parameters(req.parameters));
    p.delete(&teardown)
        .await
        .map_err(|e| teardown_status_of(&e))
}
