//! How a pass reads from the API (not its cache): one object by name, and
//! the pass's claim afresh.

use kube::api::Api;
use kube::{Resource, ResourceExt};

use super::Context;
use super::plan::Observed;
use crate::core::error::{Error, Result};
use crate::obc::api::ObjectBucketClaim;

/// GET that maps 404 to `None` and errors to [`Error::Kube`] naming `action`.
pub(crate) async fn get_opt<K>(api: &Api<K>, name: &str, action: &'static str) -> Result<Option<K>>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.get_opt(name).await.map_err(Error::kube(action))
}

/// Replaces the pass's copy of the claim with the API's. `false` if the
/// claim is gone, or is another claim of the same name now.
pub(crate) async fn refresh_claim<P>(o: &mut Observed, ctx: &Context<P>) -> Result<bool> {
    match fresh_claim(o, ctx).await? {
        Some(fresh) => {
            o.claim = fresh;
            Ok(true)
        }
        None => Ok(false),
    }
}

/// The claim as the API has it now, if it is still the pass's claim.
pub(crate) async fn fresh_claim<P>(
    o: &Observed,
    ctx: &Context<P>,
) -> Result<Option<ObjectBucketClaim>> {
    let api: Api<ObjectBucketClaim> = Api::namespaced(
        ctx.client.clone(),
        o.claim.metadata.namespace.as_deref().unwrap_or_default(),
    );
    let found = api
        .get_opt(&o.claim.name_any())
        .await
        .map_err(Error::kube("re-read the claim"))?;
    Ok(found.filter(|fresh| fresh.metadata.uid == o.claim.metadata.uid))
}

/// `namespace/name`, for logs.
pub(crate) fn claim_key(claim: &ObjectBucketClaim) -> String {
    format!(
        "{}/{}",
        claim.metadata.namespace.as_deref().unwrap_or_default(),
        claim.metadata.name.as_deref().unwrap_or_default()
    )
}
