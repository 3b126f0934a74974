//! Types shared by several COSI kinds.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// An object storage protocol.
#[derive(
    Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, JsonSchema,
)]
pub enum ObjectProtocol {
    /// Amazon S3 and compatible stores.
    S3,
    /// Azure Blob storage.
    Azure,
    /// Google Cloud Storage.
    #[serde(rename = "GCS")]
    Gcs,
}

impl ObjectProtocol {
    /// The protocol as written in the API.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::S3 => "S3",
            Self::Azure => "Azure",
            Self::Gcs => "GCS",
        }
    }
}

/// What becomes of a bucket when its BucketClaim is deleted.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum BucketDeletionPolicy {
    /// Keep the Bucket and the bucket in the store.
    Retain,
    /// Delete the Bucket and the bucket in the store.
    Delete,
}

/// How a BucketAccess may use a bucket.
#[derive(
    Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, JsonSchema,
)]
pub enum BucketAccessMode {
    /// Read and write objects.
    ReadWrite,
    /// Read objects only.
    ReadOnly,
    /// Write objects only.
    WriteOnly,
}

impl BucketAccessMode {
    /// The mode as written in the API.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ReadWrite => "ReadWrite",
            Self::ReadOnly => "ReadOnly",
            Self::WriteOnly => "WriteOnly",
        }
    }
}

/// How a workload authenticates to the store.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum AuthenticationType {
    /// Keys written into the access Secret.
    Key,
    /// The workload's ServiceAccount (no keys in the Secret).
    ServiceAccount,
}

/// Whether one BucketAccess may reach several buckets.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum MultiBucketAccess {
    /// One claim per BucketAccess (also what an omitted field means).
    SingleBucket,
    /// Several claims per BucketAccess.
    MultipleBuckets,
}

/// An error with the time it was seen; cleared on success.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[schemars(extend("minProperties" = 0))]
pub struct TimestampedError {
    /// When the error was seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<Time>,
    /// What is wrong and what to do about it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 0, max = 1572864))]
    pub message: Option<String>,
}

impl TimestampedError {
    /// An error seen now.
    pub fn now(message: impl Into<String>) -> Self {
        Self {
            time: Some(Time(k8s_openapi::jiff::Timestamp::now())),
            message: Some(message.into()),
        }
    }
}
