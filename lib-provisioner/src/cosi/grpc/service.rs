//! The two gRPC services over one [`Provisioner`]: each RPC logged by name
//! and outcome (ids only, never credentials).

use std::sync::Arc;

use async_trait::async_trait;
use tonic::{Request, Response, Status};
use tracing::{info, warn};

use super::proto::{self, identity_server::Identity, provisioner_server};
use super::protocol::Protocol;
use super::{access, buckets};
use crate::core::provisioner::Provisioner;

/// What both services share.
pub(super) struct DriverService<P> {
    pub(super) provisioner: Arc<P>,
    pub(super) name: String,
    pub(super) protocols: Vec<Protocol>,
}

impl<P> Clone for DriverService<P> {
    fn clone(&self) -> Self {
        Self {
            provisioner: self.provisioner.clone(),
            name: self.name.clone(),
            protocols: self.protocols.clone(),
        }
    }
}

/// Logs an RPC's outcome and wraps it.
fn answer<T>(rpc: &str, id: &str, out: Result<T, Status>) -> Result<Response<T>, Status> {
    match &out {
        Ok(_) => info!(rpc, id, "done"),
        Err(s) => warn!(rpc, id, code = ?s.code(), message = s.message(), "refused"),
    }
    out.map(Response::new)
}

#[async_trait]
impl<P: Provisioner> Identity for DriverService<P> {
    async fn driver_get_info(
        &self,
        _: Request<proto::DriverGetInfoRequest>,
    ) -> Result<Response<proto::DriverGetInfoResponse>, Status> {
        Ok(Response::new(proto::DriverGetInfoResponse {
            name: self.name.clone(),
            supported_protocols: self.protocols.iter().map(|p| p.to_proto()).collect(),
        }))
    }
}

#[async_trait]
impl<P: Provisioner> provisioner_server::Provisioner for DriverService<P> {
    async fn driver_create_bucket(
        &self,
        req: Request<proto::DriverCreateBucketRequest>,
    ) -> Result<Response<proto::DriverCreateBucketResponse>, Status> {
        let req = req.into_inner();
        let id = req.name.clone();
        let out = buckets::create(&*self.provisioner, &self.protocols, req).await;
        answer("DriverCreateBucket", &id, out)
    }

    async fn driver_get_existing_bucket(
        &self,
        req: Request<proto::DriverGetExistingBucketRequest>,
    ) -> Result<Response<proto::DriverGetExistingBucketResponse>, Status> {
        let req = req.into_inner();
        let id = req.existing_bucket_id.clone();
        let out = buckets::existing(&*self.provisioner, &self.protocols, req).await;
        answer("DriverGetExistingBucket", &id, out)
    }

    async fn driver_get_bucket(
        &self,
        req: Request<proto::DriverGetBucketRequest>,
    ) -> Result<Response<proto::DriverGetBucketResponse>, Status> {
        let req = req.into_inner();
        let id = req.bucket_id.clone();
        let out = buckets::get(&*self.provisioner, &self.protocols, req).await;
        answer("DriverGetBucket", &id, out)
    }

    async fn driver_delete_bucket(
        &self,
        req: Request<proto::DriverDeleteBucketRequest>,
    ) -> Result<Response<proto::DriverDeleteBucketResponse>, Status> {
        let req = req.into_inner();
        let id = req.bucket_id.clone();
        let out = buckets::delete(&*self.provisioner, req).await;
        answer(
            "DriverDeleteBucket",
            &id,
            out.map(|()| proto::DriverDeleteBucketResponse {}),
        )
    }

    async fn driver_grant_bucket_access(
        &self,
        req: Request<proto::DriverGrantBucketAccessRequest>,
    ) -> Result<Response<proto::DriverGrantBucketAccessResponse>, Status> {
        let req = req.into_inner();
        let id = req.account_name.clone();
        let out = access::grant(&*self.provisioner, &self.protocols, req).await;
        answer("DriverGrantBucketAccess", &id, out)
    }

    async fn driver_revoke_bucket_access(
        &self,
        req: Request<proto::DriverRevokeBucketAccessRequest>,
    ) -> Result<Response<proto::DriverRevokeBucketAccessResponse>, Status> {
        let req = req.into_inner();
        let id = req.account_id.clone();
        let out = access::revoke(&*self.provisioner, req).await;
        answer(
            "DriverRevokeBucketAccess",
            &id,
            out.map(|()| proto::DriverRevokeBucketAccessResponse {}),
        )
    }
}
