//! Named crash points for the reliability suite.
//!
//! With the `failpoints` feature, setting `OBC_FAILPOINTS=name[,name...]`
//! makes the process abort (as abruptly as SIGKILL: no destructors, no
//! flushing) right after the write the point is named for. Without the
//! feature, [`hit`] compiles to nothing.
//!
//! ```
//! lib_provisioner::failpoint::hit("after-bucket-created"); // no-op unless armed
//! ```

/// Every point the library defines, in the order a provision or delete
/// reaches them.
pub const POINTS: &[&str] = &[
    // Provisioning.
    "after-claim-prepared",
    "after-bucket-name-held",
    "after-object-bucket-created",
    "after-bucket-created",
    "after-object-bucket-completed",
    "after-secret-written",
    "after-config-map-written",
    "after-object-bucket-bound",
    // Deletion.
    "after-bucket-deleted",
    "after-object-bucket-finalizer-removed",
    "after-object-bucket-released",
    "after-bucket-name-released",
    "after-claim-finalizer-removed",
];

/// Points reached only for a Secret or ConfigMap that an older version
/// wrote with the finalizer, when it is let go (its claim deleted, or the
/// child itself): the claims of this version never reach them.
pub const OLDER_CHILDREN_POINTS: &[&str] = &["after-secret-released", "after-config-map-released"];

/// Points reached only by a claim that an older version prepared without
/// `spec.objectBucketName` (or whose schema prunes the field), when it is
/// recorded at bind: this version writes it with the claim's finalizer, so
/// its claims never reach them.
pub const OLDER_CLAIMS_POINTS: &[&str] = &["after-claim-bound"];

/// Points reached only after bind, by a change to a Bound claim (its
/// `additionalConfig` updated, its credentials rotated): walked by their own
/// reliability test, since provisioning and deletion never reach them.
pub const AFTER_BIND_POINTS: &[&str] = &[
    // An update of additionalConfig.
    "after-bucket-updated",
    "after-config-recorded",
    // A rotation of credentials (the Secret's switch is after-secret-written).
    "after-rotation-started",
    "after-credentials-rotated",
    // The new key and state recorded before the Secret's switch (also
    // reached by a Secret's repair).
    "after-access-recorded",
    "after-previous-credentials-revoked",
    "after-rotation-finished",
];

/// Aborts the process if `name` is armed.
#[inline]
pub fn hit(name: &str) {
    debug_assert!(
        POINTS.contains(&name)
            || AFTER_BIND_POINTS.contains(&name)
            || OLDER_CHILDREN_POINTS.contains(&name)
            || OLDER_CLAIMS_POINTS.contains(&name),
        "failpoint {name} is not in POINTS, AFTER_BIND_POINTS, OLDER_CHILDREN_POINTS or OLDER_CLAIMS_POINTS"
    );
    hit_provisioner(name);
}

/// Aborts the process if `name` is armed: for crash points a provisioner
/// defines between its own store calls (the sample's `after-user-created`,
/// say), armed the same way as the library's.
///
/// ```
/// lib_provisioner::failpoint::hit_provisioner("after-user-created"); // no-op unless armed
/// ```
#[inline]
pub fn hit_provisioner(name: &str) {
    #[cfg(feature = "failpoints")]
    {
        let armed = std::env::var("OBC_FAILPOINTS").unwrap_or_default();
        if armed.split(',').any(|p| p.trim() == name) {
            // One write: `eprintln!` writes its pieces one by one to the
            // unbuffered stderr, and another thread's log line could land
            // between them, hiding the point from whoever reads the log.
            use std::io::Write as _;
            let line = format!("failpoint {name}: aborting\n");
            let _ = std::io::stderr().write_all(line.as_bytes());
            std::process::abort();
        }
    }
    #[cfg(not(feature = "failpoints"))]
    let _ = name;
}

/// The names passed to `failpoint::hit("…")` in `sources`: each family's
/// test checks them against its list of points.
#[cfg(test)]
pub(crate) fn hit_names_in(sources: &[&str]) -> std::collections::BTreeSet<String> {
    let call = ["failpoint::hit(", "\""].concat();
    let mut names = std::collections::BTreeSet::new();
    for source in sources {
        for (at, _) in source.match_indices(&call) {
            let rest = &source[at + call.len()..];
            if let Some(end) = rest.find('"') {
                names.insert(rest[..end].to_owned());
            }
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::{AFTER_BIND_POINTS, OLDER_CHILDREN_POINTS, OLDER_CLAIMS_POINTS, POINTS};
    use std::collections::BTreeSet;

    /// The names passed to `hit` in the reconcilers' and writes' source.
    fn hit_names() -> BTreeSet<String> {
        super::hit_names_in(&[
            include_str!("../obc/reconcile/claim.rs"),
            include_str!("../obc/reconcile/bucket.rs"),
            include_str!("../obc/reconcile/steps.rs"),
            include_str!("../obc/reconcile/steps/bind.rs"),
            include_str!("../obc/reconcile/steps/children.rs"),
            include_str!("../obc/reconcile/steps/provision.rs"),
            include_str!("../obc/reconcile/steps/rotation.rs"),
            include_str!("../obc/reconcile/steps/teardown.rs"),
            include_str!("../obc/reconcile/steps/update.rs"),
            include_str!("../obc/writes.rs"),
        ])
    }

    #[test]
    fn points_list_matches_the_hit_calls() {
        let all: Vec<&str> = POINTS
            .iter()
            .chain(AFTER_BIND_POINTS)
            .chain(OLDER_CHILDREN_POINTS)
            .chain(OLDER_CLAIMS_POINTS)
            .copied()
            .collect();
        let listed: BTreeSet<String> = all.iter().map(|p| (*p).to_owned()).collect();
        assert_eq!(listed.len(), all.len(), "a point is listed twice");
        assert_eq!(listed, hit_names());
    }
}
