//! `COSI_ENDPOINT`: where the driver listens, as the COSI sidecar names it.

use std::path::PathBuf;

/// The environment variable the COSI sidecar and driver read.
pub const ENDPOINT_ENV: &str = "COSI_ENDPOINT";

/// The endpoint when none is set.
pub const DEFAULT_ENDPOINT: &str = "unix:///var/lib/cosi/cosi.sock";

/// An endpoint the driver cannot listen on.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EndpointError {
    /// Not `unix://`: COSI speaks plain gRPC over a unix socket only.
    #[error(
        "COSI endpoint {0:?} is not a unix socket: use unix://<path>.sock, such as {DEFAULT_ENDPOINT}"
    )]
    NotUnix(String),
    /// The socket's path does not end in `.sock`, as COSI requires.
    #[error(
        "COSI endpoint {0:?} does not end in .sock: name the socket <path>.sock, such as {DEFAULT_ENDPOINT}"
    )]
    NotSock(String),
}

/// The socket path of a COSI endpoint: `unix://` and a path ending in
/// `.sock`.
///
/// ```
/// use std::path::Path;
/// use lib_provisioner::cosi::grpc::{socket_path, DEFAULT_ENDPOINT};
/// assert_eq!(socket_path(DEFAULT_ENDPOINT).unwrap(), Path::new("/var/lib/cosi/cosi.sock"));
/// assert!(socket_path("tcp://127.0.0.1:9000").is_err());
/// assert!(socket_path("unix:///var/lib/cosi/cosi").is_err());
/// ```
pub fn socket_path(endpoint: &str) -> Result<PathBuf, EndpointError> {
    let path = endpoint
        .strip_prefix("unix://")
        .ok_or_else(|| EndpointError::NotUnix(endpoint.to_owned()))?;
    // `.sock` alone names no file.
    if path.len() <= ".sock".len() || !path.ends_with(".sock") || path.ends_with("/.sock") {
        return Err(EndpointError::NotSock(endpoint.to_owned()));
    }
    Ok(PathBuf::from(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_unix_sockets_ending_in_sock() {
        assert_eq!(
            socket_path("unix:///tmp/a/driver.sock"),
            Ok(PathBuf::from("/tmp/a/driver.sock"))
        );
        assert_eq!(
            socket_path("unix://rel.sock"),
            Ok(PathBuf::from("rel.sock"))
        );
        for bad in ["/var/lib/cosi/cosi.sock", "unix:/x.sock", "http://x.sock"] {
            assert!(
                matches!(socket_path(bad), Err(EndpointError::NotUnix(_))),
                "{bad}"
            );
        }
        for bad in [
            "unix://",
            "unix://.sock",
            "unix:///tmp/.sock",
            "unix:///tmp/cosi.socket",
        ] {
            assert!(
                matches!(socket_path(bad), Err(EndpointError::NotSock(_))),
                "{bad}"
            );
        }
    }
}
