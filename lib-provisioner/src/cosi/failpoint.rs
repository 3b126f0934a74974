//! Named crash points of the COSI controllers, armed like the OBC ones
//! (`OBC_FAILPOINTS`, feature `failpoints`; see [`crate::core::failpoint`]).

/// Every COSI point, in the order a BucketClaim, its Bucket and a
/// BucketAccess reach them, then their deletion.
pub const POINTS: &[&str] = &[
    // BucketClaim → Bucket (binding role).
    "cosi-after-claim-finalizer-added",
    "cosi-after-bucket-object-created",
    "cosi-after-claim-bound",
    // Bucket (driver role).
    "cosi-after-bucket-created",
    "cosi-after-bucket-ready",
    // BucketAccess (binding role, then driver role).
    "cosi-after-access-handed-off",
    "cosi-after-secret-reserved",
    "cosi-after-grant",
    "cosi-after-account-recorded",
    "cosi-after-secret-written",
    "cosi-after-access-ready",
    // BucketAccess deletion.
    "cosi-after-secret-deleted",
    "cosi-after-revoke",
    "cosi-after-cleanup-finished",
    // BucketClaim deletion, then its Bucket's.
    "cosi-after-bucket-released",
    "cosi-after-bucket-object-deleted",
    "cosi-after-bucket-deleted",
    "cosi-after-claim-finalizer-removed",
];

/// Aborts the process if `name` is armed.
#[inline]
pub fn hit(name: &str) {
    debug_assert!(
        POINTS.contains(&name),
        "COSI failpoint {name} is not in POINTS"
    );
    crate::core::failpoint::hit_provisioner(name);
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    /// The names passed to `hit` in the COSI steps.
    fn hit_names() -> BTreeSet<String> {
        crate::core::failpoint::hit_names_in(&[
            include_str!("claim/steps.rs"),
            include_str!("bucket/steps.rs"),
            include_str!("access/bind_steps.rs"),
            include_str!("access/grant_steps.rs"),
        ])
    }

    #[test]
    fn points_list_matches_the_hit_calls() {
        let listed: BTreeSet<String> = super::POINTS.iter().map(|p| (*p).to_owned()).collect();
        assert_eq!(listed.len(), super::POINTS.len(), "a point is listed twice");
        assert_eq!(listed, hit_names());
    }
}
