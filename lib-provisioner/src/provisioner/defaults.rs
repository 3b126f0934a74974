//! The default bodies of the bucket-only and access methods of
//! [`Provisioner`], built from the OBC-shaped ones.

use super::{
    AccessGrant, AccessMode, AccessRequest, AccessRevocation, AccessedBucket, BucketInfo,
    BucketRequest, ProvisionError, Provisioner, TeardownRequest,
};

/// `provision`, without the credentials (a later `delete` removes them).
pub(super) async fn create_bucket<P: Provisioner + ?Sized>(
    p: &P,
    req: &BucketRequest,
) -> Result<BucketInfo, ProvisionError> {
    p.provision(req).await.map(BucketInfo::from_access)
}

/// Static buckets need the provisioner's own code.
pub(super) fn existing_bucket(req: &BucketRequest) -> ProvisionError {
    ProvisionError::unsupported(format!(
        "this provisioner cannot use an existing bucket ({:?}): ask for a new bucket through a class instead, or use a provisioner that supports existing buckets",
        req.bucket_name
    ))
    .with_nothing_created()
}

/// `grant` for the one ReadWrite bucket, the principal standing for the
/// claim: credentials keyed by the principal's UID, account id = account
/// name.
pub(super) async fn grant_access<P: Provisioner + ?Sized>(
    p: &P,
    req: &AccessRequest,
) -> Result<AccessGrant, ProvisionError> {
    let bucket = only_read_write_bucket(req)?;
    let request = BucketRequest::new(req.principal.clone(), &bucket.bucket_name, &req.class_name)
        .with_parameters(req.parameters.clone());
    let access = p.grant(&request).await?;
    Ok(AccessGrant::from_access(req.account_name.clone(), access))
}

/// The request's only bucket, if it is asked ReadWrite; else why not, in
/// terms the user can act on. Refused before any call: nothing created.
fn only_read_write_bucket(req: &AccessRequest) -> Result<&AccessedBucket, ProvisionError> {
    match req.buckets.as_slice() {
        [] => Err(ProvisionError::permanent(format!(
            "the access request for {} names no bucket: name at least one",
            req.principal
        ))),
        [one] if one.mode == AccessMode::ReadWrite => Ok(one),
        [one] => Err(ProvisionError::unsupported_access_mode(
            one.mode,
            format!(
                "this provisioner grants only ReadWrite access, and bucket {:?} was asked {}: ask for ReadWrite, or use a provisioner that supports {}",
                one.bucket_name, one.mode, one.mode
            ),
        )),
        many => Err(ProvisionError::multi_bucket_unsupported(format!(
            "this provisioner gives one credential access to one bucket only, and {} buckets were asked: request access to each bucket separately",
            many.len()
        ))),
    }
    .map_err(ProvisionError::with_nothing_created)
}

/// `revoke` for each bucket, with the principal as the claim.
pub(super) async fn revoke_access<P: Provisioner + ?Sized>(
    p: &P,
    req: &AccessRevocation,
) -> Result<(), ProvisionError> {
    for bucket in &req.bucket_names {
        let mut teardown = TeardownRequest::new(req.principal.clone(), bucket, &req.class_name)
            .with_parameters(req.parameters.clone());
        teardown.additional_state = req.additional_state.clone();
        p.revoke(&teardown).await?;
    }
    Ok(())
}
