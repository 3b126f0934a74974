//! [`BucketInfo`] and [`StoreEndpoint`]: where a bucket is, without
//! credentials (what [`Provisioner::create_bucket`](super::Provisioner::create_bucket)
//! and [`Provisioner::existing_bucket`](super::Provisioner::existing_bucket)
//! return).

use std::collections::BTreeMap;

use super::Endpoint;

use super::BucketAccess;

/// How clients address a bucket on an S3-compatible store.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum AddressingStyle {
    /// `https://host/bucket/key`: works with every S3-compatible store.
    #[default]
    Path,
    /// `https://bucket.host/key`: needs wildcard DNS for the store.
    Virtual,
}

impl AddressingStyle {
    /// The name clients expect (`path`, `virtual`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Path => "path",
            Self::Virtual => "virtual",
        }
    }
}

/// Where a store is reached, shared by every bucket on it. Holds no secret.
///
/// ```
/// use lib_provisioner::provisioner::{AddressingStyle, StoreEndpoint};
/// let plain = StoreEndpoint::new("s3.local", 9000).with_url("http://s3.local:9000");
/// assert_eq!(plain.url(), "http://s3.local:9000");
/// let tls = StoreEndpoint::new("s3.example", 443).with_region("eu-west-1");
/// assert_eq!(tls.url(), "https://s3.example:443");
/// assert_eq!(tls.addressing_style, AddressingStyle::Path);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct StoreEndpoint {
    /// Host name or address.
    pub host: String,
    /// Port.
    pub port: i32,
    /// The URL clients use, scheme included. `None`: `https://host:port`
    /// (see [`url`](Self::url)); set it for a store reached over plain HTTP.
    pub explicit_url: Option<String>,
    /// Region (empty if the store has none).
    pub region: String,
    /// How clients address buckets.
    pub addressing_style: AddressingStyle,
}

impl StoreEndpoint {
    /// A store at `host:port`, path-style, no region.
    pub fn new(host: impl Into<String>, port: i32) -> Self {
        Self {
            host: host.into(),
            port,
            ..Default::default()
        }
    }

    /// The store's host, port and region as an OBC [`Endpoint`] records them.
    pub fn from_endpoint(endpoint: &Endpoint) -> Self {
        Self::new(endpoint.bucket_host.clone(), endpoint.bucket_port)
            .with_region(endpoint.region.clone())
    }

    /// Sets the URL clients use (scheme, host, port).
    pub fn with_url(mut self, url: impl Into<String>) -> Self {
        self.explicit_url = Some(url.into());
        self
    }

    /// Sets the region.
    pub fn with_region(mut self, region: impl Into<String>) -> Self {
        self.region = region.into();
        self
    }

    /// Sets the addressing style.
    pub fn with_addressing_style(mut self, style: AddressingStyle) -> Self {
        self.addressing_style = style;
        self
    }

    /// The URL clients use: [`explicit_url`](Self::explicit_url), else
    /// `https://host:port`.
    pub fn url(&self) -> String {
        match &self.explicit_url {
            Some(url) => url.clone(),
            None => format!("https://{}:{}", self.host, self.port),
        }
    }
}

/// A bucket that exists, as the provisioner made or found it: where it is,
/// and what a later [`delete`](super::Provisioner::delete) may use.
///
/// ```
/// use lib_provisioner::provisioner::{BucketInfo, StoreEndpoint};
/// let info = BucketInfo::new(StoreEndpoint::new("s3.local", 9000)).with_state("owner", "bc-1");
/// assert_eq!(info.additional_state["owner"], "bc-1");
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BucketInfo {
    /// Where the bucket is.
    pub endpoint: StoreEndpoint,
    /// State a teardown may use when the caller kept it. Callers that keep
    /// nothing (the COSI gRPC sidecar sends only the bucket id) pass it
    /// empty: [`delete`](super::Provisioner::delete) must work without it.
    /// Readable cluster-wide where it is kept: never put secrets here.
    pub additional_state: BTreeMap<String, String>,
}

impl BucketInfo {
    /// A bucket at `endpoint` with no state.
    pub fn new(endpoint: StoreEndpoint) -> Self {
        Self {
            endpoint,
            additional_state: BTreeMap::new(),
        }
    }

    /// The endpoint and state of `access`; its credentials are dropped.
    pub fn from_access(access: BucketAccess) -> Self {
        Self {
            endpoint: StoreEndpoint::from_endpoint(&access.endpoint),
            additional_state: access.additional_state,
        }
    }

    /// Adds state.
    pub fn with_state(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.additional_state.insert(key.into(), value.into());
        self
    }
}
