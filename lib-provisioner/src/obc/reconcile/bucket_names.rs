//! Greenfield bucket names held through records the apiserver arbitrates.
//!
//! The cache-based check ([`Context::name_holder`]) runs before a claim is
//! prepared and sees only what the watches delivered: two claims created
//! together both pass it. So before a greenfield claim's ObjectBucket is
//! reserved, the claim creates a `coordination.k8s.io/v1` Lease named after
//! the bucket ([`record_name`]) in the provisioner's own namespace (the
//! controller's configuration, never a claim's): a create only one claim
//! can win. The Lease names its holder (`holderIdentity`: the claim's UID,
//! and the claim's `namespace/name` in an annotation) and lives as long as
//! the claim: its deletion releases it after the teardown.
//!
//! A holder that died without releasing (its finalizer stripped while the
//! provisioner was down) must not keep the name forever: a Lease whose
//! holder claim is gone, has another UID, or asks for another bucket (and
//! has no ObjectBucket naming this one) is deleted, guarded by its
//! `resourceVersion`, and taken.

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;

use super::Context;
use super::plan::{self, HOLDER_CLAIM_ANNOTATION, record_name};
use super::read::get_opt;
use crate::core::error::{Error, Result};
use crate::obc::api::{ObjectBucket, ObjectBucketClaim};
use crate::obc::writes;

/// Whether the claim got the name.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Holding {
    /// This claim holds it (now or since an earlier pass).
    Ours,
    /// Another live claim holds it; described for the message.
    Taken(String),
}

/// Attempts at taking a record whose holder is gone before the pass gives
/// up on a conflict (another claim took it between our reads).
const ATTEMPTS: usize = 3;

/// Takes bucket name `bucket` for `claim`, in namespace `ns`.
pub(crate) async fn hold<P>(
    ctx: &Context<P>,
    ns: &str,
    bucket: &str,
    claim: &ObjectBucketClaim,
) -> Result<Holding> {
    let api: Api<Lease> = Api::namespaced(ctx.client.clone(), ns);
    for _ in 0..ATTEMPTS {
        if writes::create_name_record(&ctx.client, ns, bucket, claim, &ctx.label).await? {
            return Ok(Holding::Ours);
        }
        let Some(record) =
            get_opt(&api, &record_name(bucket), "read the bucket name's Lease").await?
        else {
            continue; // released meanwhile: create again
        };
        if holder_uid(&record) == claim.metadata.uid.as_deref() {
            return Ok(Holding::Ours);
        }
        if let Some(holder) = live_holder(ctx, &record, bucket).await? {
            return Ok(Holding::Taken(holder));
        }
        writes::delete_name_record(&ctx.client, ns, &record).await?;
    }
    Err(Error::Conflict {
        action: "take the bucket name's Lease",
    })
}

/// Releases bucket name `bucket` if `claim` holds it; gone or another's
/// record: nothing to do.
pub(crate) async fn release<P>(
    ctx: &Context<P>,
    ns: &str,
    bucket: &str,
    claim: &ObjectBucketClaim,
) -> Result<()> {
    let api: Api<Lease> = Api::namespaced(ctx.client.clone(), ns);
    match get_opt(&api, &record_name(bucket), "read the bucket name's Lease").await? {
        Some(record) if holder_uid(&record) == claim.metadata.uid.as_deref() => {
            writes::delete_name_record(&ctx.client, ns, &record).await
        }
        _ => Ok(()),
    }
}

fn holder_uid(record: &Lease) -> Option<&str> {
    record
        .spec
        .as_ref()
        .and_then(|s| s.holder_identity.as_deref())
        .filter(|u| !u.is_empty())
}

/// The record's holder, described, if it is a live claim that still asks
/// for `bucket` or whose ObjectBucket names it; `None` if the record is
/// stale and may be taken.
async fn live_holder<P>(ctx: &Context<P>, record: &Lease, bucket: &str) -> Result<Option<String>> {
    let Some((ns, name)) = plan::annotation(&record.metadata, HOLDER_CLAIM_ANNOTATION)
        .and_then(|claim| claim.split_once('/'))
    else {
        return Ok(None);
    };
    let api: Api<ObjectBucketClaim> = Api::namespaced(ctx.client.clone(), ns);
    let Some(holder) = get_opt(&api, name, "read the claim holding a bucket name")
        .await?
        .filter(|c| c.metadata.uid.as_deref() == holder_uid(record))
    else {
        return Ok(None);
    };
    let described = format!("claim {ns}/{name}");
    if plan::fixed_bucket_name(&holder) == Some(bucket) {
        return Ok(Some(described));
    }
    let ob = get_opt(
        &Api::<ObjectBucket>::all(ctx.client.clone()),
        &plan::object_bucket_name(&holder),
        "read the ObjectBucket of the claim holding a bucket name",
    )
    .await?;
    let names_it = ob.is_some_and(|ob| {
        ob.bucket_name() == Some(bucket) && plan::claim_ref_matches(&ob, &holder)
    });
    Ok(names_it.then_some(described))
}
