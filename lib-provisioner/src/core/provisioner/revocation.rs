//! [`Revocation`]: what a provisioner did with a rotation's previous key.

use std::fmt;

/// What [`Provisioner::revoke_previous_key`](super::Provisioner::revoke_previous_key)
/// did with [`RotationRequest::previous_access_key_id`](super::RotationRequest::previous_access_key_id).
/// The claim's `CredentialsRotated` condition and Event say it as it is.
///
/// ```
/// use lib_provisioner::provisioner::Revocation;
/// let kept = Revocation::Kept("the store cannot remove one key of a user".into());
/// assert!(!kept.is_revoked());
/// assert!(Revocation::AlreadyGone.is_revoked());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Revocation {
    /// The key was revoked by this call.
    Revoked,
    /// The key no longer existed (revoked by an earlier call, before a
    /// crash, say): nothing left to revoke.
    AlreadyGone,
    /// The key was left in place, for the reason given (it may still
    /// work): the claim shows `CredentialsRotated=False`.
    Kept(String),
    /// The provisioner returned success without saying which (it
    /// implements only `revoke_previous`).
    Unreported,
}

impl Revocation {
    /// Whether the previous key is known not to work any more.
    pub fn is_revoked(&self) -> bool {
        matches!(self, Self::Revoked | Self::AlreadyGone)
    }
}

impl fmt::Display for Revocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Revoked => f.write_str("revoked"),
            Self::AlreadyGone => f.write_str("already revoked"),
            Self::Kept(reason) => write!(f, "kept by the provisioner: {reason}"),
            Self::Unreported => f.write_str(
                "handed to the provisioner's revoke_previous, which returned success without saying whether it revoked it",
            ),
        }
    }
}
