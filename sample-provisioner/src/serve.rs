//! What the binary serves besides ObjectBucketClaims: Kubernetes COSI
//! (`objectstorage.k8s.io/v1alpha2`) from the same
//! [`S3Provisioner`](crate::s3::S3Provisioner), on
//! when COSI's CRDs are installed ([`CosiMode::Auto`], the default), and
//! how [`with_cosi`] adds it to a [`ControllerBuilder`]. The tests wire the
//! controller through these functions too, so that they run what the
//! binary runs.
//!
//! ```no_run
//! # async fn demo(client: kube::Client) -> Result<(), sample_provisioner::serve::CosiError> {
//! use lib_provisioner::ControllerBuilder;
//! use sample_provisioner::S3Provisioner;
//! use sample_provisioner::serve::{CosiMode, Cosi, with_cosi};
//!
//! let cosi = CosiMode::Auto.resolve(&client, Cosi::new("sample-s3.objectbucket.io")?).await?;
//! let builder = with_cosi(
//!     ControllerBuilder::new("objectbucket.io/sample-s3", S3Provisioner::new(client.clone())),
//!     cosi,
//! );
//! # let _ = builder; Ok(()) }
//! ```

use lib_provisioner::cosi::CosiOptions;
use lib_provisioner::cosi::api::{GROUP, VERSION};
use lib_provisioner::{ControllerBuilder, Provisioner};

/// The default COSI driver name: the provisioner name
/// `objectbucket.io/sample-s3` as COSI spells driver names.
pub const DEFAULT_DRIVER_NAME: &str = "sample-s3.objectbucket.io";

/// The resources COSI's five CRDs serve.
const RESOURCES: [&str; 5] = [
    "bucketclasses",
    "bucketclaims",
    "buckets",
    "bucketaccessclasses",
    "bucketaccesses",
];

/// Whether to serve COSI.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum CosiMode {
    /// When the apiserver serves COSI's five resources (its CRDs are
    /// installed); else not.
    #[default]
    Auto,
    /// Always: missing CRDs are an error at start.
    On,
    /// Never.
    Off,
}

/// The COSI driver the binary serves when COSI is on.
pub type Cosi = CosiOptions;

/// Why COSI could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum CosiError {
    /// The driver name is not one COSI's CRDs accept.
    #[error(transparent)]
    DriverName(#[from] lib_provisioner::cosi::InvalidDriverName),
    /// `--cosi=on`, and the apiserver does not serve COSI.
    #[error(
        "--cosi=on, but the apiserver does not serve {GROUP}/{VERSION} {0}: install COSI's CRDs (crds/cosi/), or use --cosi=auto or --cosi=off"
    )]
    NotInstalled(String),
    /// Discovery failed.
    #[error("could not ask the apiserver whether it serves {GROUP}/{VERSION}: {0}")]
    Discovery(#[source] kube::Error),
}

impl CosiMode {
    /// The options to serve COSI with, or `None`: [`CosiMode::Auto`] asks
    /// the apiserver's discovery (no RBAC needed) whether COSI's resources
    /// are served.
    pub async fn resolve(
        self,
        client: &kube::Client,
        options: CosiOptions,
    ) -> Result<Option<CosiOptions>, CosiError> {
        match self {
            Self::Off => Ok(None),
            Self::Auto => Ok(missing(client).await?.is_empty().then_some(options)),
            Self::On => {
                let missing = missing(client).await?;
                if missing.is_empty() {
                    Ok(Some(options))
                } else {
                    Err(CosiError::NotInstalled(missing.join(", ")))
                }
            }
        }
    }
}

/// COSI's resources the apiserver does not serve.
async fn missing(client: &kube::Client) -> Result<Vec<&'static str>, CosiError> {
    let served: Vec<String> = match client
        .list_api_group_resources(&format!("{GROUP}/{VERSION}"))
        .await
    {
        Ok(list) => list.resources.into_iter().map(|r| r.name).collect(),
        Err(kube::Error::Api(s)) if s.code == 404 => Vec::new(),
        Err(e) => return Err(CosiError::Discovery(e)),
    };
    Ok(RESOURCES
        .into_iter()
        .filter(|r| !served.iter().any(|s| s == r))
        .collect())
}

/// `builder` serving COSI too, with `cosi`'s driver name and roles; as it
/// was with `None`.
pub fn with_cosi<P: Provisioner>(
    builder: ControllerBuilder<P>,
    cosi: Option<CosiOptions>,
) -> ControllerBuilder<P> {
    match cosi {
        Some(options) => builder.cosi(options),
        None => builder,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_driver_name_is_valid() {
        let options = CosiOptions::new(DEFAULT_DRIVER_NAME).expect("valid");
        assert!(options.binding());
    }
}
