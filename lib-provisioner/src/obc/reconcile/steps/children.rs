//! The claim's Secret and ConfigMap: written, taken over, released.

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::events::EventType;

use crate::core::error::{Error, Result};
use crate::core::failpoint;
use crate::core::provisioner::Provisioner;
use crate::obc::reconcile::Context;
use crate::obc::reconcile::plan::Observed;
use crate::obc::reconcile::steps::Flow;
use crate::obc::writes;

/// Creates the Secret and the ConfigMap side by side: a new claim's path
/// waits for one round trip instead of two. What either write made is
/// recorded even when the other failed, so the next pass writes only what
/// is missing.
pub(super) async fn write_children<P: Provisioner>(
    o: &mut Observed,
    ctx: &Context<P>,
) -> Result<Flow> {
    let (secret, key_id) = desired_secret(o, ctx)?;
    let config_map = desired_config_map(o, ctx)?;
    let (secret, config_map) = tokio::join!(
        writes::write_child(&ctx.client, &o.claim, secret),
        writes::write_child(&ctx.client, &o.claim, config_map),
    );
    let secret = secret.map(|written| secret_written(o, ctx, written, key_id));
    let config_map = config_map.map(|written| config_map_written(o, ctx, written));
    secret?;
    config_map?;
    failpoint::hit("after-secret-written");
    failpoint::hit("after-config-map-written");
    Ok(Flow::Continue)
}

/// Creates the Secret, or makes its data match the obtained access.
pub(super) async fn write_secret<P: Provisioner>(
    o: &mut Observed,
    ctx: &Context<P>,
) -> Result<Flow> {
    let (secret, key_id) = desired_secret(o, ctx)?;
    let written = writes::write_child(&ctx.client, &o.claim, secret).await?;
    secret_written(o, ctx, written, key_id);
    failpoint::hit("after-secret-written");
    if std::mem::take(&mut o.secret_drifted) {
        restored(
            o,
            ctx,
            "Secret",
            "its data had been changed; it holds fresh credentials again",
        )
        .await;
    }
    Ok(Flow::Continue)
}

/// The Secret the obtained access asks for, and its access key id.
fn desired_secret<P: Provisioner>(o: &Observed, ctx: &Context<P>) -> Result<(Secret, String)> {
    let access = o
        .access
        .as_ref()
        .ok_or(Error::MissingField("bucket access"))?;
    let secret = writes::secret(&o.claim, &ctx.label, &access.credentials)?;
    Ok((secret, access.credentials.access_key_id.clone()))
}

/// Records a written Secret.
fn secret_written<P: Provisioner>(
    o: &mut Observed,
    ctx: &Context<P>,
    written: ObjectMeta,
    key_id: String,
) {
    ctx.verified.record(&written);
    o.secret = Some(written);
    o.secret_key_id = Some(key_id);
    o.secret_synced = true;
}

/// Gives an existing Secret of the claim our label, and takes our finalizer
/// off it (older versions put it there).
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
    let config_map = desired_config_map(o, ctx)?;
    let written = writes::write_child(&ctx.client, &o.claim, config_map).await?;
    config_map_written(o, ctx, written);
    failpoint::hit("after-config-map-written");
    if std::mem::take(&mut o.config_map_drifted) {
        restored(
            o,
            ctx,
            "ConfigMap",
            "its data had been changed; it is the ObjectBucket's endpoint again",
        )
        .await;
    }
    Ok(Flow::Continue)
}

/// The ConfigMap the ObjectBucket's endpoint asks for.
fn desired_config_map<P: Provisioner>(o: &Observed, ctx: &Context<P>) -> Result<ConfigMap> {
    let endpoint =
        o.ob.as_ref()
            .and_then(|ob| ob.spec.endpoint.clone())
            .ok_or(Error::MissingField("ObjectBucket endpoint"))?;
    writes::config_map(&o.claim, &ctx.label, &endpoint)
}

/// Records a written ConfigMap.
fn config_map_written<P: Provisioner>(o: &mut Observed, ctx: &Context<P>, written: ObjectMeta) {
    ctx.verified.record(&written);
    o.config_map = Some(written);
    o.config_map_synced = true;
}

/// Gives an existing ConfigMap of the claim our label, and takes our
/// finalizer off it (older versions put it there).
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

/// Removes the finalizer an older version put on the Secret; the garbage
/// collector deletes it once the claim is gone.
pub(super) async fn release_secret<P: Provisioner>(
    o: &mut Observed,
    ctx: &Context<P>,
) -> Result<Flow> {
    let meta = o.secret.take().ok_or(Error::MissingField("Secret"))?;
    writes::release_child::<Secret>(&ctx.client, &meta).await?;
    ctx.verified.forget(&meta);
    failpoint::hit("after-secret-released");
    if o.claim.metadata.deletion_timestamp.is_none() {
        restored(
            o,
            ctx,
            "Secret",
            "it was deleted while the claim lives; it is released and written again",
        )
        .await;
    }
    Ok(Flow::Continue)
}

/// Removes the finalizer an older version put on the ConfigMap; the garbage
/// collector deletes it once the claim is gone.
pub(super) async fn release_config_map<P: Provisioner>(
    o: &mut Observed,
    ctx: &Context<P>,
) -> Result<Flow> {
    let meta = o
        .config_map
        .take()
        .ok_or(Error::MissingField("ConfigMap"))?;
    writes::release_child::<ConfigMap>(&ctx.client, &meta).await?;
    ctx.verified.forget(&meta);
    failpoint::hit("after-config-map-released");
    if o.claim.metadata.deletion_timestamp.is_none() {
        restored(
            o,
            ctx,
            "ConfigMap",
            "it was deleted while the claim lives; it is released and written again",
        )
        .await;
    }
    Ok(Flow::Continue)
}

/// Tells the claim's owner that a child was repaired.
async fn restored<P: Provisioner>(o: &Observed, ctx: &Context<P>, kind: &str, what: &str) {
    let name = o.claim.metadata.name.as_deref().unwrap_or_default();
    ctx.event(
        &o.claim,
        EventType::Warning,
        &format!("{kind}Repaired"),
        "Repair",
        format!("{kind} {name:?}: {what}"),
    )
    .await;
}
