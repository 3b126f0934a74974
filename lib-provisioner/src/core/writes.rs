//! What every Kubernetes write shares, whichever API family makes it.

use kube::api::{PatchParams, PostParams};

/// Field manager recorded on every write.
pub const FIELD_MANAGER: &str = "lib-provisioner";

/// Patch parameters for every patch: the library's field manager.
pub(crate) fn params() -> PatchParams {
    PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..Default::default()
    }
}

/// Create parameters for every create: the library's field manager.
pub(crate) fn post_params() -> PostParams {
    PostParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..Default::default()
    }
}
