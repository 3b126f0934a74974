use super::*;
use k8s_openapi::ByteString;

fn secret(pairs: &[(&str, &[u8])]) -> Secret {
    Secret {
        data: Some(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), ByteString(v.to_vec())))
                .collect(),
        ),
        ..Default::default()
    }
}

fn name() -> SecretRef {
    SecretRef {
        namespace: "obc-system".into(),
        name: "s3-admin".into(),
    }
}

#[test]
fn an_unclaimed_bucket_is_refused_as_not_made_for_the_claim() {
    let e = crate::store::unclaimed("photos");
    assert!(!e.is_retryable());
    assert!(
        e.to_string()
            .contains("exists and was not created for this claim"),
        "{e}"
    );
}

#[test]
fn admin_credentials_are_read_and_trimmed() {
    let c = credentials_from_secret(
        &name(),
        &secret(&[(ACCESS_KEY_ID, b"AKID\n"), (SECRET_ACCESS_KEY, b"s3cr3t")]),
    )
    .expect("valid");
    assert_eq!(c, Credentials::new("AKID", "s3cr3t"));
}

#[test]
fn missing_keys_name_the_secret_and_the_keys() {
    let e = credentials_from_secret(&name(), &secret(&[(ACCESS_KEY_ID, b"AKID")]))
        .expect_err("incomplete");
    assert!(!e.is_retryable());
    let text = e.to_string();
    assert!(text.contains("obc-system/s3-admin"), "{text}");
    assert!(text.contains("lacks AWS_SECRET_ACCESS_KEY"), "{text}");
    let e = credentials_from_secret(&name(), &Secret::default()).expect_err("empty");
    assert!(
        e.to_string()
            .contains("lacks AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"),
        "{e}"
    );
}

#[test]
fn bad_values_are_not_echoed() {
    let e = credentials_from_secret(
        &name(),
        &secret(&[
            (ACCESS_KEY_ID, b"AKID"),
            (SECRET_ACCESS_KEY, b"\xff\xfesecret-bytes"),
        ]),
    )
    .expect_err("not UTF-8");
    assert!(!e.to_string().contains("secret-bytes"), "{e}");
    assert!(!e.to_string().contains("AKID"), "{e}");
}

/// Issue 36: a COSI Bucket's deletion refused for a bucket that is not
/// empty speaks COSI (its BucketClass), an ObjectBucketClaim's as before.
#[test]
fn a_not_empty_bucket_is_worded_for_the_requests_api() {
    use crate::store::not_empty;
    let obc = worded_for(ClassName::Bucket("s3"), "b", not_empty("b"));
    assert_eq!(obc.to_string(), not_empty("b").to_string());
    let cosi = worded_for(ClassName::Bucket(""), "b", not_empty("b")).to_string();
    assert!(
        cosi.contains("BucketClass") && !cosi.contains("StorageClass"),
        "{cosi}"
    );
    assert!(
        cosi.starts_with("bucket b is not empty: empty it"),
        "{cosi}"
    );
    let other = worded_for(
        ClassName::Bucket(""),
        "b",
        ProvisionError::permanent("denied"),
    );
    assert_eq!(other.to_string(), "denied");
}

/// What a bucket records for the store sweep follows the request: the
/// claim's API and policy; nothing on the COSI gRPC path, which names no
/// namespace and sends no deletion policy (such buckets are only reported).
#[test]
fn a_bucket_records_its_claims_api_and_policy_but_not_on_the_grpc_path() {
    use lib_provisioner::provisioner::ClaimIdentity;
    let claim = ClaimIdentity::new("shop", "photos", "uid-1");
    let obc = BucketRequest::new(claim.clone(), "photos-1", "s3-delete");
    assert_eq!(
        sweep_record(&obc),
        Some(SweepRecord {
            kind: ClaimKind::ObjectBucketClaim,
            reclaim: ReclaimPolicy::Delete
        })
    );
    let cosi = BucketRequest::new(claim, "bc-uid-1", "").with_reclaim_policy(ReclaimPolicy::Retain);
    assert_eq!(
        sweep_record(&cosi),
        Some(SweepRecord {
            kind: ClaimKind::BucketClaim,
            reclaim: ReclaimPolicy::Retain
        })
    );
    let grpc = BucketRequest::new(ClaimIdentity::new("", "bc-uid-2", "uid-2"), "bc-uid-2", "");
    assert_eq!(sweep_record(&grpc), None);
}

/// The hourly drift check of a claim that manages no bucket setting reads
/// nothing: not the store, not even the admin Secret (at 100,000 claims
/// those reads would be most of the checks). The client points nowhere, so
/// any read fails the call.
#[tokio::test]
async fn a_check_of_a_claim_without_settings_reads_nothing() {
    let config = kube::Config::new("http://127.0.0.1:1".parse().expect("url"));
    let client = kube::Client::try_from(config).expect("client");
    let provisioner = S3Provisioner::new(client);
    let parameters: BTreeMap<String, String> = [
        ("endpoint", "http://127.0.0.1:2"),
        ("adminSecretName", "s3-admin"),
        ("adminSecretNamespace", "obc-system"),
        ("allowedConfig", "maxSize,versioning"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    let claim = lib_provisioner::ClaimIdentity::new("team", "photos", "uid-1");
    let request = |config: &[(&str, &str)]| {
        let config: BTreeMap<String, String> = config
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let bucket = BucketRequest::new(claim.clone(), "photos-1", "s3")
            .with_parameters(parameters.clone())
            .with_additional_config(config.clone());
        UpdateRequest::new(bucket, config)
    };
    let quota_only = provisioner
        .check_config(&request(&[("maxSize", "1Gi")]))
        .await;
    assert_eq!(quota_only.expect("no read"), ConfigCheck::NotChecked);
    // With a setting it reads the admin Secret first, which fails here.
    let versioned = provisioner
        .check_config(&request(&[("versioning", "Enabled")]))
        .await;
    assert!(versioned.is_err(), "{versioned:?}");
}
