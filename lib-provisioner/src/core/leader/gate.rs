//! The reconcilers' Kubernetes client, gated by the leader lease: a write
//! (POST, PUT, PATCH, DELETE) starts only while this replica's lease is
//! valid, and is abandoned when the lease runs out before it is answered.
//!
//! Executors check leadership before each step, but a step can be stuck on
//! a connection that hangs (the client has no read timeout) and go on long
//! after a standby took over. Below every write, this gate holds whatever
//! the step was: no write leaves this process once a standby may lead.
//! (Bytes already handed to the kernel before the deadline may still
//! arrive; client-go's leader election has the same limit.)
//!
//! Every write is also logged at debug with `act="kubernetes-write"`, as
//! every provisioner call is with `act="provisioner-call"`: what the
//! replica tests count to prove a standby never acts. Reads and watches
//! pass through untouched; the leader election itself uses the ungated
//! client.

use std::sync::Arc;
use std::task::{Context, Poll};

use futures::future::{BoxFuture, FutureExt};
use http::{Method, Request, Response};
use kube::Client;
use kube::client::Body;
use tracing::debug;

use crate::core::leader::leadership::Leadership;

/// Why a write was not sent or was abandoned.
#[derive(Debug, thiserror::Error)]
#[error(
    "Kubernetes write {method} {path} not made: this replica's leader lease ran out, and another replica may lead now"
)]
pub(crate) struct LeaseRanOut {
    method: Method,
    path: String,
}

/// `client`, with every write logged and, under leader election, bounded
/// by the lease of `leadership`.
pub(crate) fn gated(client: Client, leadership: Option<Arc<Leadership>>) -> Client {
    let default_namespace = client.default_namespace().to_owned();
    Client::new(
        Gate {
            inner: client,
            leadership,
        },
        default_namespace,
    )
}

#[derive(Clone)]
struct Gate {
    inner: Client,
    leadership: Option<Arc<Leadership>>,
}

fn is_write(method: &Method) -> bool {
    matches!(
        *method,
        Method::POST | Method::PUT | Method::PATCH | Method::DELETE
    )
}

impl tower_service::Service<Request<Body>> for Gate {
    type Response = Response<Body>;
    type Error = kube::Error;
    type Future = BoxFuture<'static, Result<Response<Body>, kube::Error>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), kube::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let client = self.inner.clone();
        if !is_write(request.method()) {
            return async move { client.send(request).await }.boxed();
        }
        let leadership = self.leadership.clone();
        async move {
            let method = request.method().clone();
            let path = request.uri().path().to_owned();
            let ran_out = || {
                kube::Error::Service(Box::new(LeaseRanOut {
                    method: method.clone(),
                    path: path.clone(),
                }))
            };
            let left = match &leadership {
                Some(l) => Some(l.remaining().ok_or_else(ran_out)?),
                None => None,
            };
            debug!(act = "kubernetes-write", %method, %path, "writing to Kubernetes");
            match left {
                Some(left) => tokio::time::timeout(left, client.send(request))
                    .await
                    .unwrap_or_else(|_| Err(ran_out())),
                None => client.send(request).await,
            }
        }
        .boxed()
    }
}
