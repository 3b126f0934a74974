//! Every Kubernetes write the library makes, one function each.
//!
//! Each write is idempotent on its own: creates treat "already exists" as a
//! reason to read and adopt, deletes treat "not found" as done, and metadata
//! patches carry the `resourceVersion` they were computed from, so a
//! concurrent writer causes a 409 (re-read and retry), never a lost update.
//! Claim writes answered 404 return [`Error::ClaimGone`].

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Api, DeleteParams, Patch};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;

use crate::core::error::{Error, Result, is_status};
use crate::core::provisioner::BucketAccess;
use crate::obc::api::{
    ACCESS_KEY_ANNOTATION, BUCKET_ORIGIN_ANNOTATION, BucketOrigin, BucketPhase, Endpoint,
    FINALIZER, GENERATED_NAME_ANNOTATION, OBJECT_BUCKET_NAME_ANNOTATION, ObjectBucket,
    ObjectBucketClaim, ObjectBucketClaimStatus, ObjectBucketSpec, ObjectBucketStatus,
    PROVISIONER_LABEL, RESERVED_ANNOTATION, ReclaimPolicy,
};

mod children;

pub(crate) use crate::core::writes::{params, post_params};

pub(crate) use children::{
    Child, adopt_child, config_map, data_hash, release_child, secret, text_hash, write_child,
};

fn claim_api(client: &Client, claim: &ObjectBucketClaim) -> Result<Api<ObjectBucketClaim>> {
    let ns = claim
        .namespace()
        .ok_or(Error::MissingField("claim namespace"))?;
    Ok(Api::namespaced(client.clone(), &ns))
}

/// The owner reference that makes a child garbage-collected with its claim.
pub(crate) fn owner_reference(claim: &ObjectBucketClaim) -> Result<OwnerReference> {
    match (&claim.metadata.name, &claim.metadata.uid) {
        (Some(name), Some(uid)) => Ok(claim_owner_reference(name.clone(), uid.clone())),
        _ => Err(Error::MissingField("claim uid")),
    }
}

/// The owner reference the library writes on a child of the claim `name`
/// with UID `uid`: the claim as its controller, as kube's
/// `controller_owner_ref` makes it. The child cache keeps a child that
/// carries exactly this as the UID alone (`CachedChild`).
pub(crate) fn claim_owner_reference(name: String, uid: String) -> OwnerReference {
    OwnerReference {
        api_version: ObjectBucketClaim::api_version(&()).into_owned(),
        kind: ObjectBucketClaim::kind(&()).into_owned(),
        name,
        uid,
        controller: Some(true),
        block_owner_deletion: None,
    }
}

/// Metadata patch that adds `FINALIZER` and the label (and optionally an
/// annotation), guarded by `resourceVersion`.
fn adopt_patch(
    meta: &ObjectMeta,
    label: &str,
    annotations: BTreeMap<&str, &str>,
) -> serde_json::Value {
    let mut finalizers = meta.finalizers.clone().unwrap_or_default();
    if !finalizers.iter().any(|f| f == FINALIZER) {
        finalizers.push(FINALIZER.to_owned());
    }
    let mut patch = json!({
        "metadata": {
            "resourceVersion": meta.resource_version,
            "finalizers": finalizers,
            "labels": { PROVISIONER_LABEL: label },
        }
    });
    if !annotations.is_empty() {
        patch["metadata"]["annotations"] = json!(annotations);
    }
    patch
}

/// Metadata patch that removes `FINALIZER`, guarded by `resourceVersion`.
fn release_patch(meta: &ObjectMeta) -> serde_json::Value {
    let finalizers: Vec<String> = meta
        .finalizers
        .iter()
        .flatten()
        .filter(|f| *f != FINALIZER)
        .cloned()
        .collect();
    json!({ "metadata": { "resourceVersion": meta.resource_version, "finalizers": finalizers } })
}

/// Adds finalizer and label to the claim and persists a generated bucket
/// name and `spec.objectBucketName`, those given, in one patch guarded by
/// `resourceVersion`.
pub(crate) async fn prepare_claim(
    client: &Client,
    claim: &ObjectBucketClaim,
    label: &str,
    generated_name: Option<&str>,
    bind_to: Option<&str>,
) -> Result<ObjectBucketClaim> {
    let annotations = generated_name
        .map(|n| BTreeMap::from([(GENERATED_NAME_ANNOTATION, n)]))
        .unwrap_or_default();
    let mut patch = adopt_patch(&claim.metadata, label, annotations);
    if let Some(ob_name) = bind_to {
        patch["spec"] = json!({ "objectBucketName": ob_name });
    }
    claim_api(client, claim)?
        .patch(&claim.name_any(), &params(), &Patch::Merge(patch))
        .await
        .map_err(Error::claim("add the finalizer to the claim"))
}

/// Records `spec.objectBucketName` on a claim prepared without it.
pub(crate) async fn bind_claim(
    client: &Client,
    claim: &ObjectBucketClaim,
    ob_name: &str,
) -> Result<ObjectBucketClaim> {
    let patch = json!({
        "metadata": { "resourceVersion": claim.metadata.resource_version },
        "spec": { "objectBucketName": ob_name }
    });
    claim_api(client, claim)?
        .patch(&claim.name_any(), &params(), &Patch::Merge(patch))
        .await
        .map_err(Error::claim("record spec.objectBucketName on the claim"))
}

/// Writes the claim's status through the status subresource; falls back to
/// the main resource for CRDs that have no status subresource.
pub(crate) async fn write_claim_status(
    client: &Client,
    claim: &ObjectBucketClaim,
    status: &ObjectBucketClaimStatus,
) -> Result<ObjectBucketClaim> {
    let api = claim_api(client, claim)?;
    let patch = Patch::Merge(json!({ "status": status }));
    match api.patch_status(&claim.name_any(), &params(), &patch).await {
        Err(e) if is_status(&e, 404) => api
            .patch(&claim.name_any(), &params(), &patch)
            .await
            .map_err(Error::claim("write the claim's status")),
        other => other.map_err(Error::claim("write the claim's status")),
    }
}

/// Removes the claim's finalizer: the last write of a deletion.
pub(crate) async fn remove_claim_finalizer(
    client: &Client,
    claim: &ObjectBucketClaim,
) -> Result<()> {
    match claim_api(client, claim)?
        .patch(
            &claim.name_any(),
            &params(),
            &Patch::Merge(release_patch(&claim.metadata)),
        )
        .await
    {
        Err(e) if is_status(&e, 404) => Ok(()),
        other => other
            .map(|_| ())
            .map_err(Error::kube("remove the claim's finalizer")),
    }
}

/// Records on a claim the ObjectBucket name chosen for it, guarded by the
/// claim's `resourceVersion`.
pub(crate) async fn name_object_bucket(
    client: &Client,
    claim: &ObjectBucketClaim,
    name: &str,
) -> Result<ObjectBucketClaim> {
    let patch = json!({
        "metadata": {
            "resourceVersion": claim.metadata.resource_version,
            "annotations": { OBJECT_BUCKET_NAME_ANNOTATION: name },
        }
    });
    claim_api(client, claim)?
        .patch(&claim.name_any(), &params(), &Patch::Merge(patch))
        .await
        .map_err(Error::claim("record the claim's ObjectBucket name"))
}

/// What an ObjectBucket is created from.
pub(crate) struct NewObjectBucket<'a> {
    pub name: &'a str,
    pub claim: &'a ObjectBucketClaim,
    pub class_name: &'a str,
    pub bucket_name: &'a str,
    pub origin: BucketOrigin,
    pub reclaim_policy: ReclaimPolicy,
    /// The provisioner's answer; `None` creates the ObjectBucket reserved:
    /// bound to its claim and naming its bucket, without an endpoint yet.
    pub access: Option<&'a BucketAccess>,
    pub label: &'a str,
    /// Annotations recording what later decisions need (class parameters,
    /// applied config).
    pub records: crate::obc::reconcile::plan::records::Records,
}

/// Creates the ObjectBucket, or returns the one that exists already (the
/// caller checks whom it is bound to).
pub(crate) async fn create_object_bucket(
    client: &Client,
    new: NewObjectBucket<'_>,
) -> Result<ObjectBucket> {
    let api: Api<ObjectBucket> = Api::all(client.clone());
    let mut ob = ObjectBucket::new(
        new.name,
        ObjectBucketSpec {
            storage_class_name: new.class_name.to_owned(),
            reclaim_policy: new.reclaim_policy,
            claim_ref: Some(claim_ref(new.claim)),
            endpoint: Some(Endpoint {
                bucket_name: new.bucket_name.to_owned(),
                ..new.access.map(|a| a.endpoint.clone()).unwrap_or_default()
            }),
            additional_state: new.access.map(|a| a.additional_state.clone()),
            authentication: None,
        },
    );
    ob.metadata.finalizers = Some(vec![FINALIZER.to_owned()]);
    ob.metadata.labels = Some(BTreeMap::from([(
        PROVISIONER_LABEL.to_owned(),
        new.label.to_owned(),
    )]));
    let mut annotations = BTreeMap::from([(
        BUCKET_ORIGIN_ANNOTATION.to_owned(),
        new.origin.as_str().to_owned(),
    )]);
    match new.access {
        // The key the Secret is about to get: the record a rotation reads.
        Some(access) => annotations.insert(
            ACCESS_KEY_ANNOTATION.to_owned(),
            access.credentials.access_key_id.clone(),
        ),
        None => annotations.insert(RESERVED_ANNOTATION.to_owned(), "true".to_owned()),
    };
    for (key, value) in new.records {
        annotations.insert(key.to_owned(), value);
    }
    ob.metadata.annotations = Some(annotations);
    match api.create(&post_params(), &ob).await {
        Err(e) if is_status(&e, 409) => api
            .get(new.name)
            .await
            .map_err(Error::kube("read the existing ObjectBucket")),
        other => other.map_err(Error::kube("create the ObjectBucket")),
    }
}

/// Records the provisioner's endpoint and state on a reserved ObjectBucket
/// and lifts the reservation, in one patch.
pub(crate) async fn complete_object_bucket(
    client: &Client,
    ob: &ObjectBucket,
    access: &BucketAccess,
) -> Result<ObjectBucket> {
    let endpoint = Endpoint {
        bucket_name: ob.bucket_name().unwrap_or_default().to_owned(),
        ..access.endpoint.clone()
    };
    let patch = json!({
        "metadata": { "annotations": {
            RESERVED_ANNOTATION: null,
            ACCESS_KEY_ANNOTATION: access.credentials.access_key_id,
        } },
        "spec": {
            "endpoint": endpoint,
            "additionalState": state_patch(ob, &access.additional_state),
        },
    });
    Api::<ObjectBucket>::all(client.clone())
        .patch(&ob.name_any(), &params(), &Patch::Merge(patch))
        .await
        .map_err(Error::kube("record the endpoint on the ObjectBucket"))
}

fn claim_ref(claim: &ObjectBucketClaim) -> ObjectReference {
    ObjectReference {
        api_version: Some(ObjectBucketClaim::api_version(&()).into_owned()),
        kind: Some(ObjectBucketClaim::kind(&()).into_owned()),
        name: claim.metadata.name.clone(),
        namespace: claim.metadata.namespace.clone(),
        uid: claim.metadata.uid.clone(),
        ..Default::default()
    }
}

/// Gives an ObjectBucket bound to the claim our finalizer, label and origin.
pub(crate) async fn adopt_object_bucket(
    client: &Client,
    ob: &ObjectBucket,
    label: &str,
    origin: Option<BucketOrigin>,
) -> Result<ObjectBucket> {
    let annotations = origin
        .map(|o| BTreeMap::from([(BUCKET_ORIGIN_ANNOTATION, o.as_str())]))
        .unwrap_or_default();
    let patch = adopt_patch(&ob.metadata, label, annotations);
    Api::<ObjectBucket>::all(client.clone())
        .patch(&ob.name_any(), &params(), &Patch::Merge(patch))
        .await
        .map_err(Error::kube("take over the ObjectBucket"))
}

/// Writes annotations on an ObjectBucket, guarded by its `resourceVersion`.
pub(crate) async fn annotate_object_bucket(
    client: &Client,
    ob: &ObjectBucket,
    annotations: &[(&'static str, String)],
) -> Result<ObjectBucket> {
    let set: Vec<(&'static str, Option<String>)> = annotations
        .iter()
        .map(|(k, v)| (*k, Some(v.clone())))
        .collect();
    set_object_bucket_annotations(client, ob, &set, None).await
}

/// A merge patch of `spec.additionalState` that leaves it equal to `state`:
/// the keys `ob` holds and `state` lacks are removed (a plain merge would
/// keep them, and a teardown would read a key the provisioner dropped).
fn state_patch(ob: &ObjectBucket, state: &BTreeMap<String, String>) -> serde_json::Value {
    let mut patch = json!(state);
    for key in ob.spec.additional_state.iter().flatten().map(|(k, _)| k) {
        if !state.contains_key(key) {
            patch[key] = serde_json::Value::Null;
        }
    }
    patch
}

/// Records on an ObjectBucket, before the claim's Secret is written with
/// `access`, the access key id it gets and the provisioner's state (which
/// replaces the recorded one), in one patch guarded by its
/// `resourceVersion`; `annotations` go in the same patch.
pub(crate) async fn record_access(
    client: &Client,
    ob: &ObjectBucket,
    access: &BucketAccess,
    annotations: &[(&'static str, Option<String>)],
) -> Result<ObjectBucket> {
    let mut set = vec![(
        ACCESS_KEY_ANNOTATION,
        Some(access.credentials.access_key_id.clone()),
    )];
    set.extend_from_slice(annotations);
    let state = state_patch(ob, &access.additional_state);
    set_object_bucket_annotations(client, ob, &set, Some(state)).await
}

/// Sets (`Some`) or removes (`None`) annotations on an ObjectBucket, and
/// optionally patches its `spec.additionalState` (see [`state_patch`]), in
/// one patch guarded by its `resourceVersion`.
pub(crate) async fn set_object_bucket_annotations(
    client: &Client,
    ob: &ObjectBucket,
    annotations: &[(&'static str, Option<String>)],
    additional_state: Option<serde_json::Value>,
) -> Result<ObjectBucket> {
    let annotations: BTreeMap<&str, Option<&str>> = annotations
        .iter()
        .map(|(k, v)| (*k, v.as_deref()))
        .collect();
    let mut patch = json!({
        "metadata": { "resourceVersion": ob.metadata.resource_version, "annotations": annotations }
    });
    if let Some(state) = additional_state {
        patch["spec"] = json!({ "additionalState": state });
    }
    Api::<ObjectBucket>::all(client.clone())
        .patch(&ob.name_any(), &params(), &Patch::Merge(patch))
        .await
        .map_err(Error::kube("record on the ObjectBucket"))
}

/// Sets the ObjectBucket's status phase.
pub(crate) async fn set_object_bucket_phase(
    client: &Client,
    ob: &ObjectBucket,
    phase: BucketPhase,
) -> Result<ObjectBucket> {
    let api: Api<ObjectBucket> = Api::all(client.clone());
    let patch = Patch::Merge(json!({ "status": ObjectBucketStatus { phase: Some(phase) } }));
    match api.patch_status(&ob.name_any(), &params(), &patch).await {
        Err(e) if is_status(&e, 404) && ob.metadata.deletion_timestamp.is_none() => api
            .patch(&ob.name_any(), &params(), &patch)
            .await
            .map_err(Error::kube("write the ObjectBucket's status")),
        other => other.map_err(Error::kube("write the ObjectBucket's status")),
    }
}

/// Removes the ObjectBucket's finalizer; gone already counts as done.
pub(crate) async fn release_object_bucket(
    client: &Client,
    ob: &ObjectBucket,
) -> Result<Option<ObjectBucket>> {
    match Api::<ObjectBucket>::all(client.clone())
        .patch(
            &ob.name_any(),
            &params(),
            &Patch::Merge(release_patch(&ob.metadata)),
        )
        .await
    {
        Err(e) if is_status(&e, 404) => Ok(None),
        other => other
            .map(Some)
            .map_err(Error::kube("remove the ObjectBucket's finalizer")),
    }
}

/// Removes the ObjectBucket: our finalizer first, then the object (a crash
/// in between leaves an ObjectBucket without finalizer, which the next pass
/// deletes).
pub(crate) async fn remove_object_bucket(client: &Client, ob: &ObjectBucket) -> Result<()> {
    release_object_bucket(client, ob).await?;
    crate::core::failpoint::hit("after-object-bucket-finalizer-removed");
    delete_object_bucket(client, &ob.name_any()).await
}

/// Deletes the ObjectBucket (after its finalizer is gone).
pub(crate) async fn delete_object_bucket(client: &Client, name: &str) -> Result<()> {
    match Api::<ObjectBucket>::all(client.clone())
        .delete(name, &DeleteParams::default())
        .await
    {
        Err(e) if is_status(&e, 404) => Ok(()),
        other => other
            .map(|_| ())
            .map_err(Error::kube("delete the ObjectBucket")),
    }
}

/// Creates the Lease that holds greenfield bucket name `bucket` for `claim`
/// in namespace `ns` (see `reconcile::bucket_names`). `false`: it exists
/// already (this claim's or another's: the caller reads it).
pub(crate) async fn create_name_record(
    client: &Client,
    ns: &str,
    bucket: &str,
    claim: &ObjectBucketClaim,
    label: &str,
) -> Result<bool> {
    use crate::obc::reconcile::plan::{
        BUCKET_NAME_ANNOTATION, HOLDER_CLAIM_ANNOTATION, record_name,
    };
    use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
    let holder = format!(
        "{}/{}",
        claim.metadata.namespace.as_deref().unwrap_or_default(),
        claim.name_any()
    );
    let record = Lease {
        metadata: ObjectMeta {
            name: Some(record_name(bucket)),
            namespace: Some(ns.to_owned()),
            labels: Some(BTreeMap::from([(
                PROVISIONER_LABEL.to_owned(),
                label.to_owned(),
            )])),
            annotations: Some(BTreeMap::from([
                (HOLDER_CLAIM_ANNOTATION.to_owned(), holder),
                (BUCKET_NAME_ANNOTATION.to_owned(), bucket.to_owned()),
            ])),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(
                claim
                    .metadata
                    .uid
                    .clone()
                    .ok_or(Error::MissingField("claim uid"))?,
            ),
            ..Default::default()
        }),
    };
    match Api::<Lease>::namespaced(client.clone(), ns)
        .create(&post_params(), &record)
        .await
    {
        Ok(_) => Ok(true),
        Err(e) if is_status(&e, 409) => Ok(false),
        Err(e) => Err(Error::kube("create the bucket name's Lease")(e)),
    }
}

/// Deletes a bucket name's Lease, only in the version read (a holder that
/// took it meanwhile keeps it: 409, re-read); gone already counts as done.
pub(crate) async fn delete_name_record(
    client: &Client,
    ns: &str,
    record: &k8s_openapi::api::coordination::v1::Lease,
) -> Result<()> {
    use kube::api::Preconditions;
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            resource_version: record.metadata.resource_version.clone(),
            uid: record.metadata.uid.clone(),
        }),
        ..Default::default()
    };
    match Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(client.clone(), ns)
        .delete(&record.name_any(), &params)
        .await
    {
        Err(e) if is_status(&e, 404) => Ok(()),
        other => other
            .map(|_| ())
            .map_err(Error::kube("delete the bucket name's Lease")),
    }
}
