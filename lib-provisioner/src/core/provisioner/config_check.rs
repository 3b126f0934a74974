//! [`ConfigCheck`]: what a provisioner found when the library asked it to
//! compare a Bound claim's bucket with the config recorded as applied.

/// The answer of [`Provisioner::check_config`](super::Provisioner::check_config).
///
/// ```
/// use lib_provisioner::provisioner::ConfigCheck;
///
/// let found = ConfigCheck::Restored(vec!["versioning".into()]);
/// assert!(found.restored().contains(&"versioning".to_owned()));
/// assert!(ConfigCheck::InPlace.restored().is_empty());
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ConfigCheck {
    /// The provisioner does not check (the default): nothing is shown.
    #[default]
    NotChecked,
    /// The store holds what the applied config says.
    InPlace,
    /// Settings someone changed on the store behind the claim's back were
    /// put back; each entry names one (a config key, say). The claim gets a
    /// Warning Event naming them.
    Restored(Vec<String>),
}

impl ConfigCheck {
    /// The settings that were put back (none unless
    /// [`Restored`](Self::Restored)).
    pub fn restored(&self) -> &[String] {
        match self {
            Self::Restored(what) => what,
            _ => &[],
        }
    }
}
