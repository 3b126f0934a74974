//! What the library hands a provisioner: the claim ([`ClaimIdentity`]) and
//! the bucket it wants ([`BucketRequest`]) or is done with
//! ([`TeardownRequest`]).

use std::collections::BTreeMap;

use crate::core::provisioner::ReclaimPolicy;

/// The claim a request is for, as it was when the library read it.
///
/// ```
/// use lib_provisioner::provisioner::ClaimIdentity;
/// let claim = ClaimIdentity::new("shop", "photos", "0b3c…")
///     .with_label("team", "web");
/// assert_eq!(claim.to_string(), "shop/photos");
/// assert_eq!(claim.labels["team"], "web");
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClaimIdentity {
    /// The claim's namespace.
    pub namespace: String,
    /// The claim's name.
    pub name: String,
    /// The claim's UID: stable across retries, unique per claim. Name what
    /// you create after it (users, policies) so a retry finds its own work.
    pub uid: String,
    /// The claim's labels (empty at teardown when the claim is gone).
    pub labels: BTreeMap<String, String>,
    /// The claim's annotations (empty at teardown when the claim is gone).
    pub annotations: BTreeMap<String, String>,
}

impl ClaimIdentity {
    /// A claim with no labels or annotations.
    pub fn new(
        namespace: impl Into<String>,
        name: impl Into<String>,
        uid: impl Into<String>,
    ) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
            uid: uid.into(),
            ..Default::default()
        }
    }

    /// Adds a label.
    pub fn with_label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.labels.insert(key.into(), value.into());
        self
    }

    /// Adds an annotation.
    pub fn with_annotation(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.annotations.insert(key.into(), value.into());
        self
    }
}

impl std::fmt::Display for ClaimIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// What the library knows about a claim when it asks for a bucket or access:
/// what Go's `BucketOptions` gives its provisioners, and the claim's UID.
///
/// ```
/// use lib_provisioner::api::ReclaimPolicy;
/// use lib_provisioner::provisioner::{BucketRequest, ClaimIdentity};
/// let req = BucketRequest::new(ClaimIdentity::new("shop", "photos", "uid-1"), "photos-x7k2", "s3")
///     .with_parameter("endpoint", "http://127.0.0.1:9000")
///     .with_reclaim_policy(ReclaimPolicy::Retain);
/// assert_eq!(req.object_bucket_name, "obc-shop-photos");
/// assert_eq!(req.parameters["endpoint"], "http://127.0.0.1:9000");
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct BucketRequest {
    /// The claim.
    pub claim: ClaimIdentity,
    /// The bucket's name in the object store.
    pub bucket_name: String,
    /// Name of the ObjectBucket the library binds the claim to.
    pub object_bucket_name: String,
    /// The StorageClass name.
    pub storage_class_name: String,
    /// The StorageClass `parameters`.
    pub parameters: BTreeMap<String, String>,
    /// The claim's `spec.additionalConfig`.
    pub additional_config: BTreeMap<String, String>,
    /// What happens to the bucket when the claim goes (the class's policy).
    pub reclaim_policy: ReclaimPolicy,
    /// The claim is already bound to `bucket_name`, and the library asks
    /// for its credentials again (its Secret was deleted or edited). Its
    /// ObjectBucket records the binding: cluster-scoped, written by this
    /// library or by the Go library it took the claim over from, never by
    /// the claim's owner. Issue credentials for the bucket without the
    /// ownership check a new claim needs (a bucket taken over from another
    /// implementation carries none of your markers), and never create the
    /// bucket: if it is gone, return a permanent error. `bucket_name`,
    /// `parameters` and `additional_config` are what the ObjectBucket
    /// recorded at bind, not what the claim says now.
    pub reissue: bool,
    /// With [`reissue`](Self::reissue): what
    /// [`BucketAccess::additional_state`](super::BucketAccess::additional_state)
    /// held at provisioning (empty for a claim taken over). Empty otherwise.
    pub additional_state: BTreeMap<String, String>,
}

impl BucketRequest {
    /// A request for `bucket_name` in class `storage_class_name`, with no
    /// parameters, reclaim policy Delete and the default ObjectBucket name.
    pub fn new(
        claim: ClaimIdentity,
        bucket_name: impl Into<String>,
        storage_class_name: impl Into<String>,
    ) -> Self {
        Self {
            object_bucket_name: crate::core::names::object_bucket_name(
                &claim.namespace,
                &claim.name,
            ),
            claim,
            bucket_name: bucket_name.into(),
            storage_class_name: storage_class_name.into(),
            parameters: BTreeMap::new(),
            additional_config: BTreeMap::new(),
            reclaim_policy: ReclaimPolicy::Delete,
            reissue: false,
            additional_state: BTreeMap::new(),
        }
    }

    /// Marks the request as a re-issue of credentials for a bucket the claim
    /// is bound to already (see [`reissue`](Self::reissue)), with the state
    /// recorded at provisioning.
    ///
    /// ```
    /// use std::collections::BTreeMap;
    /// use lib_provisioner::provisioner::{BucketRequest, ClaimIdentity};
    /// let req = BucketRequest::new(ClaimIdentity::new("shop", "photos", "uid-1"), "photos-x7k2", "s3")
    ///     .reissuing(BTreeMap::from([("user".into(), "obc-uid-1".into())]));
    /// assert!(req.reissue);
    /// assert_eq!(req.additional_state["user"], "obc-uid-1");
    /// ```
    pub fn reissuing(mut self, additional_state: BTreeMap<String, String>) -> Self {
        self.reissue = true;
        self.additional_state = additional_state;
        self
    }

    /// Adds a StorageClass parameter.
    pub fn with_parameter(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.parameters.insert(key.into(), value.into());
        self
    }

    /// Replaces the StorageClass parameters.
    pub fn with_parameters(mut self, parameters: BTreeMap<String, String>) -> Self {
        self.parameters = parameters;
        self
    }

    /// Replaces the claim's `additionalConfig`.
    pub fn with_additional_config(mut self, config: BTreeMap<String, String>) -> Self {
        self.additional_config = config;
        self
    }

    /// Sets the reclaim policy.
    pub fn with_reclaim_policy(mut self, policy: ReclaimPolicy) -> Self {
        self.reclaim_policy = policy;
        self
    }

    /// Sets the ObjectBucket name (by default `obc-<namespace>-<name>`).
    pub fn with_object_bucket_name(mut self, name: impl Into<String>) -> Self {
        self.object_bucket_name = name.into();
        self
    }
}

/// A Bound claim's changed `spec.additionalConfig`, for
/// [`Provisioner::update`](super::Provisioner::update).
///
/// ```
/// use std::collections::BTreeMap;
/// use lib_provisioner::provisioner::{BucketRequest, ClaimIdentity, UpdateRequest};
/// let bucket = BucketRequest::new(ClaimIdentity::new("shop", "photos", "uid-1"), "photos-x7k2", "s3")
///     .with_additional_config(BTreeMap::from([("maxSize".into(), "2Gi".into())]));
/// let req = UpdateRequest::new(bucket, BTreeMap::from([("maxSize".into(), "1Gi".into())]));
/// assert_eq!(req.changed_keys(), vec!["maxSize"]);
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct UpdateRequest {
    /// The bucket as it should be now: `bucket.additional_config` is the
    /// claim's new config, `bucket.parameters` the class's parameters
    /// recorded at bind (never the class's current ones).
    pub bucket: BucketRequest,
    /// The config last applied (at provisioning or by an earlier update).
    pub previous_config: BTreeMap<String, String>,
    /// What [`BucketAccess::additional_state`](super::BucketAccess::additional_state)
    /// held at provisioning.
    pub additional_state: BTreeMap<String, String>,
}

impl UpdateRequest {
    /// An update of `bucket` from `previous_config`.
    pub fn new(bucket: BucketRequest, previous_config: BTreeMap<String, String>) -> Self {
        Self {
            bucket,
            previous_config,
            additional_state: BTreeMap::new(),
        }
    }

    /// Sets the provisioner's state recorded at provisioning.
    pub fn with_state(mut self, state: BTreeMap<String, String>) -> Self {
        self.additional_state = state;
        self
    }

    /// Keys added, removed or changed since the config last applied.
    pub fn changed_keys(&self) -> Vec<&str> {
        let new = &self.bucket.additional_config;
        let old = &self.previous_config;
        let mut keys: Vec<&str> = new
            .keys()
            .chain(old.keys())
            .filter(|k| new.get(*k) != old.get(*k))
            .map(String::as_str)
            .collect();
        keys.sort_unstable();
        keys.dedup();
        keys
    }
}

/// What the library knows when it tears a bucket or its access down.
///
/// Teardown may be asked for a bucket whose provisioning died half-way
/// (`provisioned` is false: the bucket may or may not exist, and may even be
/// someone else's): delete only what this provisioner created for
/// `claim.uid`, and succeed if there is nothing.
///
/// ```
/// use lib_provisioner::provisioner::{ClaimIdentity, TeardownRequest};
/// let req = TeardownRequest::new(ClaimIdentity::new("shop", "photos", "uid-1"), "photos-x7k2", "s3")
///     .with_state("user", "obc-uid-1");
/// assert!(!req.provisioned);
/// assert_eq!(req.additional_state["user"], "obc-uid-1");
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct TeardownRequest {
    /// The claim the bucket was provisioned for.
    pub claim: ClaimIdentity,
    /// The bucket's name in the object store.
    pub bucket_name: String,
    /// The StorageClass name.
    pub storage_class_name: String,
    /// The StorageClass `parameters`, or empty if the class is gone.
    pub parameters: BTreeMap<String, String>,
    /// What [`BucketAccess::additional_state`](super::BucketAccess::additional_state)
    /// held at provisioning.
    pub additional_state: BTreeMap<String, String>,
    /// The reclaim policy the ObjectBucket recorded.
    pub reclaim_policy: ReclaimPolicy,
    /// The ObjectBucket being released, if one was created.
    pub object_bucket_name: Option<String>,
    /// Whether the library's record says the bucket was provisioned (or
    /// granted) for this claim: its ObjectBucket is bound, not a reservation
    /// made before the provisioner was asked, and names this claim's UID.
    /// Claims taken over from the Go library are recorded this way too
    /// (they carry no provisioner-specific marker).
    pub provisioned: bool,
}

impl TeardownRequest {
    /// A request for a bucket with no record of it being provisioned.
    pub fn new(
        claim: ClaimIdentity,
        bucket_name: impl Into<String>,
        storage_class_name: impl Into<String>,
    ) -> Self {
        Self {
            claim,
            bucket_name: bucket_name.into(),
            storage_class_name: storage_class_name.into(),
            parameters: BTreeMap::new(),
            additional_state: BTreeMap::new(),
            reclaim_policy: ReclaimPolicy::Delete,
            object_bucket_name: None,
            provisioned: false,
        }
    }

    /// Replaces the StorageClass parameters.
    pub fn with_parameters(mut self, parameters: BTreeMap<String, String>) -> Self {
        self.parameters = parameters;
        self
    }

    /// Adds provisioning state.
    pub fn with_state(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.additional_state.insert(key.into(), value.into());
        self
    }

    /// Sets the reclaim policy (by default `Delete`).
    pub fn with_reclaim_policy(mut self, policy: ReclaimPolicy) -> Self {
        self.reclaim_policy = policy;
        self
    }

    /// Records the bucket as provisioned for the claim, through ObjectBucket
    /// `name`.
    pub fn provisioned_as(mut self, object_bucket_name: impl Into<String>) -> Self {
        self.object_bucket_name = Some(object_bucket_name.into());
        self.provisioned = true;
        self
    }
}

/// A rotation of a Bound claim's credentials, for
/// [`Provisioner::rotate`](super::Provisioner::rotate) and
/// [`Provisioner::revoke_previous`](super::Provisioner::revoke_previous).
///
/// ```
/// use lib_provisioner::provisioner::{BucketRequest, ClaimIdentity, RotationRequest};
/// let bucket = BucketRequest::new(ClaimIdentity::new("shop", "photos", "uid-1"), "photos-x7k2", "s3");
/// let req = RotationRequest::new(bucket, "2026-12-04T18:00:00Z", "obc-old-key");
/// assert_eq!(req.previous_access_key_id, "obc-old-key");
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct RotationRequest {
    /// The claim's bucket (parameters as recorded at bind).
    pub bucket: BucketRequest,
    /// The value of the claim's rotation annotation: the same for every
    /// retry of one rotation.
    pub rotation: String,
    /// The access key id the rotation replaces: the one the library
    /// recorded giving the claim's Secret (on the ObjectBucket), never read
    /// from the Secret, which its tenant can write.
    pub previous_access_key_id: String,
    /// What [`BucketAccess::additional_state`](super::BucketAccess::additional_state)
    /// held at provisioning.
    pub additional_state: BTreeMap<String, String>,
}

impl RotationRequest {
    /// A rotation of `bucket`'s credentials away from `previous_access_key_id`.
    pub fn new(
        bucket: BucketRequest,
        rotation: impl Into<String>,
        previous_access_key_id: impl Into<String>,
    ) -> Self {
        Self {
            bucket,
            rotation: rotation.into(),
            previous_access_key_id: previous_access_key_id.into(),
            additional_state: BTreeMap::new(),
        }
    }

    /// Sets the provisioner's state recorded at provisioning.
    pub fn with_state(mut self, state: BTreeMap<String, String>) -> Self {
        self.additional_state = state;
        self
    }
}
