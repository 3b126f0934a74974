//! The claim's Secret and ConfigMap: written, taken over, released.

use k8s_openapi::api::core::v1::{ConfigMap, Secret};

use crate::error::{Error, Result};
use crate::failpoint;
use crate::provisioner::Provisioner;
use crate::reconcile::Context;
use crate::reconcile::claim::Flow;
use crate::reconcile::plan::Observed;
use crate::writes;

/// Creates the Secret, or makes its data match the obtained access.
pub(super) async fn write_secret<P: Provisioner>(
    o: &mut Observed,
    ctx: &Context<P>,
) -> Result<Flow> {
    let access = o
        .access
        .as_ref()
        .ok_or(Error::MissingField("bucket access"))?;
    let secret = writes::secret(&o.claim, &ctx.label, &access.credentials)?;
    o.secret = Some(writes::write_child(&ctx.client, &o.claim, secret).await?);
    o.secret_synced = true;
    failpoint::hit("after-secret-written");
    Ok(Flow::Continue)
}

/// Gives an existing Secret of the claim our label and finalizer.
pub(super) async fn adopt_secret<P: Provisioner>(
    o: &mut Observed,
    ctx: &Context<P>,
) -> Result<Flow> {
    let meta = o.secret.as_ref().ok_or(Error::MissingField("Secret"))?;
    o.secret = Some(writes::adopt_child::<Secret>(&ctx.client, meta, &ctx.label).await?);
    Ok(Flow::Continue)
}

/// Creates the ConfigMap, or makes it match the ObjectBucket's endpoint.
pub(super) async fn write_config_map<P: Provisioner>(
    o: &mut Observed,
    ctx: &Context<P>,
) -> Result<Flow> {
    let endpoint =
        o.ob.as_ref()
            .and_then(|ob| ob.spec.endpoint.clone())
            .ok_or(Error::MissingField("ObjectBucket endpoint"))?;
    let cm = writes::config_map(&o.claim, &ctx.label, &endpoint)?;
    o.config_map = Some(writes::write_child(&ctx.client, &o.claim, cm).await?);
    o.config_map_synced = true;
    failpoint::hit("after-config-map-written");
    Ok(Flow::Continue)
}

/// Gives an existing ConfigMap of the claim our label and finalizer.
pub(super) async fn adopt_config_map<P: Provisioner>(
    o: &mut Observed,
    ctx: &Context<P>,
) -> Result<Flow> {
    let meta = o
        .config_map
        .as_ref()
        .ok_or(Error::MissingField("ConfigMap"))?;
    o.config_map = Some(writes::adopt_child::<ConfigMap>(&ctx.client, meta, &ctx.label).await?);
    Ok(Flow::Continue)
}

/// Removes the Secret's finalizer and deletes it.
pub(super) async fn release_secret<P: Provisioner>(
    o: &mut Observed,
    ctx: &Context<P>,
) -> Result<Flow> {
    let meta = o.secret.take().ok_or(Error::MissingField("Secret"))?;
    writes::release_child::<Secret>(&ctx.client, &meta).await?;
    failpoint::hit("after-secret-released");
    Ok(Flow::Continue)
}

/// Removes the ConfigMap's finalizer and deletes it.
pub(super) async fn release_config_map<P: Provisioner>(
    o: &mut Observed,
    ctx: &Context<P>,
) -> Result<Flow> {
    let meta = o
        .config_map
        .take()
        .ok_or(Error::MissingField("ConfigMap"))?;
    writes::release_child::<ConfigMap>(&ctx.client, &meta).await?;
    failpoint::hit("after-config-map-released");
    Ok(Flow::Continue)
}
