//! Access for one principal to one or more buckets: [`AccessRequest`] in,
//! [`AccessGrant`] out, [`AccessRevocation`] to take it back.

use std::collections::BTreeMap;

use super::{AccessMode, BucketAccess, ClaimIdentity, Credentials, StoreEndpoint};

/// One bucket of an [`AccessRequest`], with the mode the principal gets on it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct AccessedBucket {
    /// The bucket's name in the store (what
    /// [`create_bucket`](super::Provisioner::create_bucket) or
    /// [`existing_bucket`](super::Provisioner::existing_bucket) was given).
    pub bucket_name: String,
    /// What the principal may do in this bucket, and nothing more.
    pub mode: AccessMode,
    /// [`BucketInfo::additional_state`](super::BucketInfo::additional_state)
    /// when the caller kept it; empty on the COSI gRPC path.
    pub additional_state: BTreeMap<String, String>,
    /// The parameters the bucket was made with, as recorded where no
    /// tenant writes (COSI: the Bucket's `spec.parameters`, copied from its
    /// BucketClass, or an administrator's static Bucket): they name the
    /// bucket's store, which a grant must not take from the access class
    /// alone. Empty when unknown (the COSI gRPC path, ObjectBucketClaims).
    pub bucket_parameters: BTreeMap<String, String>,
}

impl AccessedBucket {
    /// `bucket_name` in `mode`, no state.
    pub fn new(bucket_name: impl Into<String>, mode: AccessMode) -> Self {
        Self {
            bucket_name: bucket_name.into(),
            mode,
            additional_state: BTreeMap::new(),
            bucket_parameters: BTreeMap::new(),
        }
    }

    /// Sets the parameters the bucket was made with.
    pub fn with_bucket_parameters(mut self, parameters: BTreeMap<String, String>) -> Self {
        self.bucket_parameters = parameters;
        self
    }

    /// Replaces the bucket's state.
    pub fn with_state(mut self, state: BTreeMap<String, String>) -> Self {
        self.additional_state = state;
        self
    }
}

/// A request for credentials: one principal, one or more buckets, a mode
/// each. The library alone decides which buckets are in it (from records
/// only it writes, never from what a tenant names): a provisioner gives
/// access to exactly these buckets and creates none of them.
///
/// ```
/// use lib_provisioner::provisioner::{AccessMode, AccessRequest, ClaimIdentity};
/// let req = AccessRequest::new(ClaimIdentity::new("shop", "reader", "uid-9"), "ba-uid-9")
///     .with_bucket("bc-uid-1", AccessMode::ReadOnly)
///     .with_parameter("endpoint", "http://127.0.0.1:9000");
/// assert_eq!(req.buckets[0].mode, AccessMode::ReadOnly);
/// assert_eq!(req.parameters["endpoint"], "http://127.0.0.1:9000");
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct AccessRequest {
    /// Who gets access (for COSI's Kubernetes API: the BucketAccess
    /// namespace, name and UID). On the COSI gRPC path the driver learns
    /// only `account_name`: the principal is then
    /// `ClaimIdentity::new("", account_name, account_name)`.
    pub principal: ClaimIdentity,
    /// A name for the account, unique per principal and stable across
    /// retries (COSI: `ba-<BucketAccess UID>`): the idempotency key.
    pub account_name: String,
    /// The class the access was asked through (COSI: the
    /// BucketAccessClass; empty when unknown, as on the gRPC path).
    pub class_name: String,
    /// The buckets, each with its mode; never empty when the library calls.
    pub buckets: Vec<AccessedBucket>,
    /// The class's parameters (COSI: the BucketAccessClass's).
    pub parameters: BTreeMap<String, String>,
}

impl AccessRequest {
    /// A request for `principal` under `account_name`, no buckets yet.
    pub fn new(principal: ClaimIdentity, account_name: impl Into<String>) -> Self {
        Self {
            principal,
            account_name: account_name.into(),
            class_name: String::new(),
            buckets: Vec::new(),
            parameters: BTreeMap::new(),
        }
    }

    /// Adds a bucket in `mode`.
    pub fn with_bucket(mut self, bucket_name: impl Into<String>, mode: AccessMode) -> Self {
        self.buckets.push(AccessedBucket::new(bucket_name, mode));
        self
    }

    /// Adds a bucket with its state.
    pub fn with_accessed_bucket(mut self, bucket: AccessedBucket) -> Self {
        self.buckets.push(bucket);
        self
    }

    /// Sets the class name.
    pub fn with_class_name(mut self, class_name: impl Into<String>) -> Self {
        self.class_name = class_name.into();
        self
    }

    /// Adds a parameter.
    pub fn with_parameter(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.parameters.insert(key.into(), value.into());
        self
    }

    /// Replaces the parameters.
    pub fn with_parameters(mut self, parameters: BTreeMap<String, String>) -> Self {
        self.parameters = parameters;
        self
    }
}

/// What [`grant_access`](super::Provisioner::grant_access) returns: one set
/// of credentials for every bucket of the request.
///
/// ```
/// use lib_provisioner::provisioner::{AccessGrant, Credentials, StoreEndpoint};
/// let grant = AccessGrant::new("ba-uid-9", Credentials::new("id", "secret"), StoreEndpoint::new("s3.local", 9000))
///     .with_state("user", "cosi-ba-uid-9");
/// assert_eq!(grant.account_id, "ba-uid-9");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct AccessGrant {
    /// The account's id in the store: all that
    /// [`revoke_access`](super::Provisioner::revoke_access) is sure to get
    /// back (the COSI sidecar records only it). Letters, digits and
    /// `/._-`, at most 2048 characters (COSI's ID pattern).
    pub account_id: String,
    /// The credentials, written only into the principal's Secrets.
    pub credentials: Credentials,
    /// Where every granted bucket is reached.
    pub endpoint: StoreEndpoint,
    /// State a revocation may use when the caller kept it (never secrets;
    /// empty again on the COSI gRPC path).
    pub additional_state: BTreeMap<String, String>,
}

impl AccessGrant {
    /// Credentials for `account_id` at `endpoint`.
    pub fn new(
        account_id: impl Into<String>,
        credentials: Credentials,
        endpoint: StoreEndpoint,
    ) -> Self {
        Self {
            account_id: account_id.into(),
            credentials,
            endpoint,
            additional_state: BTreeMap::new(),
        }
    }

    /// The grant made of an OBC-style [`BucketAccess`] (what the default
    /// [`grant_access`](super::Provisioner::grant_access) builds).
    pub fn from_access(account_id: impl Into<String>, access: BucketAccess) -> Self {
        Self {
            endpoint: StoreEndpoint::from_endpoint(&access.endpoint),
            account_id: account_id.into(),
            credentials: access.credentials,
            additional_state: access.additional_state,
        }
    }

    /// Adds state.
    pub fn with_state(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.additional_state.insert(key.into(), value.into());
        self
    }
}

/// The end of a principal's access, for
/// [`revoke_access`](super::Provisioner::revoke_access).
///
/// ```
/// use lib_provisioner::provisioner::{AccessRevocation, ClaimIdentity};
/// let req = AccessRevocation::new(ClaimIdentity::new("shop", "reader", "uid-9"), "ba-uid-9")
///     .with_bucket("bc-uid-1");
/// assert_eq!(req.bucket_names, vec!["bc-uid-1"]);
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct AccessRevocation {
    /// Who had access (on the COSI gRPC path:
    /// `ClaimIdentity::new("", account_id, account_id)`, all it knows).
    pub principal: ClaimIdentity,
    /// What [`AccessGrant::account_id`] said.
    pub account_id: String,
    /// The class the access was asked through (empty when unknown).
    pub class_name: String,
    /// The buckets the grant covered.
    pub bucket_names: Vec<String>,
    /// The class's parameters (COSI: the BucketAccessClass's, as recorded
    /// at grant).
    pub parameters: BTreeMap<String, String>,
    /// [`AccessGrant::additional_state`] when the caller kept it; empty on
    /// the COSI gRPC path.
    pub additional_state: BTreeMap<String, String>,
}

impl AccessRevocation {
    /// The revocation of `account_id`, no buckets yet.
    pub fn new(principal: ClaimIdentity, account_id: impl Into<String>) -> Self {
        Self {
            principal,
            account_id: account_id.into(),
            class_name: String::new(),
            bucket_names: Vec::new(),
            parameters: BTreeMap::new(),
            additional_state: BTreeMap::new(),
        }
    }

    /// Adds a bucket.
    pub fn with_bucket(mut self, bucket_name: impl Into<String>) -> Self {
        self.bucket_names.push(bucket_name.into());
        self
    }

    /// Sets the class name.
    pub fn with_class_name(mut self, class_name: impl Into<String>) -> Self {
        self.class_name = class_name.into();
        self
    }

    /// Replaces the parameters.
    pub fn with_parameters(mut self, parameters: BTreeMap<String, String>) -> Self {
        self.parameters = parameters;
        self
    }

    /// Replaces the state.
    pub fn with_state(mut self, state: BTreeMap<String, String>) -> Self {
        self.additional_state = state;
        self
    }
}
