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
    "after-claim-prepared",
    "after-bucket-created",
    "after-object-bucket-created",
    "after-secret-written",
    "after-config-map-written",
    "after-claim-bound",
    "after-bucket-deleted",
    "after-object-bucket-released",
    "after-secret-released",
    "after-config-map-released",
];

/// Aborts the process if `name` is armed.
#[inline]
pub fn hit(name: &str) {
    #[cfg(feature = "failpoints")]
    {
        let armed = std::env::var("OBC_FAILPOINTS").unwrap_or_default();
        if armed.split(',').any(|p| p.trim() == name) {
            eprintln!("failpoint {name}: aborting");
            std::process::abort();
        }
    }
    #[cfg(not(feature = "failpoints"))]
    let _ = name;
}
