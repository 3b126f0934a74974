//! The provisioner's requests ([`crate::core::provisioner`]) built from the
//! OBC family's objects: a claim, its StorageClass and its ObjectBucket.
//! The request types are API-neutral; what reads OBC objects lives here.

use std::collections::BTreeMap;

use crate::core::provisioner::ReclaimPolicy;
use crate::core::provisioner::{BucketRequest, ClaimIdentity, TeardownRequest};
use crate::obc::api::{ObjectBucket, ObjectBucketClaim};

impl ClaimIdentity {
    /// The claim as the library read it.
    pub(crate) fn of(claim: &ObjectBucketClaim) -> Self {
        Self {
            namespace: claim.metadata.namespace.clone().unwrap_or_default(),
            name: claim.metadata.name.clone().unwrap_or_default(),
            uid: claim.metadata.uid.clone().unwrap_or_default(),
            labels: claim.metadata.labels.clone().unwrap_or_default(),
            annotations: claim.metadata.annotations.clone().unwrap_or_default(),
        }
    }
}

impl BucketRequest {
    /// The request for a new claim in `class`.
    pub(crate) fn for_claim(
        claim: &ObjectBucketClaim,
        bucket_name: String,
        class: &k8s_openapi::api::storage::v1::StorageClass,
    ) -> Self {
        let policy = ReclaimPolicy::from_class(class.reclaim_policy.as_deref()).unwrap_or_default();
        Self::new(
            ClaimIdentity::of(claim),
            bucket_name,
            class.metadata.name.clone().unwrap_or_default(),
        )
        .with_parameters(class.parameters.clone().unwrap_or_default())
        .with_additional_config(claim.spec.additional_config.clone().unwrap_or_default())
        .with_reclaim_policy(policy)
        .with_object_bucket_name(crate::obc::reconcile::plan::object_bucket_name(claim))
    }

    /// The request for a bound claim, from what its ObjectBucket recorded
    /// (`parameters` being the class's parameters at bind).
    pub(crate) fn for_bound_claim(
        claim: &ObjectBucketClaim,
        ob: &ObjectBucket,
        parameters: BTreeMap<String, String>,
    ) -> Self {
        Self::new(
            ClaimIdentity::of(claim),
            ob.bucket_name().unwrap_or_default(),
            ob.spec.storage_class_name.clone(),
        )
        .with_parameters(parameters)
        .with_additional_config(claim.spec.additional_config.clone().unwrap_or_default())
        .with_reclaim_policy(ob.spec.reclaim_policy)
        .with_object_bucket_name(ob.metadata.name.clone().unwrap_or_default())
    }

    /// The re-issue of a bound claim's credentials, entirely from what its
    /// ObjectBucket recorded: the bucket, the class's parameters at bind,
    /// the config last applied (`applied_config`; the claim's own only
    /// when nothing is recorded) and the provisioner's state. A config the
    /// provisioner refused (an `accessMode` widened after bind, say) never
    /// reaches the credentials this way.
    pub(crate) fn reissue_for_bound_claim(
        claim: &ObjectBucketClaim,
        ob: &ObjectBucket,
        parameters: BTreeMap<String, String>,
        applied_config: Option<BTreeMap<String, String>>,
    ) -> Self {
        let request = Self::for_bound_claim(claim, ob, parameters);
        let config = applied_config.unwrap_or_else(|| request.additional_config.clone());
        request
            .with_additional_config(config)
            .reissuing(ob.spec.additional_state.clone().unwrap_or_default())
    }
}

impl TeardownRequest {
    /// The request for an ObjectBucket, with its class's parameters.
    pub(crate) fn for_object_bucket(
        ob: &ObjectBucket,
        parameters: BTreeMap<String, String>,
    ) -> Self {
        let r = ob.spec.claim_ref.clone().unwrap_or_default();
        let uid = r.uid.unwrap_or_default();
        let reserved = crate::obc::reconcile::plan::is_reserved(ob);
        let name = ob.metadata.name.clone().unwrap_or_default();
        Self {
            provisioned: !reserved && !uid.is_empty(),
            claim: ClaimIdentity::new(
                r.namespace.unwrap_or_default(),
                r.name.unwrap_or_default(),
                uid,
            ),
            bucket_name: ob.bucket_name().unwrap_or_default().to_owned(),
            storage_class_name: ob.spec.storage_class_name.clone(),
            parameters,
            additional_state: ob.spec.additional_state.clone().unwrap_or_default(),
            reclaim_policy: ob.spec.reclaim_policy,
            object_bucket_name: Some(name),
        }
    }
}
