//! StorageClass parameters of the sample provisioner, parsed and checked
//! without any I/O so that every rule is unit-tested.
//!
//! ```yaml
//! parameters:
//!   endpoint: https://s3.example.com:9000   # required, http or https
//!   region: us-east-1                       # optional, default us-east-1
//!   adminSecretName: s3-admin               # required
//!   adminSecretNamespace: obc-system        # required
//!   forceDelete: "false"                    # optional, "true" or "false"
//!   bucketName: shared-bucket               # optional: brownfield (library)
//!   credentialsMode: per-claim              # optional: see crate::access
//!   accessMode: read-write                  # optional: see crate::access
//!   ownership: tags                         # optional: tags, or marker (no tagging)
//!   allowedConfig: maxSize,versioning       # optional: what claims may set
//!   versioning: Enabled                     # optional defaults and bounds:
//!                                           # see crate::bucket_config
//! ```

use std::collections::BTreeMap;
use std::fmt;

use lib_provisioner::ProvisionError;
use lib_provisioner::api::BROWNFIELD_BUCKET_PARAMETER;
use lib_provisioner::provisioner::ConfigAllowList;
use url::Url;

use crate::access::{self, Access};
use crate::bucket_config::{self, ClassConfig};

/// The S3 endpoint URL.
pub const ENDPOINT: &str = "endpoint";
/// The region buckets are created in.
pub const REGION: &str = "region";
/// Name of the Secret holding the admin credentials.
pub const ADMIN_SECRET_NAME: &str = "adminSecretName";
/// Namespace of that Secret.
pub const ADMIN_SECRET_NAMESPACE: &str = "adminSecretNamespace";
/// Whether deleting a claim deletes a bucket that still holds objects.
pub const FORCE_DELETE: &str = "forceDelete";
/// How ownership of a bucket is recorded: `tags` or `marker`.
pub const OWNERSHIP: &str = "ownership";
/// Region used when the class names none.
pub const DEFAULT_REGION: &str = "us-east-1";

/// The `additionalConfig` keys a class without `allowedConfig` lets its
/// claims set: those it served before it had an allow-list.
pub const DEFAULT_ALLOWED_CONFIG: [&str; 3] =
    [access::ACCESS_MODE, access::MAX_SIZE, access::MAX_OBJECTS];

/// Every `additionalConfig` key this provisioner reads.
pub const CLAIM_KEYS: [&str; 8] = [
    access::ACCESS_MODE,
    access::MAX_SIZE,
    access::MAX_OBJECTS,
    bucket_config::VERSIONING,
    bucket_config::BUCKET_LIFECYCLE,
    bucket_config::BUCKET_POLICY,
    bucket_config::OBJECT_LOCK_MODE,
    bucket_config::OBJECT_LOCK_DAYS,
];

/// The parameters of the class itself; [`bucket_config::CLASS_KEYS`] and
/// `allowedConfig` are known too (see [`is_known`]).
const KNOWN: [&str; 9] = [
    ENDPOINT,
    REGION,
    ADMIN_SECRET_NAME,
    ADMIN_SECRET_NAMESPACE,
    FORCE_DELETE,
    BROWNFIELD_BUCKET_PARAMETER,
    access::CREDENTIALS_MODE,
    access::ACCESS_MODE,
    OWNERSHIP,
];

/// Every parameter this provisioner reads.
fn known() -> impl Iterator<Item = &'static str> {
    KNOWN
        .into_iter()
        .chain(bucket_config::CLASS_KEYS)
        .chain([ConfigAllowList::PARAMETER])
}

fn is_known(key: &str) -> bool {
    known().any(|k| k == key)
}

/// A StorageClass's parameters, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassParams {
    /// Where the store is.
    pub endpoint: StoreEndpoint,
    /// Region of the buckets (and of request signing).
    pub region: String,
    /// The Secret holding `AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY`.
    pub admin_secret: SecretRef,
    /// Delete objects before deleting a bucket that is not empty.
    pub force_delete: bool,
    /// How claims get credentials ([`access::PER_CLAIM_MODE`] or
    /// [`access::SHARED_ADMIN_MODE`]).
    pub credentials_mode: &'static str,
    /// What the class's claims may do on their buckets.
    pub access: Access,
    /// Where the owner of a bucket is recorded.
    pub ownership: Ownership,
    /// Which `additionalConfig` keys its claims may set.
    pub allowed: ConfigAllowList,
    /// Bucket settings it sets for every claim, and their bounds.
    pub settings: ClassConfig,
}

/// Where the claim a bucket was created for is recorded (see
/// [`crate::store`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Ownership {
    /// A bucket tag, with intents as ConfigMaps: nothing in the bucket.
    #[default]
    Tags,
    /// A marker object in the bucket and a state bucket, for stores
    /// without bucket tagging (s3s-fs).
    Marker,
}

/// A checked S3 endpoint URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreEndpoint {
    /// The URL as given, without a trailing slash: what the S3 client uses.
    pub url: String,
    /// Host name or address, for the claim's ConfigMap (IPv6 in brackets).
    pub host: String,
    /// Port, explicit or the scheme's default.
    pub port: u16,
    /// Whether the endpoint uses TLS.
    pub tls: bool,
}

/// A namespaced Secret name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SecretRef {
    /// The Secret's namespace.
    pub namespace: String,
    /// The Secret's name.
    pub name: String,
}

impl fmt::Display for SecretRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// The class a request's parameters come from, named as its user knows
/// it, so that a message speaks the API the request came from. The
/// library names the StorageClass in every ObjectBucketClaim's request and
/// none in a COSI Bucket's (a Bucket records no class: its parameters were
/// copied from its BucketClass); a COSI access request names its
/// BucketAccessClass (the gRPC driver: none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClassName<'a> {
    /// `BucketRequest::storage_class_name` / `TeardownRequest`'s: a
    /// StorageClass, or empty for COSI's BucketClass.
    Bucket(&'a str),
    /// `AccessRequest::class_name` / `AccessRevocation`'s.
    Access(&'a str),
}

impl ClassName<'_> {
    /// Whether the request came from COSI.
    pub fn is_cosi(&self) -> bool {
        !matches!(self, Self::Bucket(name) if !name.is_empty())
    }
}

impl fmt::Display for ClassName<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Bucket("") => f.write_str("the BucketClass"),
            Self::Bucket(name) => write!(f, "StorageClass {name:?}"),
            Self::Access("") => f.write_str("the BucketAccessClass"),
            Self::Access(name) => write!(f, "BucketAccessClass {name:?}"),
        }
    }
}

impl ClassParams {
    /// Parses a StorageClass's `parameters` (COSI's BucketClass when
    /// `class` is empty). Every error is permanent and names the parameter
    /// and how to fix it.
    pub fn parse(
        class: &str,
        parameters: &BTreeMap<String, String>,
    ) -> Result<Self, ProvisionError> {
        Self::parse_for(ClassName::Bucket(class), parameters)
    }

    /// Parses the `parameters` of `class`, as [`parse`](Self::parse).
    pub fn parse_for(
        class: ClassName<'_>,
        parameters: &BTreeMap<String, String>,
    ) -> Result<Self, ProvisionError> {
        let allowed = ConfigAllowList::from_parameters(class, parameters, &DEFAULT_ALLOWED_CONFIG)?;
        parse(parameters, allowed)
            .map_err(|problem| ProvisionError::permanent(format!("{class}: {problem}")))
    }
}

fn parse(
    parameters: &BTreeMap<String, String>,
    allowed: ConfigAllowList,
) -> Result<ClassParams, String> {
    check_keys(parameters)?;
    let endpoint = match parameters.get(ENDPOINT).map(|v| v.trim()) {
        None | Some("") => {
            return Err(format!(
                "parameter {ENDPOINT} is missing: set it to the URL of the S3 API, such as https://s3.example.com or http://minio.storage:9000"
            ));
        }
        Some(raw) => parse_endpoint(raw)?,
    };
    Ok(ClassParams {
        endpoint,
        region: region(parameters)?,
        admin_secret: admin_secret(parameters)?,
        force_delete: force_delete(parameters)?,
        credentials_mode: access::credentials_mode(parameters)?,
        access: access::class_access(parameters)?,
        ownership: ownership(parameters)?,
        allowed,
        settings: settings(parameters)?,
    })
}

/// The class's bucket settings; none on a class that hands out an existing
/// bucket, which other claims share and the provisioner never configures.
fn settings(parameters: &BTreeMap<String, String>) -> Result<ClassConfig, String> {
    let settings = ClassConfig::parse(parameters)?;
    let brownfield = parameters
        .get(BROWNFIELD_BUCKET_PARAMETER)
        .is_some_and(|v| !v.trim().is_empty());
    if brownfield && settings.has_defaults() {
        return Err(format!(
            "sets bucket settings ({}) and hands out an existing bucket ({BROWNFIELD_BUCKET_PARAMETER}), which this provisioner never configures: remove the settings, or remove {BROWNFIELD_BUCKET_PARAMETER} to create a bucket per claim",
            bucket_config::SETTINGS
                .iter()
                .filter(|k| parameters.contains_key(**k))
                .copied()
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    Ok(settings)
}

/// Refuses an empty class, inline credentials and unknown parameters.
fn check_keys(parameters: &BTreeMap<String, String>) -> Result<(), String> {
    if parameters.is_empty() {
        return Err(format!(
            "has no parameters (it may have been deleted): it needs at least {ENDPOINT}, {ADMIN_SECRET_NAME} and {ADMIN_SECRET_NAMESPACE}; recreate the class with the parameters it had"
        ));
    }
    for key in parameters.keys() {
        // A known parameter is never one (credentialsMode names a mode).
        if !is_known(key) && looks_like_inline_credential(key) {
            return Err(format!(
                "parameter {key} looks like an inline credential, which this provisioner refuses (classes are readable cluster-wide): remove it, store AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in a Secret and name it with {ADMIN_SECRET_NAME} and {ADMIN_SECRET_NAMESPACE}"
            ));
        }
    }
    if let Some(unknown) = parameters.keys().find(|k| !is_known(k)) {
        return Err(format!(
            "unknown parameter {unknown}: remove it or fix its spelling; known parameters are {}",
            known().collect::<Vec<_>>().join(", ")
        ));
    }
    Ok(())
}

fn region(parameters: &BTreeMap<String, String>) -> Result<String, String> {
    match parameters.get(REGION).map(|v| v.trim()) {
        None | Some("") => Ok(DEFAULT_REGION.to_owned()),
        Some(region) => {
            let ok = region.len() <= 64
                && region
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.');
            if !ok {
                return Err(format!(
                    "parameter {REGION} is {region:?}: use a region name of at most 64 letters, digits, '-', '_' or '.', such as {DEFAULT_REGION}, or leave it out for {DEFAULT_REGION}"
                ));
            }
            Ok(region.to_owned())
        }
    }
}

fn admin_secret(parameters: &BTreeMap<String, String>) -> Result<SecretRef, String> {
    let name = required(
        parameters,
        ADMIN_SECRET_NAME,
        "the name of the Secret holding the admin credentials",
    )?;
    if let Err(why) = check_dns_name(name, 253, true) {
        return Err(format!(
            "parameter {ADMIN_SECRET_NAME} is {name:?}, which is not a valid Secret name: {why}"
        ));
    }
    let namespace = required(
        parameters,
        ADMIN_SECRET_NAMESPACE,
        "the namespace of that Secret",
    )?;
    if let Err(why) = check_dns_name(namespace, 63, false) {
        return Err(format!(
            "parameter {ADMIN_SECRET_NAMESPACE} is {namespace:?}, which is not a valid namespace name: {why}"
        ));
    }
    Ok(SecretRef {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
    })
}

fn force_delete(parameters: &BTreeMap<String, String>) -> Result<bool, String> {
    match parameters.get(FORCE_DELETE).map(String::as_str) {
        None | Some("") | Some("false") => Ok(false),
        Some("true") => Ok(true),
        Some(other) => Err(format!(
            "parameter {FORCE_DELETE} is {other:?}: set it to \"true\" (deleting a claim deletes its bucket's objects) or \"false\" (the default: a bucket that is not empty is kept and the deletion waits)"
        )),
    }
}

fn ownership(parameters: &BTreeMap<String, String>) -> Result<Ownership, String> {
    match parameters.get(OWNERSHIP).map(|v| v.trim()) {
        None | Some("") | Some("tags") => Ok(Ownership::Tags),
        Some("marker") => Ok(Ownership::Marker),
        Some(other) => Err(format!(
            "parameter {OWNERSHIP} is {other:?}: set it to \"tags\" (the default: the bucket's owner is a bucket tag) or \"marker\" (an object .obc-owner in the bucket and a state bucket, for stores without bucket tagging)"
        )),
    }
}

fn required<'a>(
    parameters: &'a BTreeMap<String, String>,
    key: &str,
    what: &str,
) -> Result<&'a str, String> {
    match parameters.get(key).map(|v| v.trim()) {
        None | Some("") => Err(format!("parameter {key} is missing: set it to {what}")),
        Some(value) => Ok(value),
    }
}

/// Checks an endpoint URL and splits out what the claim's ConfigMap needs.
pub fn parse_endpoint(raw: &str) -> Result<StoreEndpoint, String> {
    let fix = "use a URL such as https://s3.example.com or http://minio.storage:9000";
    let url = Url::parse(raw)
        .map_err(|e| format!("parameter {ENDPOINT} is {raw:?}, which is not a URL ({e}): {fix}"))?;
    let tls = match url.scheme() {
        "https" => true,
        "http" => false,
        other => {
            return Err(format!(
                "parameter {ENDPOINT} has scheme {other:?}: only http and https are supported; {fix}"
            ));
        }
    };
    if !url.username().is_empty() || url.password().is_some() {
        // Do not echo the value: it holds a credential.
        return Err(format!(
            "parameter {ENDPOINT} contains a user name or password: remove it from the URL and put the credentials in the Secret named by {ADMIN_SECRET_NAME}"
        ));
    }
    let host = match url.host_str() {
        Some(host) if !host.is_empty() => host.to_owned(),
        _ => {
            return Err(format!(
                "parameter {ENDPOINT} is {raw:?}, which has no host: {fix}"
            ));
        }
    };
    if url.path() != "/" && !url.path().is_empty() {
        return Err(format!(
            "parameter {ENDPOINT} is {raw:?}, which has a path ({}): give the root URL of the S3 API; buckets are addressed path-style under it",
            url.path()
        ));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(format!(
            "parameter {ENDPOINT} is {raw:?}, which has a query or fragment: remove it"
        ));
    }
    let port = url
        .port_or_known_default()
        .ok_or_else(|| format!("parameter {ENDPOINT} is {raw:?}, which has no port: {fix}"))?;
    Ok(StoreEndpoint {
        url: url.as_str().trim_end_matches('/').to_owned(),
        host,
        port,
        tls,
    })
}

/// Whether a parameter name looks like it carries a credential inline
/// (`accessKey`, `secret_key`, `AWS_SECRET_ACCESS_KEY`, `password`...).
pub fn looks_like_inline_credential(key: &str) -> bool {
    let norm: String = key
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect();
    [
        "accesskey",
        "secretkey",
        "secretaccesskey",
        "password",
        "sessiontoken",
        "credential",
    ]
    .iter()
    .any(|bad| norm.contains(bad))
}

/// Checks a DNS-1123 subdomain (`dots` true) or label.
fn check_dns_name(name: &str, max: usize, dots: bool) -> Result<(), String> {
    if name.len() > max {
        return Err(format!("it is longer than {max} characters"));
    }
    let allowed =
        |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || (dots && c == '.');
    if let Some(bad) = name.chars().find(|c| !allowed(*c)) {
        return Err(format!(
            "it contains {bad:?}; use lowercase letters, digits and '-'{}",
            if dots { " or '.'" } else { "" }
        ));
    }
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if !alnum(name.chars().next()) || !alnum(name.chars().last()) {
        return Err("it must begin and end with a lowercase letter or digit".into());
    }
    Ok(())
}

#[cfg(test)]
#[path = "params_tests.rs"]
mod tests;
