use super::*;

fn params(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn base() -> Vec<(&'static str, &'static str)> {
    vec![
        (ENDPOINT, "http://minio.storage:9000"),
        (ADMIN_SECRET_NAME, "s3-admin"),
        (ADMIN_SECRET_NAMESPACE, "obc-system"),
    ]
}

fn err(pairs: &[(&str, &str)]) -> String {
    match ClassParams::parse("s3", &params(pairs)) {
        Ok(p) => panic!("expected an error, got {p:?}"),
        Err(e) => {
            assert!(!e.is_retryable(), "parameter errors are permanent: {e:?}");
            e.to_string()
        }
    }
}

fn with(extra: &[(&'static str, &'static str)]) -> Vec<(&'static str, &'static str)> {
    let mut v = base();
    for (k, val) in extra {
        v.retain(|(key, _)| key != k);
        v.push((k, val));
    }
    v
}

#[test]
fn minimal_class_gets_defaults() {
    let p = ClassParams::parse("s3", &params(&base())).expect("valid");
    assert_eq!(
        p,
        ClassParams {
            endpoint: StoreEndpoint {
                url: "http://minio.storage:9000".into(),
                host: "minio.storage".into(),
                port: 9000,
                tls: false,
            },
            region: DEFAULT_REGION.into(),
            admin_secret: SecretRef {
                namespace: "obc-system".into(),
                name: "s3-admin".into()
            },
            force_delete: false,
            credentials_mode: access::PER_CLAIM_MODE,
            access: Access::ReadWrite,
            ownership: Ownership::Tags,
            allowed: ConfigAllowList::from_parameters(
                "StorageClass \"s3\"",
                &BTreeMap::new(),
                &DEFAULT_ALLOWED_CONFIG
            )
            .expect("no list"),
            settings: ClassConfig::default(),
        }
    );
}

#[test]
fn full_class() {
    let p = ClassParams::parse(
        "s3",
        &params(&with(&[
            (ENDPOINT, "https://s3.example.com/"),
            (REGION, "eu-west-1"),
            (FORCE_DELETE, "true"),
            (BROWNFIELD_BUCKET_PARAMETER, "shared"),
            (access::CREDENTIALS_MODE, "shared-admin"),
            (access::ACCESS_MODE, "read-only"),
            (OWNERSHIP, "marker"),
        ])),
    )
    .expect("valid");
    assert_eq!(p.credentials_mode, access::SHARED_ADMIN_MODE);
    assert_eq!(p.access, Access::ReadOnly);
    assert_eq!(p.ownership, Ownership::Marker);
    assert_eq!(p.endpoint.url, "https://s3.example.com");
    assert_eq!(
        (p.endpoint.host.as_str(), p.endpoint.port, p.endpoint.tls),
        ("s3.example.com", 443, true)
    );
    assert_eq!(p.region, "eu-west-1");
    assert!(p.force_delete);
}

#[test]
fn default_ports_and_ipv6() {
    let e = parse_endpoint("http://10.0.0.1").expect("valid");
    assert_eq!((e.host.as_str(), e.port), ("10.0.0.1", 80));
    let e = parse_endpoint("https://[::1]:8443").expect("valid");
    assert_eq!((e.host.as_str(), e.port, e.tls), ("[::1]", 8443, true));
}

#[test]
fn endpoint_is_required_and_must_be_http_or_https() {
    let missing: Vec<_> = base().into_iter().filter(|(k, _)| *k != ENDPOINT).collect();
    let e = err(&missing);
    assert!(e.contains("parameter endpoint is missing"), "{e}");
    assert!(e.contains("StorageClass \"s3\""), "{e}");
    assert!(err(&with(&[(ENDPOINT, "  ")])).contains("missing"));
    let e = err(&with(&[(ENDPOINT, "ftp://s3.example.com")]));
    assert!(
        e.contains("scheme \"ftp\"") && e.contains("http and https"),
        "{e}"
    );
    assert!(err(&with(&[(ENDPOINT, "s3.example.com:9000")])).contains("endpoint"));
    assert!(err(&with(&[(ENDPOINT, "not a url")])).contains("not a URL"));
    assert!(err(&with(&[(ENDPOINT, "http://s3.example.com/bucket")])).contains("has a path"));
    assert!(err(&with(&[(ENDPOINT, "http://s3.example.com/?x=1")])).contains("query"));
}

#[test]
fn endpoint_with_userinfo_is_refused_without_echoing_it() {
    let e = err(&with(&[(ENDPOINT, "http://AKID:topsecret@s3.example.com")]));
    assert!(e.contains("user name or password"), "{e}");
    assert!(!e.contains("topsecret"), "{e}");
}

#[test]
fn admin_secret_is_required_and_checked() {
    let no_name: Vec<_> = base()
        .into_iter()
        .filter(|(k, _)| *k != ADMIN_SECRET_NAME)
        .collect();
    assert!(err(&no_name).contains("parameter adminSecretName is missing"));
    let no_ns: Vec<_> = base()
        .into_iter()
        .filter(|(k, _)| *k != ADMIN_SECRET_NAMESPACE)
        .collect();
    assert!(err(&no_ns).contains("parameter adminSecretNamespace is missing"));
    assert!(err(&with(&[(ADMIN_SECRET_NAME, "S3_Admin")])).contains("not a valid Secret name"));
    assert!(
        err(&with(&[(ADMIN_SECRET_NAMESPACE, "obc.system")])).contains("not a valid namespace")
    );
    let p = ClassParams::parse("s3", &params(&with(&[(ADMIN_SECRET_NAME, "s3.admin")])))
        .expect("dots are fine");
    assert_eq!(p.admin_secret.to_string(), "obc-system/s3.admin");
}

#[test]
fn inline_credentials_are_refused() {
    for key in [
        "accessKey",
        "secretKey",
        "AWS_SECRET_ACCESS_KEY",
        "access_key_id",
        "password",
        "secret-key",
    ] {
        let e = err(&with(&[(key, "x")]));
        assert!(
            e.contains("inline credential") && e.contains(key),
            "{key}: {e}"
        );
        assert!(e.contains(ADMIN_SECRET_NAME), "says how to fix it: {e}");
    }
    assert!(!looks_like_inline_credential(ADMIN_SECRET_NAME));
    assert!(!looks_like_inline_credential(ADMIN_SECRET_NAMESPACE));
}

#[test]
fn unknown_parameters_are_refused() {
    let e = err(&with(&[("forcedelete", "true")]));
    assert!(
        e.contains("unknown parameter forcedelete") && e.contains(FORCE_DELETE),
        "{e}"
    );
}

#[test]
fn force_delete_is_true_or_false() {
    let p = ClassParams::parse("s3", &params(&with(&[(FORCE_DELETE, "false")]))).expect("valid");
    assert!(!p.force_delete);
    for bad in ["yes", "True", "1"] {
        let e = err(&with(&[(FORCE_DELETE, bad)]));
        assert!(
            e.contains("parameter forceDelete") && e.contains("\"true\""),
            "{e}"
        );
    }
}

#[test]
fn region_is_checked() {
    assert!(err(&with(&[(REGION, "eu west")])).contains("parameter region"));
    let p = ClassParams::parse("s3", &params(&with(&[(REGION, "")]))).expect("valid");
    assert_eq!(p.region, DEFAULT_REGION);
}

#[test]
fn empty_parameters_say_the_class_may_be_gone() {
    assert!(err(&[]).contains("no parameters"));
}

/// Issue 36: a COSI Bucket's request names no StorageClass (its
/// parameters came from a BucketClass), and its errors say so.
#[test]
fn a_cosi_buckets_parameter_errors_name_no_storage_class() {
    let problems = [
        ClassParams::parse("", &params(&[])).expect_err("no parameters"),
        ClassParams::parse("", &params(&[("AWS_SECRET_ACCESS_KEY", "x")])).expect_err("inline"),
        ClassParams::parse("", &params(&with(&[(REGION, "eu west")]))).expect_err("region"),
    ];
    for e in problems.map(|e| e.to_string()) {
        assert!(!e.contains("StorageClass"), "{e}");
        assert!(e.starts_with("the BucketClass: "), "{e}");
    }
}

#[test]
fn a_class_is_named_as_its_api_names_it() {
    assert_eq!(ClassName::Bucket("s3").to_string(), "StorageClass \"s3\"");
    assert_eq!(ClassName::Bucket("").to_string(), "the BucketClass");
    assert_eq!(
        ClassName::Access("keys").to_string(),
        "BucketAccessClass \"keys\""
    );
    assert_eq!(ClassName::Access("").to_string(), "the BucketAccessClass");
    assert!(!ClassName::Bucket("s3").is_cosi());
    assert!(ClassName::Bucket("").is_cosi() && ClassName::Access("keys").is_cosi());
    let e = ClassParams::parse_for(ClassName::Access("keys"), &params(&[])).expect_err("empty");
    assert!(
        e.to_string().starts_with("BucketAccessClass \"keys\": "),
        "{e}"
    );
}

#[test]
fn bucket_settings_are_class_parameters_and_never_on_a_shared_bucket() {
    let mut with = base();
    with.push(("allowedConfig", "versioning, bucketLifecycle"));
    with.push(("versioning", "Enabled"));
    with.push(("lifecycleMaxDays", "90"));
    let p = ClassParams::parse("s3", &params(&with)).expect("valid");
    assert!(p.allowed.allows("versioning") && !p.allowed.allows("maxSize"));
    assert!(p.settings.has_defaults());
    with.push((BROWNFIELD_BUCKET_PARAMETER, "shared"));
    let e = ClassParams::parse("s3", &params(&with)).expect_err("shared bucket");
    assert!(
        e.message().contains("versioning") && e.message().contains("never configures"),
        "{e:?}"
    );
    let mut bad = base();
    bad.push(("allowedConfig", "maxSize,,versioning"));
    let e = ClassParams::parse("s3", &params(&bad)).expect_err("malformed");
    assert!(e.message().contains("StorageClass \"s3\""), "{e:?}");
}
