//! The claim's status: phase, message and the `Bound` condition.
//!
//! Status is written only by the controller, and only when it would change,
//! so that a resync of bound claims writes nothing.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use crate::obc::api::{ClaimPhase, ObjectBucketClaim, ObjectBucketClaimStatus};

/// Condition type telling whether the claim is bound.
pub const BOUND_CONDITION: &str = "Bound";

/// Condition type telling whether the claim's `spec.additionalConfig` is
/// applied to its bucket (present once a Bound claim's config changed).
pub const CONFIG_APPLIED_CONDITION: &str = "ConfigApplied";

/// Condition type telling whether the claim's last requested credential
/// rotation is done (present once one was requested).
pub const CREDENTIALS_ROTATED_CONDITION: &str = "CredentialsRotated";

/// `ConfigApplied` reasons that settle a generation: the provisioner
/// refused the change (or cannot make changes), and is not asked again
/// until the spec changes.
pub(crate) const SETTLED_REFUSALS: &[&str] = &["UpdateRefused", "UpdateNotSupported"];

/// `status` with condition `type_` set (replacing one of that type), for
/// the claim's current generation. The transition time moves only when the
/// condition's status flips.
pub(crate) fn with_condition(
    claim: &ObjectBucketClaim,
    mut status: ObjectBucketClaimStatus,
    type_: &str,
    value: bool,
    reason: &str,
    message: &str,
) -> ObjectBucketClaimStatus {
    let value = if value { "True" } else { "False" };
    let last_transition_time = match status.conditions.iter().find(|c| c.type_ == type_) {
        Some(c) if c.status == value => c.last_transition_time.clone(),
        _ => Time(Timestamp::now()),
    };
    status.conditions.retain(|c| c.type_ != type_);
    status.conditions.push(Condition {
        type_: type_.to_owned(),
        status: value.to_owned(),
        reason: reason.to_owned(),
        message: message.to_owned(),
        observed_generation: claim.metadata.generation,
        last_transition_time,
    });
    status
}

/// The condition of `type_`, if the claim has one.
pub(crate) fn condition<'a>(claim: &'a ObjectBucketClaim, type_: &str) -> Option<&'a Condition> {
    claim
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == type_))
}

/// The status to write for a claim in `phase`.
pub(crate) fn desired(
    claim: &ObjectBucketClaim,
    phase: ClaimPhase,
    reason: &str,
    message: &str,
) -> ObjectBucketClaimStatus {
    let current = claim.status.clone().unwrap_or_default();
    let status = if phase == ClaimPhase::Bound {
        "True"
    } else {
        "False"
    };
    let previous = current
        .conditions
        .iter()
        .find(|c| c.type_ == BOUND_CONDITION);
    // The transition time moves only when the condition's status flips.
    let last_transition_time = match previous {
        Some(c) if c.status == status => c.last_transition_time.clone(),
        _ => Time(Timestamp::now()),
    };
    let mut conditions: Vec<Condition> = current
        .conditions
        .iter()
        .filter(|c| c.type_ != BOUND_CONDITION)
        .cloned()
        .collect();
    conditions.push(Condition {
        type_: BOUND_CONDITION.to_owned(),
        status: status.to_owned(),
        reason: reason.to_owned(),
        message: message.to_owned(),
        observed_generation: claim.metadata.generation,
        last_transition_time,
    });
    ObjectBucketClaimStatus {
        phase: Some(phase),
        message: Some(message.to_owned()),
        conditions,
        observed_generation: claim.metadata.generation,
    }
}

/// `status` with the `observedGeneration` the claim's status has now: for
/// a Bound claim whose current spec is not applied (its config refused or
/// pending), which a problem shown meanwhile must not claim to observe.
pub(crate) fn keeping_observed_generation(
    claim: &ObjectBucketClaim,
    mut status: ObjectBucketClaimStatus,
) -> ObjectBucketClaimStatus {
    status.observed_generation = claim.status.as_ref().and_then(|s| s.observed_generation);
    status
}

/// Whether writing `desired` would change anything a reader sees.
pub(crate) fn differs(claim: &ObjectBucketClaim, desired: &ObjectBucketClaimStatus) -> bool {
    let Some(current) = &claim.status else {
        return true;
    };
    let strip = |s: &ObjectBucketClaimStatus| {
        let mut s = s.clone();
        for c in &mut s.conditions {
            c.last_transition_time = Time(Timestamp::UNIX_EPOCH);
        }
        s
    };
    strip(current) != strip(desired)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::obc::api::ObjectBucketClaimSpec;

    #[test]
    fn unchanged_status_is_not_rewritten() {
        let mut claim = ObjectBucketClaim::new("c", ObjectBucketClaimSpec::default());
        claim.metadata.generation = Some(1);
        let bound = desired(&claim, ClaimPhase::Bound, "Provisioned", "ok");
        assert!(differs(&claim, &bound));
        claim.status = Some(bound);
        let again = desired(&claim, ClaimPhase::Bound, "Provisioned", "ok");
        assert!(!differs(&claim, &again));
        let failed = desired(&claim, ClaimPhase::Failed, "Bad", "fix it");
        assert!(differs(&claim, &failed));
        assert_eq!(failed.conditions.len(), 1);
        assert_eq!(failed.conditions[0].status, "False");
    }
}
