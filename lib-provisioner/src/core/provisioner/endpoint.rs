//! Where a bucket is reached: what a claim's ConfigMap and a COSI
//! BucketInfo tell applications.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Connection details of a bucket.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Endpoint {
    /// Host name or address of the object store.
    #[serde(default)]
    pub bucket_host: String,
    /// Port of the object store.
    #[serde(default)]
    pub bucket_port: i32,
    /// The bucket's name in the object store.
    #[serde(default)]
    pub bucket_name: String,
    /// Region of the bucket.
    #[serde(default)]
    pub region: String,
    /// Sub-region of the bucket.
    #[serde(default)]
    pub sub_region: String,
    /// Provisioner-specific connection settings, copied into the ConfigMap.
    #[serde(default)]
    pub additional_config: BTreeMap<String, String>,
}
