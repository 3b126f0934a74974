//! Which role a BucketAccess is with (COSI.md, "BucketAccess hand-off").

use crate::cosi::api::{
    BucketAccess, CONTROLLER_MANAGEMENT_OVERRIDE_ANNOTATION, SIDECAR_CLEANUP_FINISHED_ANNOTATION,
};
use crate::cosi::plan::has_annotation;

/// The role a BucketAccess is with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Owner {
    /// The binding role: before the hand-off, after the driver's cleanup,
    /// or when the override annotation says so.
    Binding,
    /// The driver named in `status.driverName`.
    Driver(String),
}

/// The role `access` is with now.
pub(crate) fn owner(access: &BucketAccess) -> Owner {
    let meta = &access.metadata;
    let driver = access
        .status
        .as_ref()
        .and_then(|s| s.driver_name.clone())
        .filter(|d| !d.is_empty());
    let cleaned = meta.deletion_timestamp.is_some()
        && has_annotation(meta, SIDECAR_CLEANUP_FINISHED_ANNOTATION);
    match driver {
        Some(d) if !has_annotation(meta, CONTROLLER_MANAGEMENT_OVERRIDE_ANNOTATION) && !cleaned => {
            Owner::Driver(d)
        }
        _ => Owner::Binding,
    }
}
