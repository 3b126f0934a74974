//! What the builder tells the OBC family: whose classes, which namespaces,
//! how often to resync and check buckets' config, where bucket names are
//! held.

use std::time::Duration;

/// Which namespaces' claims to serve.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum WatchScope {
    /// Every namespace.
    #[default]
    All,
    /// Only these namespaces.
    Namespaces(Vec<String>),
}

impl WatchScope {
    /// One watch per entry: `[None]` watches every namespace.
    pub(crate) fn namespaces(&self) -> Vec<Option<String>> {
        match self {
            WatchScope::All => vec![None],
            WatchScope::Namespaces(list) => list.iter().cloned().map(Some).collect(),
        }
    }
}

/// The OBC controllers' settings.
pub(crate) struct Settings {
    /// The StorageClass `provisioner` served.
    pub provisioner_name: String,
    pub scope: WatchScope,
    /// How often a bound claim is checked again without any change.
    pub resync: Duration,
    /// How often a Bound claim's bucket is checked against its applied
    /// config; zero: never.
    pub config_check_interval: Duration,
    /// The namespace where greenfield bucket names are held; `None`: not
    /// arbitrated.
    pub name_records: Option<String>,
}
