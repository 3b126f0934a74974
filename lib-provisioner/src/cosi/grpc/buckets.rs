//! `DriverCreateBucket`, `DriverGetExistingBucket`, `DriverDeleteBucket`:
//! onto [`Provisioner::create_bucket`], [`Provisioner::existing_bucket`]
//! and [`Provisioner::delete`].

use std::collections::{BTreeMap, HashMap};

use tonic::Status;

use super::proto::{
    DriverCreateBucketRequest, DriverCreateBucketResponse, DriverDeleteBucketRequest,
    DriverGetExistingBucketRequest, DriverGetExistingBucketResponse,
};
use super::protocol::{self, Protocol, s3_info};
use super::status::{invalid, status_of, teardown_status_of};
use crate::core::provisioner::{BucketRequest, ClaimIdentity, Provisioner, TeardownRequest};

/// The identity the gRPC path gives a bucket's claim: the bucket id, all a
/// later `DriverDeleteBucket` knows (see the [module docs](super)).
pub(super) fn bucket_identity(id: &str) -> ClaimIdentity {
    ClaimIdentity::new("", id, id)
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
    let id = req.existing_bucket_id;
    if id.is_empty() {
        return Err(invalid(
            "DriverGetExistingBucket names no bucket: set the Bucket's existingBucketID to the bucket's name in the store",
        ));
    }
    protocol::requested(&req.protocols, served)?;
    let info = p
        .existing_bucket(&bucket_request(&id, req.parameters))
        .await
        .map_err(|e| status_of(&e))?;
    Ok(DriverGetExistingBucketResponse {
        protocols: Some(s3_info(&id, &info.endpoint)),
        bucket_id: id,
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
