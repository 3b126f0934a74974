//! [`Scenario`]: the kit's scenarios, with stable names.

use super::Rule;

/// One scenario of the kit. Its [`name`](Self::name) is stable: filter on
/// it, and keep it in bug reports.
///
/// ```
/// use lib_provisioner::conformance::{Rule, Scenario};
/// assert_eq!(Scenario::ProvisionAbandoned.name(), "provision.abandoned");
/// assert_eq!(Scenario::ProvisionAbandoned.rule(), Rule::Abandon);
/// assert_eq!(Scenario::from_name("scope.read-only"), Some(Scenario::ScopeReadOnly));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[non_exhaustive]
pub enum Scenario {
    /// `provision` twice for one claim.
    ProvisionRepeat,
    /// `provision` dropped at each `.await`, then called again.
    ProvisionAbandoned,
    /// `grant` twice on an existing bucket, then `revoke` twice.
    GrantRepeat,
    /// `rotate` twice with one rotation, then `revoke_previous_key` twice (as the library calls it).
    RotateRepeat,
    /// `rotate` dropped at each `.await`, then again, then `revoke_previous_key`.
    RotateAbandoned,
    /// `update` twice with one change.
    UpdateRepeat,
    /// `delete` twice.
    DeleteRepeat,
    /// `delete` dropped at each `.await`, then called again.
    DeleteAbandoned,
    /// `delete` of a bucket never made.
    DeleteNeverProvisioned,
    /// `revoke` twice.
    RevokeRepeat,
    /// `revoke` of access never granted.
    RevokeNeverGranted,
    /// `provision` of another claim's bucket.
    OwnershipOtherClaimsBucket,
    /// `provision` of a bucket the provisioner did not make.
    OwnershipForeignBucket,
    /// `grant` on a bucket that does not exist.
    OwnershipGrantMissingBucket,
    /// One claim's credentials on another claim's bucket.
    ScopeOtherClaimsBucket,
    /// Read-only credentials trying to write.
    ScopeReadOnly,
    /// `delete` leaves no bucket and no working credentials.
    TeardownDelete,
    /// `revoke` keeps the bucket and leaves no working credentials.
    TeardownRetain,
    /// `provision` with `reissue`: no new bucket, no wider access, and
    /// refused once the bucket is gone.
    ProvisionReissue,
    /// Two claims granted one existing bucket: one's revoke leaves the
    /// other's access.
    GrantSharedBucket,
    /// `delete` of a bucket holding data: gone, or refused; never Ok with
    /// the bucket left.
    TeardownDeleteWithData,
    /// `revoke` under Retain of a bucket holding data: bucket and data stay.
    TeardownRetainWithData,
    /// Bucket settings read back after provision, its retry, a re-issue,
    /// an update and its repeat.
    SettingsApplied,
}

impl Scenario {
    /// Every scenario, in the order the kit runs them.
    pub const ALL: [Scenario; 23] = [
        Self::ProvisionRepeat,
        Self::ProvisionAbandoned,
        Self::GrantRepeat,
        Self::RotateRepeat,
        Self::RotateAbandoned,
        Self::UpdateRepeat,
        Self::DeleteRepeat,
        Self::DeleteAbandoned,
        Self::DeleteNeverProvisioned,
        Self::RevokeRepeat,
        Self::RevokeNeverGranted,
        Self::OwnershipOtherClaimsBucket,
        Self::OwnershipForeignBucket,
        Self::OwnershipGrantMissingBucket,
        Self::ScopeOtherClaimsBucket,
        Self::ScopeReadOnly,
        Self::TeardownDelete,
        Self::TeardownRetain,
        Self::ProvisionReissue,
        Self::GrantSharedBucket,
        Self::TeardownDeleteWithData,
        Self::TeardownRetainWithData,
        Self::SettingsApplied,
    ];

    /// The stable name, `<method or theme>.<case>`.
    pub fn name(self) -> &'static str {
        match self {
            Self::ProvisionRepeat => "provision.repeat",
            Self::ProvisionAbandoned => "provision.abandoned",
            Self::GrantRepeat => "grant.repeat",
            Self::RotateRepeat => "rotate.repeat",
            Self::RotateAbandoned => "rotate.abandoned",
            Self::UpdateRepeat => "update.repeat",
            Self::DeleteRepeat => "delete.repeat",
            Self::DeleteAbandoned => "delete.abandoned",
            Self::DeleteNeverProvisioned => "delete.never-provisioned",
            Self::RevokeRepeat => "revoke.repeat",
            Self::RevokeNeverGranted => "revoke.never-granted",
            Self::OwnershipOtherClaimsBucket => "ownership.other-claims-bucket",
            Self::OwnershipForeignBucket => "ownership.foreign-bucket",
            Self::OwnershipGrantMissingBucket => "ownership.grant-missing-bucket",
            Self::ScopeOtherClaimsBucket => "scope.other-claims-bucket",
            Self::ScopeReadOnly => "scope.read-only",
            Self::TeardownDelete => "teardown.delete",
            Self::TeardownRetain => "teardown.retain",
            Self::ProvisionReissue => "provision.reissue",
            Self::GrantSharedBucket => "grant.shared-bucket",
            Self::TeardownDeleteWithData => "teardown.delete-with-data",
            Self::TeardownRetainWithData => "teardown.retain-with-data",
            Self::SettingsApplied => "settings.applied",
        }
    }

    /// The scenario of that [`name`](Self::name).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.name() == name)
    }

    /// The contract rule the scenario checks.
    pub fn rule(self) -> Rule {
        match self {
            Self::ProvisionRepeat | Self::GrantRepeat | Self::RotateRepeat | Self::UpdateRepeat => {
                Rule::Repeat
            }
            Self::ProvisionAbandoned | Self::RotateAbandoned | Self::DeleteAbandoned => {
                Rule::Abandon
            }
            Self::DeleteRepeat
            | Self::DeleteNeverProvisioned
            | Self::RevokeRepeat
            | Self::RevokeNeverGranted => Rule::GoneIsDone,
            Self::OwnershipOtherClaimsBucket
            | Self::OwnershipForeignBucket
            | Self::OwnershipGrantMissingBucket
            | Self::ProvisionReissue => Rule::Ownership,
            Self::ScopeOtherClaimsBucket | Self::ScopeReadOnly | Self::GrantSharedBucket => {
                Rule::Scope
            }
            Self::TeardownDelete
            | Self::TeardownRetain
            | Self::TeardownDeleteWithData
            | Self::TeardownRetainWithData => Rule::Teardown,
            Self::SettingsApplied => Rule::BucketSettings,
        }
    }

    /// What the scenario does, in one line.
    pub fn what(self) -> &'static str {
        match self {
            Self::ProvisionRepeat => {
                "provision, then provision again (a crash before the library recorded the first answer)"
            }
            Self::ProvisionAbandoned => {
                "provision dropped after each point where it waits, then provision again; then delete"
            }
            Self::GrantRepeat => {
                "grant on an existing bucket twice, then revoke twice; the bucket and its data stay"
            }
            Self::RotateRepeat => {
                "rotate twice with one rotation id, then revoke_previous_key twice"
            }
            Self::RotateAbandoned => {
                "rotate dropped after each point where it waits, rotate again, then revoke_previous_key"
            }
            Self::UpdateRepeat => "update with one change of additionalConfig, twice",
            Self::DeleteRepeat => "provision, delete, delete again",
            Self::DeleteAbandoned => {
                "delete dropped after each point where it waits, then delete again"
            }
            Self::DeleteNeverProvisioned => {
                "delete of a bucket that was never made (provisioning died before it)"
            }
            Self::RevokeRepeat => "provision under Retain, revoke, revoke again",
            Self::RevokeNeverGranted => "revoke for a claim that was never given access",
            Self::OwnershipOtherClaimsBucket => {
                "a second claim asks for the first claim's bucket, then is torn down"
            }
            Self::OwnershipForeignBucket => {
                "a claim asks for a bucket someone else made, then is torn down"
            }
            Self::OwnershipGrantMissingBucket => "grant on a bucket that does not exist",
            Self::ScopeOtherClaimsBucket => {
                "two claims: each one's credentials on the other's bucket and on a foreign one"
            }
            Self::ScopeReadOnly => "credentials asked for read-only try to write",
            Self::TeardownDelete => "provision, use the bucket, delete: nothing may remain",
            Self::TeardownRetain => {
                "provision under Retain, revoke: the bucket stays, the credentials stop working"
            }
            Self::ProvisionReissue => {
                "provision, provision again with reissue (credentials reach the claim's bucket only, no bucket made), delete, reissue again (refused, no bucket made)"
            }
            Self::GrantSharedBucket => {
                "grant one existing bucket to two claims, revoke one: the other's access stays as it was"
            }
            Self::TeardownDeleteWithData => {
                "provision, put data in the bucket, delete: the bucket is gone, or delete fails; never Ok with the bucket left"
            }
            Self::TeardownRetainWithData => {
                "provision under Retain, put data in the bucket, revoke: bucket and data stay, the credentials stop working"
            }
            Self::SettingsApplied => {
                "provision with bucket settings, provision again, re-issue credentials, update them (changed, removed), update again: the store holds what each step asks for"
            }
        }
    }
}

impl std::fmt::Display for Scenario {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
