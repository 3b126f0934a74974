//! An application that uses an ObjectBucketClaim the way users do: the
//! claim's ConfigMap and Secret as its environment (`envFrom`), nothing
//! else. It writes an object to its bucket, reads it back, prints both, and
//! then tries to write to another bucket (its argument), which the store
//! must refuse. The node tests (`tests/tests/node/`) and
//! `scripts/demo --node` run it in a Pod; `scripts/build-app-image` packs it
//! as `localhost/obc/bucket-app`.
//!
//! ```text
//! bucket-app [OTHER_BUCKET]
//! env: BUCKET_HOST BUCKET_PORT BUCKET_NAME BUCKET_REGION   (the ConfigMap)
//!      AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY             (the Secret)
//!      BUCKET_SCHEME  optional: http or https (default: https on port 443)
//! ```
//!
//! Exit codes say what happened: 0 written, read back the same, and the
//! other bucket refused (AccessDenied); 2 the environment is incomplete;
//! 3 the write failed; 4 the read failed or returned something else;
//! 5 the other bucket accepted the write (the claim reaches a bucket that
//! is not its own); 6 the other bucket failed otherwise than AccessDenied.
//! It never prints the secret key.

use std::process::ExitCode;
use std::time::Duration;

use aws_sdk_s3::config::timeout::TimeoutConfig;
use aws_sdk_s3::config::{
    BehaviorVersion, Region, RequestChecksumCalculation, ResponseChecksumValidation,
};
use aws_sdk_s3::error::ProvideErrorMetadata;
use aws_sdk_s3::primitives::ByteStream;

/// What the application read from its environment.
struct Claim {
    endpoint: String,
    bucket: String,
    region: String,
    access_key: String,
    secret_key: String,
}

fn var(name: &str, missing: &mut Vec<&'static str>, key: &'static str) -> String {
    let value = std::env::var(name).unwrap_or_default();
    if value.is_empty() {
        missing.push(key);
    }
    value
}

fn claim_from_env() -> Result<Claim, Vec<&'static str>> {
    let mut missing = Vec::new();
    let host = var("BUCKET_HOST", &mut missing, "BUCKET_HOST");
    let port = var("BUCKET_PORT", &mut missing, "BUCKET_PORT");
    let bucket = var("BUCKET_NAME", &mut missing, "BUCKET_NAME");
    let region = var("BUCKET_REGION", &mut missing, "BUCKET_REGION");
    let access_key = var("AWS_ACCESS_KEY_ID", &mut missing, "AWS_ACCESS_KEY_ID");
    let secret_key = var(
        "AWS_SECRET_ACCESS_KEY",
        &mut missing,
        "AWS_SECRET_ACCESS_KEY",
    );
    if !missing.is_empty() {
        return Err(missing);
    }
    let scheme = match std::env::var("BUCKET_SCHEME") {
        Ok(s) if !s.is_empty() => s,
        _ if port == "443" => "https".to_owned(),
        _ => "http".to_owned(),
    };
    Ok(Claim {
        endpoint: format!("{scheme}://{host}:{port}"),
        bucket,
        region,
        access_key,
        secret_key,
    })
}

fn s3_client(claim: &Claim) -> aws_sdk_s3::Client {
    let credentials = aws_credential_types::Credentials::new(
        &claim.access_key,
        &claim.secret_key,
        None,
        None,
        "claim-secret",
    );
    let config = aws_sdk_s3::config::Builder::new()
        .http_client(sample_provisioner::http::s3_http_client())
        .behavior_version(BehaviorVersion::latest())
        .endpoint_url(&claim.endpoint)
        .region(Region::new(claim.region.clone()))
        .credentials_provider(credentials)
        .force_path_style(true)
        .request_checksum_calculation(RequestChecksumCalculation::WhenRequired)
        .response_checksum_validation(ResponseChecksumValidation::WhenRequired)
        // A store that does not answer is an error with an exit code, not
        // a Pod that never finishes.
        .timeout_config(
            TimeoutConfig::builder()
                .connect_timeout(Duration::from_secs(5))
                .operation_attempt_timeout(Duration::from_secs(15))
                .operation_timeout(Duration::from_secs(40))
                .build(),
        )
        .build();
    aws_sdk_s3::Client::from_conf(config)
}

/// The error's S3 code and message, or its chain when the store never
/// answered (connection refused, DNS).
fn describe<E: ProvideErrorMetadata + std::error::Error + 'static>(e: &E) -> String {
    match e.code() {
        Some(code) => format!("{code}: {}", e.message().unwrap_or_default()),
        None => {
            let mut text = e.to_string();
            let mut source = e.source();
            while let Some(s) = source {
                text.push_str(&format!(": {s}"));
                source = s.source();
            }
            text
        }
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let other = std::env::args().nth(1);
    let claim = match claim_from_env() {
        Ok(c) => c,
        Err(missing) => {
            eprintln!(
                "bucket-app: missing environment {missing:?}: run with envFrom the claim's ConfigMap and Secret"
            );
            return ExitCode::from(2);
        }
    };
    println!(
        "bucket-app: endpoint {} bucket {} region {} (access key from the claim's Secret)",
        claim.endpoint, claim.bucket, claim.region
    );
    let s3 = s3_client(&claim);
    let who = std::env::var("HOSTNAME").unwrap_or_else(|_| "bucket-app".to_owned());
    let key = format!("bucket-app/{who}.txt");
    let body = format!("hello from {who}");

    if let Err(e) = s3
        .put_object()
        .bucket(&claim.bucket)
        .key(&key)
        .body(ByteStream::from(body.clone().into_bytes()))
        .send()
        .await
    {
        println!("write s3://{}/{key} FAILED: {}", claim.bucket, describe(&e));
        return ExitCode::from(3);
    }
    println!("wrote s3://{}/{key}: {body:?}", claim.bucket);

    let read = match s3.get_object().bucket(&claim.bucket).key(&key).send().await {
        Ok(out) => match out.body.collect().await {
            Ok(bytes) => String::from_utf8_lossy(&bytes.into_bytes()).into_owned(),
            Err(e) => {
                println!("read s3://{}/{key} FAILED: {e}", claim.bucket);
                return ExitCode::from(4);
            }
        },
        Err(e) => {
            println!("read s3://{}/{key} FAILED: {}", claim.bucket, describe(&e));
            return ExitCode::from(4);
        }
    };
    println!("read s3://{}/{key}: {read:?}", claim.bucket);
    if read != body {
        println!("read back something else than was written");
        return ExitCode::from(4);
    }

    let Some(other) = other else {
        return ExitCode::SUCCESS;
    };
    match s3
        .put_object()
        .bucket(&other)
        .key(&key)
        .body(ByteStream::from(body.into_bytes()))
        .send()
        .await
    {
        Ok(_) => {
            println!("other bucket s3://{other}: the write was ACCEPTED (not the claim's bucket)");
            ExitCode::from(5)
        }
        Err(e) if e.code() == Some("AccessDenied") => {
            println!("other bucket s3://{other}: refused ({})", describe(&e));
            ExitCode::SUCCESS
        }
        Err(e) => {
            println!(
                "other bucket s3://{other}: failed, but not with AccessDenied: {}",
                describe(&e)
            );
            ExitCode::from(6)
        }
    }
}
