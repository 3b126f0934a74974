//! Whether a live claim's Secret and ConfigMap still hold what the library
//! wrote, without watching their contents.
//!
//! The caches hold only metadata. A child whose `resourceVersion` differs
//! from the last one this process verified (or wrote) is read once: the
//! Secret's data against its [`SECRET_HASH_ANNOTATION`], the ConfigMap's
//! against what the ObjectBucket's endpoint gives. So an edit (which the
//! metadata watch reports, as it changes the version) costs one GET, and a
//! resync of unchanged children costs nothing. After a restart every child
//! is read once. Secrets written by versions before the hash are not
//! checked until their next write. While a credential rotation is asked
//! for or under way, the Secret is read for the access key id it holds.

use std::collections::HashMap;
use std::sync::Mutex;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::Api;

use super::Context;
use super::plan::{self, Observed};
use crate::api::SECRET_HASH_ANNOTATION;
use crate::error::{Error, Result};
use crate::writes;

/// The `resourceVersion` of each child (by UID) last verified or written.
#[derive(Default)]
pub(crate) struct Verified(Mutex<HashMap<String, String>>);

impl Verified {
    fn is_current(&self, meta: &ObjectMeta) -> bool {
        let (Some(uid), Some(rv)) = (&meta.uid, &meta.resource_version) else {
            return false;
        };
        self.lock().get(uid) == Some(rv)
    }

    /// Records a child's version as holding what the library wrote.
    pub(crate) fn record(&self, meta: &ObjectMeta) {
        if let (Some(uid), Some(rv)) = (&meta.uid, &meta.resource_version) {
            self.lock().insert(uid.clone(), rv.clone());
        }
    }

    /// Forgets a child that is gone.
    pub(crate) fn forget(&self, meta: &ObjectMeta) {
        if let Some(uid) = &meta.uid {
            self.lock().remove(uid);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Sets `secret_drifted` and `config_map_drifted` for a live, bound claim.
pub(super) async fn check<P>(o: &mut Observed, ctx: &Context<P>) -> Result<()> {
    if o.claim.metadata.deletion_timestamp.is_some() {
        return Ok(());
    }
    let Some(endpoint) =
        o.ob.as_ref()
            .filter(|ob| plan::claim_ref_matches(ob, &o.claim) && !plan::is_reserved(ob))
            .and_then(|ob| ob.spec.endpoint.clone())
    else {
        return Ok(());
    };
    // A rotation decides on the access key id the Secret holds.
    let wants_key =
        o.ob.as_ref()
            .is_some_and(|ob| plan::rotation::in_progress(o, ob));
    let secret = o
        .secret
        .clone()
        .filter(|m| m.deletion_timestamp.is_none() && plan::owned_by(m, &o.claim));
    if let Some(meta) = secret {
        let expected = plan::annotation(&meta, SECRET_HASH_ANNOTATION)
            .filter(|_| needs_check(&meta, ctx, &o.claim))
            .map(str::to_owned);
        if wants_key || expected.is_some() {
            let (ns, name) = names(&meta)?;
            match Api::<Secret>::namespaced(ctx.client.clone(), ns)
                .get_opt(name)
                .await
                .map_err(Error::kube("read the claim's Secret"))?
            {
                Some(s) => {
                    if wants_key {
                        o.secret_key_id = access_key_id(&s);
                    }
                    match expected {
                        Some(e) if writes::data_hash(s.data.as_ref()) != e => {
                            o.secret_drifted = true;
                        }
                        Some(_) => ctx.verified.record(&s.metadata),
                        None => {}
                    }
                }
                None => o.secret = None,
            }
        }
    }
    if let Some(meta) = o
        .config_map
        .as_ref()
        .filter(|m| needs_check(m, ctx, &o.claim))
    {
        let expected = writes::config_map(&o.claim, &ctx.label, &endpoint)?.data;
        let (ns, name) = names(meta)?;
        match Api::<ConfigMap>::namespaced(ctx.client.clone(), ns)
            .get_opt(name)
            .await
            .map_err(Error::kube("read the claim's ConfigMap"))?
        {
            Some(cm) if cm.data == expected => ctx.verified.record(&cm.metadata),
            Some(_) => o.config_map_drifted = true,
            None => o.config_map = None,
        }
    }
    Ok(())
}

fn access_key_id(secret: &Secret) -> Option<String> {
    let value = secret
        .data
        .as_ref()?
        .get(crate::api::secret_keys::ACCESS_KEY_ID)?;
    String::from_utf8(value.0.clone()).ok()
}

/// An adopted child of this claim, not being deleted, not verified at its
/// current version.
fn needs_check<P>(
    meta: &ObjectMeta,
    ctx: &Context<P>,
    claim: &crate::api::ObjectBucketClaim,
) -> bool {
    meta.deletion_timestamp.is_none()
        && plan::owned_by(meta, claim)
        && plan::has_label(meta, &ctx.label)
        && !ctx.verified.is_current(meta)
}

fn names(meta: &ObjectMeta) -> Result<(&str, &str)> {
    Ok((
        meta.namespace
            .as_deref()
            .ok_or(Error::MissingField("namespace"))?,
        meta.name.as_deref().ok_or(Error::MissingField("name"))?,
    ))
}
