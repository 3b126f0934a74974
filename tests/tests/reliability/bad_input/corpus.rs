//! The bad-input corpus: classes the sample refuses, claims that must not be
//! served and what each must say, and raw objects admission must reject.

use std::collections::BTreeMap;

use lib_provisioner::api::{ClaimPhase, ObjectBucketClaimSpec};
use obc_tests::TestEnv;
use obc_tests::reliability::sample_params;
use serde_json::json;

/// The working class the corpus's claims use when their class is not the
/// problem.
pub(super) const GOOD: &str = "good";

/// A claim that must not be served, and what it must say.
pub(super) struct BadClaim {
    pub(super) name: &'static str,
    pub(super) spec: ObjectBucketClaimSpec,
    pub(super) phase: ClaimPhase,
    pub(super) needle: &'static str,
    /// Text the message must not contain (a credential).
    pub(super) not: Option<&'static str>,
}

pub(super) fn spec_of(
    class: &str,
    exact: Option<&str>,
    prefix: Option<&str>,
) -> ObjectBucketClaimSpec {
    ObjectBucketClaimSpec {
        storage_class_name: class.into(),
        bucket_name: exact.map(str::to_owned),
        generate_bucket_name: prefix.map(str::to_owned),
        ..Default::default()
    }
}

/// Classes whose parameters the sample refuses (`password` is in one
/// endpoint's user info), and one whose brownfield bucket name is invalid.
pub(super) fn bad_classes(
    env: &TestEnv,
    password: &str,
) -> Vec<(&'static str, BTreeMap<String, String>)> {
    let with = |extra: &[(&str, &str)], drop: &[&str]| {
        let mut p = sample_params(env);
        for k in drop {
            p.remove(*k);
        }
        for (k, v) in extra {
            p.insert((*k).into(), (*v).into());
        }
        p
    };
    vec![
        (
            "c-inline-key",
            with(&[("accessKey", "AKIAEXAMPLE123")], &[]),
        ),
        ("c-ftp", with(&[("endpoint", "ftp://127.0.0.1:21")], &[])),
        ("c-not-url", with(&[("endpoint", "not a url")], &[])),
        (
            "c-userinfo",
            with(
                &[("endpoint", &format!("http://admin:{password}@127.0.0.1:9"))],
                &[],
            ),
        ),
        (
            "c-no-secret",
            with(&[("adminSecretName", "missing-admin")], &[]),
        ),
        (
            "c-half-secret",
            with(&[("adminSecretName", "half-admin")], &[]),
        ),
        ("c-typo", with(&[("forcedelete", "true")], &[])),
        ("c-force-yes", with(&[("forceDelete", "yes")], &[])),
        ("c-no-endpoint", with(&[], &["endpoint"])),
        ("c-region", with(&[("region", "us east 1")], &[])),
        (
            "c-brown-missing",
            with(&[("bucketName", "no-such-bucket")], &[]),
        ),
        ("c-brown-invalid", with(&[("bucketName", "Not_Valid")], &[])),
        ("c-empty", Default::default()),
    ]
}

/// The claims that must not be served: each with the phase it must reach and
/// what its message and an Event must say (`password` must not be echoed).
pub(super) fn bad_claims(password: &'static str) -> Vec<BadClaim> {
    let good = GOOD;
    let long: &'static str = Box::leak("a".repeat(64).into_boxed_str());
    vec![
        BadClaim {
            name: "no-class",
            spec: spec_of("", None, Some("x")),
            phase: ClaimPhase::Failed,
            needle: "spec.storageClassName is empty",
            not: None,
        },
        BadClaim {
            name: "unknown-class",
            spec: spec_of("no-such-class", None, Some("x")),
            phase: ClaimPhase::Pending,
            needle: "StorageClass \"no-such-class\" does not exist",
            not: None,
        },
        BadClaim {
            name: "no-name",
            spec: spec_of(good, None, None),
            phase: ClaimPhase::Failed,
            needle: "set spec.generateBucketName",
            not: None,
        },
        BadClaim {
            name: "both-names",
            spec: spec_of(good, Some("abc-def"), Some("photos")),
            phase: ClaimPhase::Failed,
            needle: "keep only one",
            not: None,
        },
        BadClaim {
            name: "upper",
            spec: spec_of(good, Some("Upper-Case"), None),
            phase: ClaimPhase::Failed,
            needle: "lowercase letters",
            not: None,
        },
        BadClaim {
            name: "short",
            spec: spec_of(good, Some("ab"), None),
            phase: ClaimPhase::Failed,
            needle: "3 to 63",
            not: None,
        },
        BadClaim {
            name: "long",
            spec: spec_of(good, Some(long), None),
            phase: ClaimPhase::Failed,
            needle: "3 to 63",
            not: None,
        },
        BadClaim {
            name: "ip",
            spec: spec_of(good, Some("192.168.10.1"), None),
            phase: ClaimPhase::Failed,
            needle: "IP address",
            not: None,
        },
        BadClaim {
            name: "underscore",
            spec: spec_of(good, Some("my_bucket"), None),
            phase: ClaimPhase::Failed,
            needle: "contains '_'",
            not: None,
        },
        BadClaim {
            name: "dots",
            spec: spec_of(good, Some("my..bucket"), None),
            phase: ClaimPhase::Failed,
            needle: "'..'",
            not: None,
        },
        BadClaim {
            name: "xn",
            spec: spec_of(good, Some("xn--bucket"), None),
            phase: ClaimPhase::Failed,
            needle: "xn--",
            not: None,
        },
        BadClaim {
            name: "bad-prefix",
            spec: spec_of(good, None, Some("-_-")),
            phase: ClaimPhase::Failed,
            needle: "generateBucketName",
            not: None,
        },
        BadClaim {
            name: "taken-secret",
            spec: spec_of(good, Some("fine-name-2"), None),
            phase: ClaimPhase::Failed,
            needle: "a Secret named \"taken-secret\" already exists",
            not: None,
        },
        BadClaim {
            name: "theirs",
            spec: spec_of(good, Some("someone-elses"), None),
            phase: ClaimPhase::Failed,
            needle: "exists and was not created for this claim",
            not: None,
        },
        BadClaim {
            name: "brown-mismatch",
            spec: spec_of("c-brown-missing", Some("another-bucket"), None),
            phase: ClaimPhase::Failed,
            needle: "grants access to the existing bucket",
            not: None,
        },
        BadClaim {
            name: "inline-key",
            spec: spec_of("c-inline-key", None, Some("k")),
            phase: ClaimPhase::Failed,
            needle: "looks like an inline credential",
            not: Some("AKIAEXAMPLE123"),
        },
        BadClaim {
            name: "ftp",
            spec: spec_of("c-ftp", None, Some("f")),
            phase: ClaimPhase::Failed,
            needle: "only http and https",
            not: None,
        },
        BadClaim {
            name: "not-url",
            spec: spec_of("c-not-url", None, Some("u")),
            phase: ClaimPhase::Failed,
            needle: "not a URL",
            not: None,
        },
        BadClaim {
            name: "userinfo",
            spec: spec_of("c-userinfo", None, Some("u")),
            phase: ClaimPhase::Failed,
            needle: "contains a user name or password",
            not: Some(password),
        },
        BadClaim {
            name: "no-secret",
            spec: spec_of("c-no-secret", None, Some("s")),
            phase: ClaimPhase::Failed,
            needle: "admin Secret obc-system/missing-admin not found",
            not: None,
        },
        BadClaim {
            name: "half-secret",
            spec: spec_of("c-half-secret", None, Some("s")),
            phase: ClaimPhase::Failed,
            needle: "lacks AWS_SECRET_ACCESS_KEY",
            not: Some("only-the-id"),
        },
        BadClaim {
            name: "typo",
            spec: spec_of("c-typo", None, Some("t")),
            phase: ClaimPhase::Failed,
            needle: "unknown parameter forcedelete",
            not: None,
        },
        BadClaim {
            name: "force-yes",
            spec: spec_of("c-force-yes", None, Some("t")),
            phase: ClaimPhase::Failed,
            needle: "parameter forceDelete is \"yes\"",
            not: None,
        },
        BadClaim {
            name: "no-endpoint",
            spec: spec_of("c-no-endpoint", None, Some("e")),
            phase: ClaimPhase::Failed,
            needle: "parameter endpoint is missing",
            not: None,
        },
        BadClaim {
            name: "region",
            spec: spec_of("c-region", None, Some("r")),
            phase: ClaimPhase::Failed,
            needle: "parameter region is \"us east 1\"",
            not: None,
        },
        BadClaim {
            name: "brown-missing",
            spec: spec_of("c-brown-missing", None, None),
            phase: ClaimPhase::Failed,
            needle: "bucket no-such-bucket does not exist",
            not: None,
        },
        BadClaim {
            name: "empty-class",
            spec: spec_of("c-empty", None, Some("e")),
            phase: ClaimPhase::Failed,
            needle: "has no parameters",
            not: None,
        },
        BadClaim {
            name: "brown-invalid",
            spec: spec_of("c-brown-invalid", None, None),
            phase: ClaimPhase::Failed,
            needle: "StorageClass parameter bucketName",
            not: None,
        },
    ]
}

/// The bad claims the library refuses before it prepares them: they never
/// get the finalizer, so they never reach the provisioner (the others are
/// refused by the sample itself, once the finalizer is on).
pub(super) const REFUSED_BEFORE_PREPARING: [&str; 15] = [
    "no-class",
    "unknown-class",
    "no-name",
    "both-names",
    "upper",
    "short",
    "long",
    "ip",
    "underscore",
    "dots",
    "xn",
    "bad-prefix",
    "taken-secret",
    "brown-mismatch",
    "brown-invalid",
];

/// Raw claims admission must reject, each with what its rejection must name.
pub(super) fn raw_rejections() -> [(&'static str, serde_json::Value, &'static str); 5] {
    let good = GOOD;
    // Past the apiserver's 3 MiB request limit (between etcd's 1.5 MiB and
    // that, the apiserver answers a bare 500 from etcd's gRPC limit).
    let big = "y".repeat(3 * 1024 * 1024 + 512 * 1024);
    [
        (
            "raw-number",
            json!({"storageClassName": good, "bucketName": 12345}),
            "spec.bucketName",
        ),
        (
            "raw-config",
            json!({"storageClassName": good, "generateBucketName": "r", "additionalConfig": {"quota": 5}}),
            "spec.additionalConfig",
        ),
        (
            "raw-class",
            json!({"storageClassName": ["a", "b"], "generateBucketName": "r"}),
            "spec.storageClassName",
        ),
        (
            "raw-too-big",
            json!({"storageClassName": good, "generateBucketName": "r", "additionalConfig": {"blob": big}}),
            "too large",
        ),
        (
            "Raw_Bad_Name",
            json!({"storageClassName": good, "generateBucketName": "r"}),
            "metadata.name",
        ),
    ]
}
