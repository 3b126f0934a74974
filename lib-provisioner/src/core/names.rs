//! Names: bucket name validation and generation, ObjectBucket names, labels.
//!
//! ```
//! use lib_provisioner::names;
//!
//! assert_eq!(names::object_bucket_name("team-a", "photos"), "obc-team-a-photos");
//! assert!(names::validate_bucket_name("photos-2024").is_ok());
//! assert!(names::validate_bucket_name("Photos").is_err());
//! let generated = names::generate_bucket_name("photos").unwrap();
//! assert!(generated.starts_with("photos-"));
//! ```

use rand::Rng;

/// Length of the random suffix of a generated bucket name.
pub const GENERATED_SUFFIX_LEN: usize = 8;
/// Longest bucket name S3 accepts.
pub const MAX_BUCKET_NAME_LEN: usize = 63;
const MIN_BUCKET_NAME_LEN: usize = 3;
const SUFFIX_ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";

/// The ObjectBucket a claim binds to: `obc-<namespace>-<name>`, the name the
/// Go library uses, so that its ObjectBuckets are found again on takeover.
pub fn object_bucket_name(namespace: &str, claim_name: &str) -> String {
    format!("obc-{namespace}-{claim_name}")
}

/// The value of the `bucket-provisioner` label for a provisioner name.
///
/// Label values may not contain `/`, which provisioner names usually do
/// (`ceph.rook.io/bucket`); like the Go library, it becomes `-`.
pub fn provisioner_label_value(provisioner: &str) -> String {
    provisioner.replace('/', "-")
}

/// Checks an S3 bucket name against the rules every S3 store applies.
///
/// The error says which rule is broken, in words a user can act on.
pub fn validate_bucket_name(name: &str) -> Result<(), String> {
    let len = name.len();
    if !(MIN_BUCKET_NAME_LEN..=MAX_BUCKET_NAME_LEN).contains(&len) {
        return Err(format!(
            "bucket name {name:?} is {len} characters long; it must be 3 to 63"
        ));
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-' || *c == '.'))
    {
        return Err(format!(
            "bucket name {name:?} contains {bad:?}; use only lowercase letters, digits, '-' and '.'"
        ));
    }
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if !alnum(name.chars().next()) || !alnum(name.chars().last()) {
        return Err(format!(
            "bucket name {name:?} must begin and end with a lowercase letter or digit"
        ));
    }
    if name.contains("..") || name.contains(".-") || name.contains("-.") {
        return Err(format!(
            "bucket name {name:?} must not contain '..', '.-' or '-.'"
        ));
    }
    if name.split('.').count() == 4 && name.split('.').all(|p| p.parse::<u8>().is_ok()) {
        return Err(format!(
            "bucket name {name:?} looks like an IP address, which S3 does not allow"
        ));
    }
    for prefix in ["xn--", "sthree-"] {
        if name.starts_with(prefix) {
            return Err(format!(
                "bucket name {name:?} must not start with {prefix:?}"
            ));
        }
    }
    for suffix in ["-s3alias", "--ol-s3"] {
        if name.ends_with(suffix) {
            return Err(format!("bucket name {name:?} must not end with {suffix:?}"));
        }
    }
    Ok(())
}

/// The part of a `generateBucketName` prefix that is kept: generated names
/// must fit in 63 characters with the hyphen and suffix.
pub fn truncated_prefix(prefix: &str) -> &str {
    let keep = MAX_BUCKET_NAME_LEN - 1 - GENERATED_SUFFIX_LEN;
    let mut end = prefix.len().min(keep);
    while !prefix.is_char_boundary(end) {
        end -= 1;
    }
    prefix[..end].trim_end_matches(['-', '.'])
}

/// Generates `<prefix>-<8 random [a-z0-9]>`, validating the result.
pub fn generate_bucket_name(prefix: &str) -> Result<String, String> {
    let kept = truncated_prefix(prefix);
    if kept.is_empty() {
        return Err(format!(
            "generateBucketName {prefix:?} has no usable characters; start it with a lowercase letter or digit"
        ));
    }
    let mut rng = rand::rng();
    let suffix: String = (0..GENERATED_SUFFIX_LEN)
        .map(|_| SUFFIX_ALPHABET[rng.random_range(0..SUFFIX_ALPHABET.len())] as char)
        .collect();
    let name = format!("{kept}-{suffix}");
    validate_bucket_name(&name).map_err(|e| format!("generateBucketName {prefix:?}: {e}"))?;
    Ok(name)
}

/// Whether `bucket_name` has the shape of a name generated from `prefix`,
/// by this library or by the Go library (which appends a hyphen and a
/// suffix of its own). Older versions wrote the generated name back into
/// `spec.bucketName`; such a claim carries both fields legitimately.
pub fn looks_generated_from(prefix: &str, bucket_name: &str) -> bool {
    let kept = truncated_prefix(prefix);
    !kept.is_empty()
        && bucket_name
            .strip_prefix(kept)
            .and_then(|rest| rest.strip_prefix('-'))
            .is_some_and(|suffix| !suffix.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_names() {
        for name in ["abc", "my-bucket", "my.bucket.2", "a1b", &"a".repeat(63)] {
            assert_eq!(validate_bucket_name(name), Ok(()), "{name}");
        }
    }

    #[test]
    fn invalid_names_say_why() {
        let cases = [
            ("ab", "3 to 63"),
            (&"a".repeat(64) as &str, "3 to 63"),
            ("My-Bucket", "contains 'M'"),
            ("my_bucket", "contains '_'"),
            ("-bucket", "begin and end"),
            ("bucket-", "begin and end"),
            ("my..bucket", "'..'"),
            ("my.-bucket", "'..'"),
            ("192.168.1.1", "IP address"),
            ("xn--bucket", "xn--"),
            ("bucket-s3alias", "-s3alias"),
        ];
        for (name, needle) in cases {
            let err = validate_bucket_name(name).expect_err(name);
            assert!(err.contains(needle), "{name}: {err}");
        }
    }

    #[test]
    fn generated_names_are_valid_and_distinct() {
        let a = generate_bucket_name("photos").expect("valid");
        let b = generate_bucket_name("photos").expect("valid");
        assert_ne!(a, b);
        assert!(a.starts_with("photos-"));
        assert_eq!(a.len(), "photos-".len() + GENERATED_SUFFIX_LEN);
        assert!(looks_generated_from("photos", &a));
    }

    #[test]
    fn long_prefixes_are_truncated_to_fit() {
        let name = generate_bucket_name(&"p".repeat(100)).expect("valid");
        assert_eq!(name.len(), MAX_BUCKET_NAME_LEN);
        assert!(looks_generated_from(&"p".repeat(100), &name));
    }

    #[test]
    fn bad_prefixes_are_rejected() {
        assert!(generate_bucket_name("").is_err());
        assert!(generate_bucket_name("---").is_err());
        assert!(generate_bucket_name("Upper").is_err());
        assert!(generate_bucket_name("under_score").is_err());
    }

    #[test]
    fn go_library_generated_names_are_recognised() {
        // The Go library appends a UUID.
        assert!(looks_generated_from(
            "ceph-bkt",
            "ceph-bkt-3c5a4e2f-8a4b-4a59-9f6c-2b1d8c7e9f10"
        ));
        assert!(!looks_generated_from("ceph-bkt", "other-name"));
        assert!(!looks_generated_from("ceph-bkt", "ceph-bkt"));
        assert!(!looks_generated_from("ceph-bkt", "ceph-bktx-1"));
    }

    #[test]
    fn labels_cannot_hold_slashes() {
        assert_eq!(
            provisioner_label_value("ceph.rook.io/bucket"),
            "ceph.rook.io-bucket"
        );
    }
}
