//! The `COSI_S3_*` keys: a Bucket's `status.bucketInfo` and the contents of
//! a BucketAccess Secret (COSI.md, section 3), as pure functions.

use std::collections::BTreeMap;

use super::api::{AuthenticationType, secret_keys as k};
use crate::core::provisioner::{Credentials, StoreEndpoint};

/// The region written when the store has none: upstream requires every
/// S3 info key to be non-empty, and S3 clients read an empty region as
/// `us-east-1` anyway.
pub(crate) const DEFAULT_REGION: &str = "us-east-1";

/// The non-secret S3 keys of one bucket.
pub(crate) fn s3_bucket_info(
    bucket_id: &str,
    endpoint: &StoreEndpoint,
) -> BTreeMap<String, String> {
    let region = if endpoint.region.is_empty() {
        DEFAULT_REGION
    } else {
        &endpoint.region
    };
    BTreeMap::from([
        (k::S3_BUCKET_ID.to_owned(), bucket_id.to_owned()),
        (k::S3_ENDPOINT.to_owned(), endpoint.url()),
        (k::S3_REGION.to_owned(), region.to_owned()),
        (
            k::S3_ADDRESSING_STYLE.to_owned(),
            endpoint.addressing_style.as_str().to_owned(),
        ),
    ])
}

/// One access Secret's `stringData`: the bucket's info and the shared
/// credentials (written, empty, for ServiceAccount authentication too:
/// every key of the protocol is written).
pub(crate) fn s3_secret(
    bucket_id: &str,
    endpoint: &StoreEndpoint,
    credentials: &Credentials,
    auth: AuthenticationType,
) -> BTreeMap<String, String> {
    let mut data = s3_bucket_info(bucket_id, endpoint);
    let (id, secret) = match auth {
        AuthenticationType::Key => (
            credentials.access_key_id.clone(),
            credentials.secret_access_key.clone(),
        ),
        AuthenticationType::ServiceAccount => (String::new(), String::new()),
    };
    data.insert(k::S3_ACCESS_KEY_ID.to_owned(), id);
    data.insert(k::S3_ACCESS_SECRET_KEY.to_owned(), secret);
    data
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_s3_key_is_written_and_info_is_never_empty() {
        let endpoint = StoreEndpoint::new("s3.local", 9000).with_url("http://s3.local:9000");
        let data = s3_secret(
            "bc-1",
            &endpoint,
            &Credentials::new("AK", "SK"),
            AuthenticationType::Key,
        );
        assert_eq!(data.len(), 6);
        assert_eq!(data[k::S3_BUCKET_ID], "bc-1");
        assert_eq!(data[k::S3_ENDPOINT], "http://s3.local:9000");
        assert_eq!(data[k::S3_REGION], DEFAULT_REGION);
        assert_eq!(data[k::S3_ADDRESSING_STYLE], "path");
        assert_eq!(data[k::S3_ACCESS_KEY_ID], "AK");
        let sa = s3_secret(
            "bc-1",
            &endpoint,
            &Credentials::new("AK", "SK"),
            AuthenticationType::ServiceAccount,
        );
        assert_eq!(sa[k::S3_ACCESS_SECRET_KEY], "");
    }
}
