//! What happens to a bucket when its claim goes: OBC's `reclaimPolicy`,
//! COSI's `deletionPolicy`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What to do with a bucket once its claim is deleted.
#[derive(
    Deserialize,
    Serialize,
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    JsonSchema,
)]
pub enum ReclaimPolicy {
    /// Delete the bucket (greenfield) or revoke access (brownfield).
    #[default]
    Delete,
    /// Keep the bucket and mark the ObjectBucket Released.
    Retain,
}

impl ReclaimPolicy {
    /// Reads a StorageClass `reclaimPolicy`; Kubernetes defaults it to Delete.
    pub fn from_class(value: Option<&str>) -> Result<Self, String> {
        match value {
            None | Some("") | Some("Delete") => Ok(Self::Delete),
            Some("Retain") => Ok(Self::Retain),
            Some(other) => Err(format!(
                "reclaimPolicy {other:?} is not supported for buckets: use Delete or Retain"
            )),
        }
    }
}
