//! The scenarios, one file per rule; [`run`] picks one.

mod abandon;
mod data;
mod gone;
mod ownership;
mod reissue;
mod repeat;
mod scope;
mod settings;
mod shared;
mod teardown;

use super::Scenario;
use super::ctx::{Cleanup, Ctx, Log, Step};
use abandon::Target;

/// Runs `scenario`, noting what happened in `log` and what to undo in
/// `undo`; `Ok` carries a summary.
pub(crate) async fn run(
    ctx: &Ctx,
    scenario: Scenario,
    undo: &mut Cleanup,
    log: &mut Log,
) -> Step<String> {
    match scenario {
        Scenario::ProvisionRepeat => repeat::provision(ctx, undo, log).await,
        Scenario::ProvisionAbandoned => abandon::run(ctx, Target::Provision, log).await,
        Scenario::GrantRepeat => repeat::grant(ctx, undo, log).await,
        Scenario::RotateRepeat => repeat::rotate(ctx, undo, log).await,
        Scenario::RotateAbandoned => abandon::run(ctx, Target::Rotate, log).await,
        Scenario::UpdateRepeat => repeat::update(ctx, undo, log).await,
        Scenario::DeleteRepeat => gone::delete_repeat(ctx, undo, log).await,
        Scenario::DeleteAbandoned => abandon::run(ctx, Target::Delete, log).await,
        Scenario::DeleteNeverProvisioned => gone::delete_never_provisioned(ctx, undo, log).await,
        Scenario::RevokeRepeat => gone::revoke_repeat(ctx, undo, log).await,
        Scenario::RevokeNeverGranted => gone::revoke_never_granted(ctx, undo, log).await,
        Scenario::OwnershipOtherClaimsBucket => {
            ownership::other_claims_bucket(ctx, undo, log).await
        }
        Scenario::OwnershipForeignBucket => ownership::foreign_bucket(ctx, undo, log).await,
        Scenario::OwnershipGrantMissingBucket => {
            ownership::grant_missing_bucket(ctx, undo, log).await
        }
        Scenario::ScopeOtherClaimsBucket => scope::other_claims_bucket(ctx, undo, log).await,
        Scenario::ScopeReadOnly => scope::read_only(ctx, undo, log).await,
        Scenario::TeardownDelete => teardown::delete(ctx, undo, log).await,
        Scenario::TeardownRetain => teardown::retain(ctx, undo, log).await,
        Scenario::ProvisionReissue => reissue::provision(ctx, undo, log).await,
        Scenario::GrantSharedBucket => shared::grants(ctx, undo, log).await,
        Scenario::TeardownDeleteWithData => data::delete(ctx, undo, log).await,
        Scenario::TeardownRetainWithData => data::retain(ctx, undo, log).await,
        Scenario::SettingsApplied => settings::applied(ctx, undo, log).await,
    }
}
