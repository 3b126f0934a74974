//! The BucketAccess reconcile: whichever role holds the BucketAccess takes
//! one step at a time ([`owner`](super::owner) is asked again after each,
//! since the hand-off and the cleanup move it between roles).

use std::sync::Arc;

use kube::api::Api;
use kube::runtime::controller::Action;

use super::grant_steps::Memory;
use super::owner::{Owner, confirmed_owner};
use super::{bind_steps, grant_steps};
use crate::core::error::Error;
use crate::core::provisioner::Provisioner;
use crate::cosi::api::BucketAccess;
use crate::cosi::context::CosiContext;
use crate::cosi::pass::{self, Pass, Progress};

/// Reconciles one BucketAccess, in whichever role this process has for it.
pub(crate) async fn reconcile<P: Provisioner>(
    access: Arc<BucketAccess>,
    ctx: Arc<CosiContext<P>>,
) -> Result<Action, Error> {
    pass::run::<P, AccessPass>(&access, &ctx).await
}

/// A BucketAccess's pass: what the driver role keeps between its steps.
#[derive(Default)]
struct AccessPass(Memory);

impl<P: Provisioner> Pass<P> for AccessPass {
    type Object = BucketAccess;
    const READ: &'static str = "read the BucketAccess";
    const SHOW: &'static str = "show the BucketAccess's error";

    fn api(ctx: &CosiContext<P>, access: &BucketAccess) -> Result<Api<BucketAccess>, Error> {
        pass::namespaced(ctx, access)
    }

    /// A round of the role this process has for the BucketAccess now.
    async fn round(
        &mut self,
        ctx: &CosiContext<P>,
        api: &Api<BucketAccess>,
        current: &BucketAccess,
    ) -> Result<Progress, Error> {
        let memory = &mut self.0;
        match confirmed_owner(current, &ctx.driver, memory.revoked()) {
            Owner::Binding if ctx.binding => bind_steps::round(ctx, api, current).await,
            Owner::Driver(d) if d == ctx.driver => {
                grant_steps::round(ctx, api, current, memory).await
            }
            _ => Ok(Progress::Elsewhere),
        }
    }
}
