//! Whether a live claim's Secret and ConfigMap still hold what the library
//! wrote, without watching their contents.
//!
//! The caches hold only metadata. A child whose `resourceVersion` differs
//! from the last one this process verified (or wrote) is read once: the
//! Secret's data against its [`SECRET_HASH_ANNOTATION`], the ConfigMap's
//! against what the ObjectBucket's endpoint gives. So an edit (which the
//! metadata watch reports, as it changes the version) costs one GET, and a
//! resync of unchanged children costs nothing. After a restart a child is
//! read only if its metadata shows another writer of its data (see
//! [`vouched`]): unchanged children cost no read. A Secret written before the hash (the Go library, older
//! versions) is held to the data this process first read in it. While a credential rotation is asked
//! for or under way, the Secret is read for the access key id it holds.
//!
//! A Secret that must be restored is issued anew by the provisioner as a
//! re-issue for the bucket the claim is bound to ([`reissue_request`]).

use std::collections::HashMap;
use std::sync::Mutex;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::Api;

use super::Context;
use super::plan::{self, Observed};
use crate::core::error::{Error, Result};
use crate::core::ids::{Uid, Version};
use crate::core::provisioner::BucketRequest;
use crate::obc::api::{CONFIG_MAP_HASH_ANNOTATION, SECRET_HASH_ANNOTATION};
use crate::obc::writes;

/// The `resourceVersion` of each child (by UID) last verified or written,
/// and the data hash first seen on each Secret that carries none.
#[derive(Default)]
pub(crate) struct Verified(Mutex<Seen>);

#[derive(Default)]
struct Seen {
    versions: HashMap<Uid, Version>,
    /// Secrets of older writers (the Go library, versions before the hash
    /// annotation): the hash of their data when this process first read
    /// them. What it read then is trusted, as the takeover trusts it; an
    /// edit after that is drift.
    first_hashes: HashMap<Uid, String>,
}

impl Verified {
    fn is_current(&self, meta: &ObjectMeta) -> bool {
        let (Some(uid), Some(rv)) = (&meta.uid, &meta.resource_version) else {
            return false;
        };
        self.lock().versions.get(&Uid::new(uid)) == Some(&Version::new(rv))
    }

    /// Records a child's version as holding what the library wrote.
    pub(crate) fn record(&self, meta: &ObjectMeta) {
        if let (Some(uid), Some(rv)) = (&meta.uid, &meta.resource_version) {
            self.lock().versions.insert(Uid::new(uid), Version::new(rv));
        }
    }

    /// Forgets a child that is gone.
    pub(crate) fn forget(&self, meta: &ObjectMeta) {
        if let Some(uid) = &meta.uid {
            let mut seen = self.lock();
            let uid = Uid::new(uid);
            seen.versions.remove(&uid);
            seen.first_hashes.remove(&uid);
        }
    }

    /// The hash a Secret without the hash annotation is held to: the one
    /// first seen on it (then `hash` is remembered).
    fn first_hash(&self, meta: &ObjectMeta, hash: &str) -> Option<String> {
        let uid = Uid::new(meta.uid.as_deref()?);
        Some(
            self.lock()
                .first_hashes
                .entry(uid)
                .or_insert_with(|| hash.to_owned())
                .clone(),
        )
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Seen> {
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
        let check = needs_check(&meta, ctx, &o.claim)
            && !vouched(&meta, ctx, SECRET_HASH_ANNOTATION, |hash| hash.is_some());
        if wants_key || check {
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
                    if check {
                        let actual = writes::data_hash(s.data.as_ref());
                        let expected = plan::annotation(&s.metadata, SECRET_HASH_ANNOTATION)
                            .map(str::to_owned)
                            .or_else(|| ctx.verified.first_hash(&s.metadata, &actual));
                        if expected.is_some_and(|e| e != actual) {
                            o.secret_drifted = true;
                        } else {
                            ctx.verified.record(&s.metadata);
                        }
                    }
                }
                None => o.secret = None,
            }
        }
    }
    let expected = writes::config_map(&o.claim, &ctx.label, &endpoint)?.data;
    let expected_hash = writes::text_hash(expected.as_ref());
    if let Some(meta) = o.config_map.as_ref().filter(|m| {
        needs_check(m, ctx, &o.claim)
            && !vouched(m, ctx, CONFIG_MAP_HASH_ANNOTATION, |hash| {
                hash == Some(expected_hash.as_str())
            })
    }) {
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

/// The request that restores a Secret of a claim already bound to its
/// bucket: a re-issue ([`BucketRequest::reissue`]), built from what the
/// ObjectBucket recorded, never from what the claim says now. `None` while
/// nothing binds the bucket to the claim yet (no ObjectBucket, a
/// reservation, one of another claim, one being deleted, one without a
/// bucket), or when the class's parameters are known neither from the
/// ObjectBucket nor from the class: then the claim gets a new claim's
/// request.
pub(crate) fn reissue_request(o: &Observed) -> Option<BucketRequest> {
    let ob =
        o.ob.as_ref()
            .filter(|ob| plan::claim_ref_matches(ob, &o.claim))
            .filter(|ob| !plan::is_reserved(ob) && ob.metadata.deletion_timestamp.is_none())
            .filter(|ob| ob.bucket_name().is_some())?;
    let parameters = plan::records::parameters_for(Some(ob), &o.class)?;
    Some(BucketRequest::reissue_for_bound_claim(
        &o.claim,
        ob,
        parameters,
        plan::records::applied_config(ob),
    ))
}

fn access_key_id(secret: &Secret) -> Option<String> {
    let value = secret
        .data
        .as_ref()?
        .get(crate::obc::api::secret_keys::ACCESS_KEY_ID)?;
    String::from_utf8(value.0.clone()).ok()
}

/// Whether the watched metadata alone shows that a child holds what the
/// library wrote; then it counts as verified at this version, unread. The
/// watch keeps, of its managed fields, only the other writers of its data
/// and hash annotations (`obc::wiring::caches`): none may be left, and its
/// hash annotation `hash_key` must satisfy `hash_ok`. So after a restart
/// an unchanged child costs no read; one an older writer made (the Go
/// library, versions before the hashes) or someone edited is read once.
///
/// A writer that forges the library's field manager name hides its edit
/// from this check until the next one; only a tenant of the claim's
/// namespace can write there, and the child's content is theirs: the keys
/// still reach only the claim's bucket.
fn vouched<P>(
    meta: &ObjectMeta,
    ctx: &Context<P>,
    hash_key: &str,
    hash_ok: impl Fn(Option<&str>) -> bool,
) -> bool {
    let others = meta.managed_fields.as_ref().map(Vec::len);
    let vouched = others == Some(0) && hash_ok(plan::annotation(meta, hash_key));
    if vouched {
        ctx.verified.record(meta);
    }
    vouched
}

/// An adopted child of this claim, not being deleted, not verified at its
/// current version.
fn needs_check<P>(
    meta: &ObjectMeta,
    ctx: &Context<P>,
    claim: &crate::obc::api::ObjectBucketClaim,
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
