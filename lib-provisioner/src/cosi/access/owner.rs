//! Which role a BucketAccess is with (COSI.md, "BucketAccess hand-off").
//!
//! Upstream also hands a BucketAccess back to the binding role when it
//! carries `objectstorage.k8s.io/controller-management-override`. That
//! annotation is the BucketAccess owner's to write, and the binding role
//! does not revoke: a tenant who set it and then deleted the BucketAccess
//! kept a store user with working keys (`tenant_attacks::cosi`). So once a
//! driver has the BucketAccess, only the driver's own cleanup hands it back.

use crate::cosi::api::{BucketAccess, SIDECAR_CLEANUP_FINISHED_ANNOTATION};
use crate::cosi::plan::has_annotation;

/// The role a BucketAccess is with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Owner {
    /// The binding role: before the hand-off, and after the driver's
    /// cleanup of a deleted BucketAccess.
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
        Some(d) if !cleaned => Owner::Driver(d),
        _ => Owner::Binding,
    }
}

/// [`owner`], except that a deleting BucketAccess `driver` holds goes back
/// to the binding role only once this pass `revoked` it. The
/// `sidecar-cleanup-finished` annotation that hands it back is the
/// BucketAccess owner's to write as well: trusted alone, a tenant could set
/// it before deleting and keep a store user with working keys. Revoking is
/// idempotent, so a repeat after a crash costs one call.
pub(crate) fn confirmed_owner(access: &BucketAccess, driver: &str, revoked: bool) -> Owner {
    let handed_off = access
        .status
        .as_ref()
        .is_some_and(|s| s.accessed_buckets.is_some() && s.driver_name.as_deref() == Some(driver));
    match owner(access) {
        Owner::Binding
            if handed_off && access.metadata.deletion_timestamp.is_some() && !revoked =>
        {
            Owner::Driver(driver.to_owned())
        }
        o => o,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cosi::api::{BucketAccessStatus, CONTROLLER_MANAGEMENT_OVERRIDE_ANNOTATION};

    fn handed_off(annotations: &[&str], deleting: bool) -> BucketAccess {
        let mut access = BucketAccess::new(
            "a",
            serde_json::from_value(serde_json::json!({
                "bucketClaims": [], "bucketAccessClassName": "c", "protocol": "S3"
            }))
            .expect("spec"),
        );
        access.metadata.annotations = Some(
            annotations
                .iter()
                .map(|a| ((*a).to_owned(), String::new()))
                .collect(),
        );
        if deleting {
            access.metadata.deletion_timestamp =
                Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
                ));
        }
        access.status = Some(BucketAccessStatus {
            driver_name: Some("d".into()),
            ..Default::default()
        });
        access
    }

    #[test]
    fn the_override_annotation_never_takes_an_access_from_its_driver() {
        let ann = [CONTROLLER_MANAGEMENT_OVERRIDE_ANNOTATION];
        assert_eq!(owner(&handed_off(&ann, false)), Owner::Driver("d".into()));
        assert_eq!(owner(&handed_off(&ann, true)), Owner::Driver("d".into()));
    }

    #[test]
    fn the_drivers_cleanup_hands_a_deleted_access_back() {
        let cleaned = [SIDECAR_CLEANUP_FINISHED_ANNOTATION];
        assert_eq!(owner(&handed_off(&cleaned, true)), Owner::Binding);
        // Only once deleted: the annotation on a live access means nothing.
        assert_eq!(
            owner(&handed_off(&cleaned, false)),
            Owner::Driver("d".into())
        );
    }

    #[test]
    fn before_the_hand_off_the_binding_role_has_it() {
        let mut access = handed_off(&[], false);
        access.status = None;
        assert_eq!(owner(&access), Owner::Binding);
    }
}
