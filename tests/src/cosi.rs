//! Talking to a COSI gRPC driver over its unix socket, as the COSI sidecar
//! does: [`Driver::start`] serves a provisioner on a socket in a temporary
//! directory, [`Driver::identity`] and [`Driver::provisioner`] are clients.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use hyper_util::rt::TokioIo;
use lib_provisioner::Provisioner;
use lib_provisioner::cosi::grpc::proto::identity_client::IdentityClient;
use lib_provisioner::cosi::grpc::proto::provisioner_client::ProvisionerClient;
use lib_provisioner::cosi::grpc::{CosiDriver, DriverError, Protocol};
use tokio::net::UnixStream;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::transport::{Channel, Endpoint, Uri};

/// The name the tests' drivers advertise.
pub const DRIVER_NAME: &str = "s3.test.objectbucket.io";

/// A driver serving on a socket until dropped or [`stop`](Self::stop)ped.
pub struct Driver {
    socket: PathBuf,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), DriverError>>>,
    channel: Channel,
}

impl Driver {
    /// Serves `provisioner` as [`DRIVER_NAME`] on `dir/cosi.sock` and
    /// connects to it.
    pub async fn start<P: Provisioner>(provisioner: P, dir: &Path) -> Result<Self> {
        let driver = CosiDriver::new(provisioner, DRIVER_NAME, [Protocol::S3])?;
        let socket = dir.join("cosi.sock");
        let (stop, stopped) = oneshot::channel::<()>();
        let path = socket.clone();
        let task = tokio::spawn(async move {
            let stopped = async {
                let _ = stopped.await;
            };
            driver.serve_with_shutdown(path, stopped).await
        });
        let channel = connect(&socket).await?;
        Ok(Self {
            socket,
            stop: Some(stop),
            task: Some(task),
            channel,
        })
    }

    /// A client of the Identity service.
    pub fn identity(&self) -> IdentityClient<Channel> {
        IdentityClient::new(self.channel.clone())
    }

    /// A client of the Provisioner service.
    pub fn provisioner(&self) -> ProvisionerClient<Channel> {
        ProvisionerClient::new(self.channel.clone())
    }

    /// The socket's path.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Stops serving and returns how the server ended.
    pub async fn stop(mut self) -> Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match self.task.take() {
            Some(task) => Ok(task.await??),
            None => Ok(()),
        }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// A channel to the driver on `socket`, once it answers (10 s at most: a
/// socket left by an earlier run refuses until the driver replaces it).
pub async fn connect(socket: &Path) -> Result<Channel> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        match try_connect(socket).await {
            Ok(channel) => return Ok(channel),
            Err(e) if tokio::time::Instant::now() > deadline => {
                return Err(e).with_context(|| {
                    format!("no driver answers on {} after 10 s", socket.display())
                });
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}

async fn try_connect(socket: &Path) -> Result<Channel> {
    let path = socket.to_owned();
    // The URI is not used: every connection goes to the socket.
    let channel = Endpoint::try_from("http://[::]:0")?
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let path = path.clone();
            async move { UnixStream::connect(path).await.map(TokioIo::new) }
        }))
        .await?;
    Ok(channel)
}
