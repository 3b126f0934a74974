//! [`AccessMode`]: what one principal may do in one bucket.

use std::fmt;
use std::str::FromStr;

/// What a principal may do with the objects of one bucket it was granted
/// (see [`Provisioner::grant_access`](super::Provisioner::grant_access)).
///
/// Each bucket of an [`AccessRequest`](super::AccessRequest) carries its own
/// mode: a provisioner gives each bucket exactly its mode, never the widest
/// one of the request.
///
/// ```
/// use lib_provisioner::provisioner::AccessMode;
/// let mode: AccessMode = "ReadOnly".parse().unwrap();
/// assert_eq!(mode, AccessMode::ReadOnly);
/// assert!(mode.can_read() && !mode.can_write());
/// assert_eq!(AccessMode::WriteOnly.to_string(), "WriteOnly");
/// assert!("readonly".parse::<AccessMode>().is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
#[non_exhaustive]
pub enum AccessMode {
    /// List, read, write and delete objects.
    #[default]
    ReadWrite,
    /// List and read objects.
    ReadOnly,
    /// Write objects; no listing or reading.
    WriteOnly,
}

impl AccessMode {
    /// Every mode, in declaration order.
    pub const ALL: [AccessMode; 3] = [Self::ReadWrite, Self::ReadOnly, Self::WriteOnly];

    /// The mode's name as Kubernetes APIs spell it (`ReadWrite`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ReadWrite => "ReadWrite",
            Self::ReadOnly => "ReadOnly",
            Self::WriteOnly => "WriteOnly",
        }
    }

    /// Whether the mode lets the principal list and read objects.
    pub fn can_read(self) -> bool {
        matches!(self, Self::ReadWrite | Self::ReadOnly)
    }

    /// Whether the mode lets the principal write objects.
    pub fn can_write(self) -> bool {
        matches!(self, Self::ReadWrite | Self::WriteOnly)
    }
}

impl fmt::Display for AccessMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A string that names no [`AccessMode`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("access mode {0:?} is not one of ReadWrite, ReadOnly, WriteOnly")]
pub struct UnknownAccessMode(pub String);

impl FromStr for AccessMode {
    type Err = UnknownAccessMode;

    /// Parses the exact Kubernetes spelling (case matters, as in the CRDs).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or_else(|| UnknownAccessMode(s.to_owned()))
    }
}
