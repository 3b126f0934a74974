//! Bucket settings a claim asks for in `spec.additionalConfig`, or its class
//! sets for every claim: versioning, lifecycle rules, a bucket policy and
//! object lock; checked against the class's bounds without any I/O. Which
//! keys a claim may set at all is the class's
//! [`allowedConfig`](lib_provisioner::provisioner::ConfigAllowList) (none of
//! these unless the class lists them).
//!
//! ```yaml
//! # StorageClass parameters (a BucketClass's for COSI, which has no
//! # per-claim config: there these are the bucket's settings)
//! allowedConfig: maxSize,versioning,bucketLifecycle,bucketPolicy
//! versioning: Enabled          # a default for every claim of the class
//! lifecycleMaxDays: "365"      # the longest expiration a rule may set
//! bucketPolicyPrincipals: ""   # whom a tenant's Allow may name ("*": anyone)
//! objectLockMaxDays: "30"      # the longest default retention
//! # ObjectBucketClaim spec.additionalConfig
//! versioning: Suspended        # Enabled or Suspended; unset: never enabled
//! bucketLifecycle: |           # JSON or YAML, as put-bucket-lifecycle takes
//!   Rules:
//!   - {ID: logs, Status: Enabled, Filter: {Prefix: logs/}, Expiration: {Days: 30}}
//! bucketPolicy: '{"Statement":[{"Effect":"Deny","Principal":"*","Action":"s3:DeleteObject","Resource":"arn:aws:s3:::${bucket}/keep/*"}]}'
//! objectLockMode: GOVERNANCE   # with objectLockDays; only at creation
//! objectLockDays: "7"
//! ```
//!
//! A claim's value replaces the class's default of the same key. Once
//! applied, the claim's spec (or the class default) is what the bucket
//! holds: changes that cannot be made ([`check_change`]) are refused rather
//! than half made.

use std::collections::BTreeMap;
use std::fmt;

pub mod lifecycle;
pub mod policy;

pub use lifecycle::Lifecycle;
pub use policy::TenantPolicy;

/// Claim option and class default: `Enabled` or `Suspended`.
pub const VERSIONING: &str = "versioning";
/// Claim option and class default: lifecycle rules ([`Lifecycle`]).
pub const BUCKET_LIFECYCLE: &str = "bucketLifecycle";
/// Claim option and class default: the tenant's bucket policy
/// ([`TenantPolicy`]).
pub const BUCKET_POLICY: &str = "bucketPolicy";
/// Claim option and class default: `GOVERNANCE` or `COMPLIANCE`.
pub const OBJECT_LOCK_MODE: &str = "objectLockMode";
/// Claim option and class default: default retention in days.
pub const OBJECT_LOCK_DAYS: &str = "objectLockDays";
/// Class bound: the longest expiration (days) a lifecycle rule may set.
pub const LIFECYCLE_MAX_DAYS: &str = "lifecycleMaxDays";
/// Class bound: principals a tenant's Allow statement may name.
pub const POLICY_PRINCIPALS: &str = "bucketPolicyPrincipals";
/// Class bound: the longest default retention (days).
pub const OBJECT_LOCK_MAX_DAYS: &str = "objectLockMaxDays";

/// The settings keys, as claim options and class defaults.
pub const SETTINGS: [&str; 5] = [
    VERSIONING,
    BUCKET_LIFECYCLE,
    BUCKET_POLICY,
    OBJECT_LOCK_MODE,
    OBJECT_LOCK_DAYS,
];
/// The class parameters this module reads (settings and bounds).
pub const CLASS_KEYS: [&str; 8] = [
    VERSIONING,
    BUCKET_LIFECYCLE,
    BUCKET_POLICY,
    OBJECT_LOCK_MODE,
    OBJECT_LOCK_DAYS,
    LIFECYCLE_MAX_DAYS,
    POLICY_PRINCIPALS,
    OBJECT_LOCK_MAX_DAYS,
];

/// The longest retention when the class sets no bound: ten years.
const LOCK_DAYS_LIMIT: u32 = 3650;

/// A bucket's versioning, once set: it never returns to unset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Versioning {
    /// Every write keeps the previous version.
    Enabled,
    /// No new versions; the ones kept stay.
    Suspended,
}

impl Versioning {
    /// The S3 name of the state.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Enabled => "Enabled",
            Self::Suspended => "Suspended",
        }
    }

    fn parse(value: &str) -> Result<Self, String> {
        match value.trim() {
            "Enabled" | "enabled" => Ok(Self::Enabled),
            "Suspended" | "suspended" => Ok(Self::Suspended),
            other => Err(format!(
                "{VERSIONING} is {other:?}: set it to \"Enabled\" or \"Suspended\", or leave it out for a bucket that never keeps versions"
            )),
        }
    }
}

/// Object lock's retention mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockMode {
    /// Users with the bypass permission may still delete.
    Governance,
    /// Nobody deletes a locked version before its retention ends.
    Compliance,
}

impl LockMode {
    /// The S3 name of the mode.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Governance => "GOVERNANCE",
            Self::Compliance => "COMPLIANCE",
        }
    }
}

/// Object lock with a default retention, for every new object version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ObjectLock {
    /// The retention mode.
    pub mode: LockMode,
    /// The default retention, in days.
    pub days: i32,
}

/// The settings a bucket should hold; `None`: not managed (and, for
/// versioning, never enabled).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BucketConfig {
    /// Versioning; implied `Enabled` by object lock.
    pub versioning: Option<Versioning>,
    /// Lifecycle rules, replaced whole.
    pub lifecycle: Option<Lifecycle>,
    /// The tenant's policy statements, replaced whole.
    pub policy: Option<TenantPolicy>,
    /// Object lock, set at creation only.
    pub object_lock: Option<ObjectLock>,
}

impl BucketConfig {
    /// Whether anything is managed.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// A class's side of the settings: its defaults and bounds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClassConfig {
    defaults: BTreeMap<String, String>,
    lifecycle_max_days: Option<u32>,
    principals: Vec<String>,
    lock_max_days: Option<u32>,
}

impl ClassConfig {
    /// Reads the class's defaults and bounds. The defaults are checked
    /// with the first bucket (a policy names it), the bounds here.
    pub fn parse(parameters: &BTreeMap<String, String>) -> Result<Self, String> {
        let defaults = SETTINGS
            .iter()
            .filter_map(|k| parameters.get(*k).map(|v| ((*k).to_owned(), v.clone())))
            .collect();
        let principals = parameters
            .get(POLICY_PRINCIPALS)
            .map(|v| {
                v.split(',')
                    .map(str::trim)
                    .filter(|p| !p.is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        Ok(Self {
            defaults,
            lifecycle_max_days: days_bound(parameters, LIFECYCLE_MAX_DAYS)?,
            principals,
            lock_max_days: days_bound(parameters, OBJECT_LOCK_MAX_DAYS)?,
        })
    }

    /// Whether the class sets any setting for its claims.
    pub fn has_defaults(&self) -> bool {
        !self.defaults.is_empty()
    }

    /// The settings for a claim's `bucket`: its `config` over the class's
    /// defaults, checked against the bounds. The message names the key.
    pub fn resolve(
        &self,
        config: &BTreeMap<String, String>,
        bucket: &str,
    ) -> Result<BucketConfig, String> {
        let value = |key: &str| -> Option<(&str, &str)> {
            match config.get(key) {
                Some(v) => Some(("additionalConfig", v.as_str())),
                None => self.defaults.get(key).map(|v| ("parameter", v.as_str())),
            }
        };
        let versioning = value(VERSIONING)
            .map(|(from, v)| Versioning::parse(v).map_err(|e| format!("{from} {e}")))
            .transpose()?;
        let lifecycle = value(BUCKET_LIFECYCLE)
            .map(|(_, v)| Lifecycle::parse(v, self.lifecycle_max_days))
            .transpose()?;
        let policy = value(BUCKET_POLICY)
            .map(|(_, v)| TenantPolicy::parse(v, bucket, &self.principals))
            .transpose()?;
        let object_lock = self.lock(value(OBJECT_LOCK_MODE), value(OBJECT_LOCK_DAYS))?;
        let versioning = match (object_lock, versioning) {
            (Some(_), Some(Versioning::Suspended)) => {
                return Err(format!(
                    "{VERSIONING} is \"Suspended\", but object lock needs versioning enabled: remove {VERSIONING} (object lock enables it) or remove {OBJECT_LOCK_MODE} and {OBJECT_LOCK_DAYS}"
                ));
            }
            (Some(_), _) => Some(Versioning::Enabled),
            (None, v) => v,
        };
        Ok(BucketConfig {
            versioning,
            lifecycle,
            policy,
            object_lock,
        })
    }

    fn lock(
        &self,
        mode: Option<(&str, &str)>,
        days: Option<(&str, &str)>,
    ) -> Result<Option<ObjectLock>, String> {
        let (mode, days) = match (mode, days) {
            (None, None) => return Ok(None),
            (Some((_, mode)), Some((_, days))) => (mode, days),
            _ => {
                return Err(format!(
                    "object lock needs both {OBJECT_LOCK_MODE} (GOVERNANCE or COMPLIANCE) and {OBJECT_LOCK_DAYS} (the default retention in days): set both or neither"
                ));
            }
        };
        let mode = match mode.trim() {
            "GOVERNANCE" | "governance" => LockMode::Governance,
            "COMPLIANCE" | "compliance" => LockMode::Compliance,
            other => {
                return Err(format!(
                    "{OBJECT_LOCK_MODE} is {other:?}: set it to \"GOVERNANCE\" (holders of the bypass permission may still delete) or \"COMPLIANCE\" (nobody deletes a version before its retention ends)"
                ));
            }
        };
        let limit = self.lock_max_days.unwrap_or(LOCK_DAYS_LIMIT);
        let days = match days.trim().parse::<u32>() {
            Ok(d) if (1..=limit).contains(&d) => d,
            _ => {
                return Err(format!(
                    "{OBJECT_LOCK_DAYS} is {days:?}: set a whole number of days from 1 to {limit}{}",
                    if self.lock_max_days.is_some() {
                        format!(" (the class's {OBJECT_LOCK_MAX_DAYS})")
                    } else {
                        String::new()
                    }
                ));
            }
        };
        Ok(Some(ObjectLock {
            mode,
            days: i32::try_from(days).unwrap_or(i32::MAX),
        }))
    }
}

fn days_bound(parameters: &BTreeMap<String, String>, key: &str) -> Result<Option<u32>, String> {
    match parameters.get(key).map(|v| v.trim()) {
        None | Some("") => Ok(None),
        Some(v) => match v.parse::<u32>() {
            Ok(d) if d >= 1 => Ok(Some(d)),
            _ => Err(format!(
                "parameter {key} is {v:?}: set a whole number of days, at least 1, or leave it out for no bound"
            )),
        },
    }
}

/// Refuses what a Bound bucket cannot be changed to: versioning back to
/// never enabled, and any change of object lock (set only at creation).
pub fn check_change(old: &BucketConfig, new: &BucketConfig) -> Result<(), String> {
    if let (Some(was), None) = (old.versioning, new.versioning) {
        return Err(format!(
            "{VERSIONING} was {:?} and cannot be removed: a bucket that kept versions never returns to having had none; set {VERSIONING}: Suspended to stop keeping new versions",
            was.as_str()
        ));
    }
    if old.object_lock != new.object_lock {
        let was = Lock(old.object_lock);
        let now = Lock(new.object_lock);
        return Err(format!(
            "object lock can only be set when the bucket is created (it was {was}, the claim now asks for {now}): restore {OBJECT_LOCK_MODE} and {OBJECT_LOCK_DAYS} as they were, or create a new claim with the object lock you need"
        ));
    }
    Ok(())
}

struct Lock(Option<ObjectLock>);

impl fmt::Display for Lock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            None => f.write_str("off"),
            Some(l) => write!(f, "{} for {} days", l.mode.as_str(), l.days),
        }
    }
}

#[cfg(test)]
#[path = "mod_tests.rs"]
mod tests;
