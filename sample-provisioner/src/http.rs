//! The HTTPS client of every S3 client in this binary: rustls on ring, the
//! crypto provider kube uses too, so the process has exactly one (and
//! nothing needs to install a process-wide default).

use std::sync::OnceLock;

use aws_sdk_s3::config::SharedHttpClient;
use aws_smithy_http_client::tls::{Provider, rustls_provider::CryptoMode};

/// One connection pool shared by all S3 clients.
///
/// ```
/// let config = aws_sdk_s3::config::Builder::new()
///     .http_client(sample_provisioner::http::s3_http_client())
///     .build();
/// # let _ = config;
/// ```
pub fn s3_http_client() -> SharedHttpClient {
    static CLIENT: OnceLock<SharedHttpClient> = OnceLock::new();
    CLIENT
        .get_or_init(|| {
            aws_smithy_http_client::Builder::new()
                .tls_provider(Provider::Rustls(CryptoMode::Ring))
                .build_https()
        })
        .clone()
}
