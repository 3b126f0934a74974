//! What a grant takes from the records of the buckets it reaches (COSI:
//! each Bucket's `spec.parameters`, which the binding role copied from its
//! BucketClass, or an administrator wrote on a static Bucket; never a
//! tenant): the store the bucket is on, and whether it is read-only.
//! Checked without I/O, so every rule is unit-tested.
//!
//! The access class names where the grant is made (its endpoint and admin
//! Secret); a bucket of the same name on another store is another bucket,
//! perhaps another tenant's: the grant is refused unless both name the
//! same endpoint. A bucket made `accessMode: read-only` is refused any
//! wider mode (refused, not narrowed: the BucketAccess then says why,
//! instead of handing out keys whose writes fail later).

use lib_provisioner::ProvisionError;
use lib_provisioner::provisioner::{AccessMode, AccessRequest};

use crate::access::Access;
use crate::params::{ClassName, ClassParams};

/// Refuses a request reaching a bucket whose record names another store
/// than `params` (the access class's), or asking more than read on a
/// read-only bucket. Buckets without a record (the COSI gRPC path) are
/// left to the access class.
pub fn check(params: &ClassParams, req: &AccessRequest) -> Result<(), ProvisionError> {
    for bucket in &req.buckets {
        if bucket.bucket_parameters.is_empty() {
            continue;
        }
        let name = &bucket.bucket_name;
        let made_with = ClassParams::parse_for(ClassName::Bucket(""), &bucket.bucket_parameters)
            .map_err(|e| {
                ProvisionError::permanent(format!(
                    "bucket {name:?} was made with parameters this driver cannot read ({}): ask an administrator",
                    e.message()
                ))
                .with_nothing_created()
            })?;
        if made_with.endpoint.url != params.endpoint.url {
            return Err(ProvisionError::permanent(format!(
                "bucket {name:?} is on another store than {} grants access on: use a BucketAccessClass for the bucket's store",
                ClassName::Access(&req.class_name)
            ))
            .with_nothing_created());
        }
        if made_with.access == Access::ReadOnly && bucket.mode != AccessMode::ReadOnly {
            return Err(ProvisionError::unsupported_access_mode(
                bucket.mode,
                format!(
                    "bucket {name:?} is read-only (its class sets accessMode: read-only), and {} was asked: ask for ReadOnly",
                    bucket.mode
                ),
            )
            .with_nothing_created());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use lib_provisioner::provisioner::{AccessedBucket, ClaimIdentity};

    use super::*;

    fn params(endpoint: &str, extra: &[(&str, &str)]) -> BTreeMap<String, String> {
        let mut p = BTreeMap::from([
            ("endpoint".to_owned(), endpoint.to_owned()),
            ("adminSecretName".to_owned(), "admin".to_owned()),
            ("adminSecretNamespace".to_owned(), "obc-system".to_owned()),
        ]);
        for (k, v) in extra {
            p.insert((*k).to_owned(), (*v).to_owned());
        }
        p
    }

    fn request(bucket: BTreeMap<String, String>, mode: AccessMode) -> AccessRequest {
        AccessRequest::new(ClaimIdentity::new("t", "a", "u"), "ba-u")
            .with_class_name("store-x")
            .with_accessed_bucket(
                AccessedBucket::new("photos", mode).with_bucket_parameters(bucket),
            )
    }

    fn store_x() -> ClassParams {
        ClassParams::parse_for(ClassName::Access("store-x"), &params("http://x:9000", &[]))
            .expect("params")
    }

    /// Issue 36, item 5: keys are made on the store the bucket is on, or
    /// not at all.
    #[test]
    fn a_bucket_on_another_store_is_refused() {
        let on_y = request(params("http://y:9000", &[]), AccessMode::ReadWrite);
        let e = check(&store_x(), &on_y).expect_err("refused");
        assert!(e.message().contains("is on another store"), "{e:?}");
        assert!(!e.message().contains("y:9000"), "names no store: {e:?}");
        let on_x = request(params("http://x:9000/", &[]), AccessMode::ReadWrite);
        assert!(check(&store_x(), &on_x).is_ok());
        // Unknown (the gRPC path): the access class decides.
        assert!(check(&store_x(), &request(BTreeMap::new(), AccessMode::ReadWrite)).is_ok());
    }

    /// Issue 36, item 5: `accessMode: read-only` on the bucket's class
    /// holds at grant time.
    #[test]
    fn a_read_only_bucket_is_granted_read_only_or_refused() {
        let ro = params("http://x:9000", &[("accessMode", "read-only")]);
        for mode in [AccessMode::ReadWrite, AccessMode::WriteOnly] {
            let e = check(&store_x(), &request(ro.clone(), mode)).expect_err("refused");
            assert!(e.message().contains("is read-only"), "{e:?}");
        }
        assert!(check(&store_x(), &request(ro, AccessMode::ReadOnly)).is_ok());
    }
}
