//! [`CosiDriver`]: the two services on a unix socket.

use std::future::Future;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::UnixListener;
use tokio_stream::wrappers::UnixListenerStream;
use tonic::service::Routes;
use tonic::transport::Server;
use tracing::info;

use super::proto::{identity_server::IdentityServer, provisioner_server::ProvisionerServer};
use super::protocol::Protocol;
use super::service::DriverService;
use crate::core::provisioner::Provisioner;

/// The longest driver name the COSI sidecar accepts.
const MAX_NAME: usize = 63;

/// Why a driver cannot be made or cannot serve.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DriverError {
    /// The COSI sidecar would refuse this name (and exit).
    #[error("driver name {name:?} is not one the COSI sidecar accepts: {why}")]
    Name {
        /// The name given.
        name: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// No protocol, or one named twice.
    #[error("a COSI driver advertises each protocol it serves once, and at least one")]
    Protocols,
    /// Something other than a socket is in the way.
    #[error("{0} exists and is not a socket: remove it, or choose another COSI_ENDPOINT")]
    NotASocket(PathBuf),
    /// The socket could not be made.
    #[error("cannot listen on {path}: {source}")]
    Listen {
        /// The socket's path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The gRPC server stopped with an error.
    #[error("the COSI gRPC server failed: {0}")]
    Serve(#[from] tonic::transport::Error),
}

/// A COSI v1alpha2 driver over `P`. See the [module docs](super).
pub struct CosiDriver<P> {
    service: DriverService<P>,
    call_timeout: Duration,
}

impl<P: Provisioner> CosiDriver<P> {
    /// A driver named `name` (what `DriverGetInfo` returns, and what
    /// BucketClasses name as `driverName`) serving `protocols`.
    pub fn new(
        provisioner: P,
        name: impl Into<String>,
        protocols: impl IntoIterator<Item = Protocol>,
    ) -> Result<Self, DriverError> {
        let name = name.into();
        check_name(&name)?;
        let protocols: Vec<Protocol> = protocols.into_iter().collect();
        let repeated = (1..protocols.len()).any(|i| protocols[..i].contains(&protocols[i]));
        if protocols.is_empty() || repeated {
            return Err(DriverError::Protocols);
        }
        Ok(Self {
            service: DriverService {
                provisioner: Arc::new(provisioner),
                name,
                protocols,
            },
            call_timeout: crate::core::calls::DEFAULT_PROVISIONER_TIMEOUT,
        })
    }

    /// Cuts each call off after `timeout` (default
    /// [`DEFAULT_PROVISIONER_TIMEOUT`](crate::core::calls::DEFAULT_PROVISIONER_TIMEOUT));
    /// the sidecar retries it. Provisioner methods are safe to abandon.
    pub fn with_call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = timeout;
        self
    }

    /// The two services, for an application that runs its own tonic server.
    pub fn routes(&self) -> Routes {
        Routes::new(IdentityServer::new(self.service.clone()))
            .add_service(ProvisionerServer::new(self.service.clone()))
    }

    /// Serves on the unix socket `path` until the server fails.
    pub async fn serve(self, path: impl AsRef<Path>) -> Result<(), DriverError> {
        self.serve_with_shutdown(path, std::future::pending()).await
    }

    /// Serves on the unix socket `path` until `shutdown` completes, then
    /// removes the socket. A socket left at `path` by an earlier run is
    /// replaced; any other file there is an error. Nothing else is created
    /// beside it.
    pub async fn serve_with_shutdown(
        self,
        path: impl AsRef<Path>,
        shutdown: impl Future<Output = ()> + Send,
    ) -> Result<(), DriverError> {
        let path = path.as_ref();
        let listener = listen(path)?;
        info!(socket = %path.display(), driver = %self.service.name, "serving COSI");
        let served = Server::builder()
            .timeout(self.call_timeout)
            .add_routes(self.routes())
            .serve_with_incoming_shutdown(UnixListenerStream::new(listener), shutdown)
            .await;
        // Best effort: the next run replaces a socket left behind anyway.
        let _ = std::fs::remove_file(path);
        Ok(served?)
    }
}

/// Binds `path`, replacing a stale socket of an earlier run.
fn listen(path: &Path) -> Result<UnixListener, DriverError> {
    let listen_error = |source| DriverError::Listen {
        path: path.to_owned(),
        source,
    };
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => {
            std::fs::remove_file(path).map_err(listen_error)?;
        }
        Ok(_) => return Err(DriverError::NotASocket(path.to_owned())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(listen_error(e)),
    }
    UnixListener::bind(path).map_err(listen_error)
}

/// The sidecar's rule: at most 63 characters, each dot-separated label an
/// RFC 1035 label (lower-case letters, digits and `-`, starting with a
/// letter, ending with a letter or digit).
fn check_name(name: &str) -> Result<(), DriverError> {
    let refuse = |why| {
        Err(DriverError::Name {
            name: name.to_owned(),
            why,
        })
    };
    if name.is_empty() || name.len() > MAX_NAME {
        return refuse("it must have 1 to 63 characters");
    }
    for label in name.split('.') {
        let bytes = label.as_bytes();
        let ok = bytes.first().is_some_and(u8::is_ascii_lowercase)
            && bytes
                .last()
                .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
            && bytes
                .iter()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-');
        if !ok {
            return refuse(
                "each dot-separated label must start with a lower-case letter, hold only lower-case letters, digits and '-', and end with a letter or digit",
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_sidecars_rule() {
        for good in ["s3.sample.objectbucket.io", "cosi", "a1.b-2"] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        let long = "a".repeat(64);
        for bad in [
            "",
            "S3.example",
            "1cosi",
            "cosi-",
            "a..b",
            "a_b",
            long.as_str(),
        ] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }
}
