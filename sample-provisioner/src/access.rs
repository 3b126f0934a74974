//! What a claim may do with its bucket: the credentials mode and access
//! mode of its StorageClass, and the options a claim sets in
//! `spec.additionalConfig`. Parsed without I/O, so every rule is unit-tested.
//!
//! ```yaml
//! # StorageClass parameters
//! credentialsMode: per-claim      # default; or shared-admin (stores without a user API)
//! accessMode: read-write          # default; or read-only (every claim of the class)
//! # ObjectBucketClaim spec.additionalConfig
//! accessMode: read-only           # narrows the class's mode, never widens it
//! maxSize: 10Gi                   # hard quota on a bucket created for the claim
//! maxObjects: "1000"              # refused: MinIO's quota API limits size only
//! ```

use std::collections::BTreeMap;
use std::fmt;

/// StorageClass parameter choosing how claims get credentials.
pub const CREDENTIALS_MODE: &str = "credentialsMode";
/// StorageClass parameter and claim option choosing read-write or read-only.
pub const ACCESS_MODE: &str = "accessMode";
/// Claim option: hard limit on the bucket's size (Rook's name).
pub const MAX_SIZE: &str = "maxSize";
/// Claim option: limit on the bucket's object count (Rook's name).
pub const MAX_OBJECTS: &str = "maxObjects";

/// Each claim gets its own user whose policy reaches only its bucket.
pub const PER_CLAIM_MODE: &str = "per-claim";
/// Every claim gets the class's admin credentials.
pub const SHARED_ADMIN_MODE: &str = "shared-admin";

/// What a claim's credentials may do on its bucket.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Access {
    /// Read, write, delete and list objects.
    #[default]
    ReadWrite,
    /// Read and list objects only.
    ReadOnly,
}

impl Access {
    /// The parameter value naming this mode.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ReadWrite => "read-write",
            Self::ReadOnly => "read-only",
        }
    }

    fn parse(where_: &str, value: &str) -> Result<Self, String> {
        match value.trim() {
            "" | "read-write" => Ok(Self::ReadWrite),
            "read-only" => Ok(Self::ReadOnly),
            other => Err(format!(
                "{where_} {ACCESS_MODE} is {other:?}: set it to \"read-write\" (the default) or \"read-only\""
            )),
        }
    }
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The class's `credentialsMode`, checked (default [`PER_CLAIM_MODE`]).
pub fn credentials_mode(parameters: &BTreeMap<String, String>) -> Result<&'static str, String> {
    match parameters.get(CREDENTIALS_MODE).map(|v| v.trim()) {
        None | Some("") | Some(PER_CLAIM_MODE) => Ok(PER_CLAIM_MODE),
        Some(SHARED_ADMIN_MODE) => Ok(SHARED_ADMIN_MODE),
        Some(other) => Err(format!(
            "parameter {CREDENTIALS_MODE} is {other:?}: set it to \"{PER_CLAIM_MODE}\" (the default: each claim gets its own user, allowed only its bucket, through the store's MinIO admin API) or \"{SHARED_ADMIN_MODE}\" (every claim gets the admin credentials: only for stores without a user API)"
        )),
    }
}

/// The class's `accessMode`, checked (default read-write).
pub fn class_access(parameters: &BTreeMap<String, String>) -> Result<Access, String> {
    Access::parse("parameter", parameters.get(ACCESS_MODE).map_or("", |v| v))
}

/// A claim's options from `spec.additionalConfig`, checked against its
/// class.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClaimOptions {
    /// The access the claim's credentials get.
    pub access: Access,
    /// Hard quota in bytes on a bucket created for the claim.
    pub max_size: Option<u64>,
}

impl ClaimOptions {
    /// Reads `additional_config` for a claim of a class with access
    /// `class`; `brownfield` when the claim gets the class's existing bucket.
    /// Keys it does not know are left alone (the library copies
    /// `additionalConfig` into the claim's ConfigMap).
    pub fn parse(
        additional_config: &BTreeMap<String, String>,
        class: Access,
        brownfield: bool,
    ) -> Result<Self, String> {
        let access = match additional_config.get(ACCESS_MODE) {
            None => class,
            Some(value) => match (class, Access::parse("additionalConfig", value)?) {
                (Access::ReadOnly, Access::ReadWrite) => {
                    return Err(format!(
                        "additionalConfig {ACCESS_MODE} is \"read-write\", but the StorageClass grants its claims read-only access: remove {ACCESS_MODE} or use a StorageClass with accessMode read-write"
                    ));
                }
                (_, asked) => asked,
            },
        };
        if additional_config.contains_key(MAX_OBJECTS) {
            return Err(format!(
                "additionalConfig {MAX_OBJECTS} is not supported: the store's quota API (MinIO's set-bucket-quota) limits a bucket's size only; remove {MAX_OBJECTS} and use {MAX_SIZE}"
            ));
        }
        let max_size = match additional_config.get(MAX_SIZE) {
            None => None,
            Some(_) if brownfield => {
                return Err(format!(
                    "additionalConfig {MAX_SIZE} applies to buckets created for a claim, but this StorageClass hands out its existing bucket (bucketName), which other claims share: remove {MAX_SIZE}, or set the quota on the bucket itself"
                ));
            }
            Some(value) => Some(parse_size(value).map_err(|why| {
                format!(
                    "additionalConfig {MAX_SIZE} is {value:?}: {why}; use a byte count with an optional suffix, such as 500Mi, 10Gi or 2G"
                )
            })?),
        };
        Ok(Self { access, max_size })
    }
}

/// Parses a size as Kubernetes quantities spell it: digits and an optional
/// binary (`Ki`..`Ei`) or decimal (`k`, `M`..`E`) suffix. At least 1 byte.
pub fn parse_size(value: &str) -> Result<u64, String> {
    let value = value.trim();
    let digits = value.bytes().take_while(u8::is_ascii_digit).count();
    let (number, suffix) = value.split_at(digits);
    if number.is_empty() {
        return Err("it does not start with a number".into());
    }
    let factor: u64 = match suffix {
        "" => 1,
        "k" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        "P" => 1_000_000_000_000_000,
        "E" => 1_000_000_000_000_000_000,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        "Pi" => 1 << 50,
        "Ei" => 1 << 60,
        other => return Err(format!("unknown suffix {other:?}")),
    };
    let bytes = number
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(factor))
        .ok_or_else(|| "it is too large".to_owned())?;
    if bytes == 0 {
        return Err("a quota of 0 bytes would refuse every write".into());
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn per_claim_is_the_default_and_shared_admin_is_explicit() {
        assert_eq!(credentials_mode(&map(&[])), Ok(PER_CLAIM_MODE));
        assert_eq!(
            credentials_mode(&map(&[(CREDENTIALS_MODE, "shared-admin")])),
            Ok(SHARED_ADMIN_MODE)
        );
        let e = credentials_mode(&map(&[(CREDENTIALS_MODE, "admin")])).expect_err("refused");
        assert!(
            e.contains("\"per-claim\"") && e.contains("\"shared-admin\""),
            "{e}"
        );
    }

    #[test]
    fn a_claim_may_narrow_its_access_but_not_widen_it() {
        let ro = map(&[(ACCESS_MODE, "read-only")]);
        let rw = map(&[(ACCESS_MODE, "read-write")]);
        assert_eq!(class_access(&ro), Ok(Access::ReadOnly));
        assert_eq!(class_access(&map(&[])), Ok(Access::ReadWrite));
        let parse = |c, class| ClaimOptions::parse(c, class, false);
        assert_eq!(
            parse(&ro, Access::ReadWrite).map(|o| o.access),
            Ok(Access::ReadOnly)
        );
        let none = map(&[]);
        assert_eq!(
            parse(&none, Access::ReadOnly).map(|o| o.access),
            Ok(Access::ReadOnly)
        );
        let e = parse(&rw, Access::ReadOnly).expect_err("refused");
        assert!(e.contains("grants its claims read-only access"), "{e}");
        let e = parse(&map(&[(ACCESS_MODE, "rw")]), Access::ReadWrite).expect_err("refused");
        assert!(e.contains("\"read-only\""), "{e}");
    }

    #[test]
    fn quotas_are_checked() {
        let parse = |v: &str, brownfield| {
            ClaimOptions::parse(&map(&[(MAX_SIZE, v)]), Access::ReadWrite, brownfield)
        };
        assert_eq!(parse("10Gi", false).map(|o| o.max_size), Ok(Some(10 << 30)));
        assert_eq!(
            parse("2G", false).map(|o| o.max_size),
            Ok(Some(2_000_000_000))
        );
        assert_eq!(parse(" 4096 ", false).map(|o| o.max_size), Ok(Some(4096)));
        for bad in ["", "ten", "10GB", "0", "-1", "99999999999Ei"] {
            let e = parse(bad, false).expect_err("refused");
            assert!(e.contains("such as 500Mi"), "{bad}: {e}");
        }
        assert!(
            parse("1Gi", true)
                .expect_err("refused")
                .contains("other claims share")
        );
        let e = ClaimOptions::parse(&map(&[(MAX_OBJECTS, "10")]), Access::ReadWrite, false)
            .expect_err("refused");
        assert!(e.contains("limits a bucket's size only"), "{e}");
        // Keys of other tools are left alone.
        assert_eq!(
            ClaimOptions::parse(&map(&[("app", "x")]), Access::ReadWrite, false),
            Ok(ClaimOptions::default())
        );
    }
}
