//! A bucket's settings on the store ([`BucketConfig`]): put, read back and
//! compared, so that applying is idempotent (a repeat after a crash writes
//! nothing new) and a check finds what was changed behind the claim's back.
//!
//! Each setting is read before it is written: a store that already holds it
//! is not written again, and the answer names only what changed.

use aws_sdk_s3::types::{
    BucketVersioningStatus, DefaultRetention, LifecycleRule, ObjectLockConfiguration,
    ObjectLockEnabled, ObjectLockRetentionMode, ObjectLockRule, VersioningConfiguration,
};
use lib_provisioner::ProvisionError;

use super::Store;
use crate::bucket_config::{
    BUCKET_LIFECYCLE, BUCKET_POLICY, BucketConfig, Lifecycle, LockMode, OBJECT_LOCK_MODE,
    ObjectLock, TenantPolicy, VERSIONING, Versioning,
};
use crate::errors::StoreFailure;

/// Store answers meaning "this bucket has no such setting".
const NONE_CODES: [&str; 4] = [
    "NoSuchLifecycleConfiguration",
    "NoSuchBucketPolicy",
    "ObjectLockConfigurationNotFoundError",
    "ObjectLockConfigurationNotFound",
];

impl Store {
    /// Makes the bucket hold `want`; `was` is what it held (applied before),
    /// so that a setting the claim no longer asks for is removed. Returns
    /// the keys whose store setting was changed.
    pub async fn apply_settings(
        &self,
        bucket: &str,
        want: &BucketConfig,
        was: Option<&BucketConfig>,
    ) -> Result<Vec<&'static str>, ProvisionError> {
        let mut changed = Vec::new();
        if let Some(v) = want.versioning
            && self.versioning(bucket).await? != Some(v)
        {
            self.put_versioning(bucket, v).await?;
            changed.push(VERSIONING);
        }
        if let Some(lock) = want.object_lock
            && self.object_lock(bucket).await? != Some(lock)
        {
            self.put_object_lock(bucket, lock).await?;
            changed.push(OBJECT_LOCK_MODE);
        }
        let (had_rules, had_policy) = was.map_or((false, false), |c| {
            (c.lifecycle.is_some(), c.policy.is_some())
        });
        if self
            .apply_lifecycle(bucket, want.lifecycle.as_ref(), had_rules)
            .await?
        {
            changed.push(BUCKET_LIFECYCLE);
        }
        if self
            .apply_policy(bucket, want.policy.as_ref(), had_policy)
            .await?
        {
            changed.push(BUCKET_POLICY);
        }
        Ok(changed)
    }

    /// Puts `want`'s rules, or removes the bucket's when the claim no
    /// longer asks for any (`had`); `true` if the store changed.
    async fn apply_lifecycle(
        &self,
        bucket: &str,
        want: Option<&Lifecycle>,
        had: bool,
    ) -> Result<bool, ProvisionError> {
        match want {
            Some(rules) => {
                // Rules the type cannot model count as different.
                if Lifecycle::from_s3(&self.rules(bucket).await?).as_ref() == Some(rules) {
                    return Ok(false);
                }
                self.put_lifecycle(bucket, rules).await?;
                Ok(true)
            }
            None if had && !self.rules(bucket).await?.is_empty() => {
                self.delete_lifecycle(bucket).await?;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Puts `want`'s policy, or removes the bucket's when the claim no
    /// longer asks for one (`had`); `true` if the store changed.
    async fn apply_policy(
        &self,
        bucket: &str,
        want: Option<&TenantPolicy>,
        had: bool,
    ) -> Result<bool, ProvisionError> {
        match want {
            Some(policy) => {
                if self
                    .policy(bucket)
                    .await?
                    .is_some_and(|s| policy.same_as(&s))
                {
                    return Ok(false);
                }
                self.put_policy(bucket, policy).await?;
                Ok(true)
            }
            None if had && self.policy(bucket).await?.is_some() => {
                self.delete_policy(bucket).await?;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    async fn versioning(&self, bucket: &str) -> Result<Option<Versioning>, ProvisionError> {
        let out = self
            .client
            .get_bucket_versioning()
            .bucket(bucket)
            .send()
            .await
            .map_err(|e| failed("GetBucketVersioning", bucket, &e, VERSIONING))?;
        Ok(match out.status() {
            Some(BucketVersioningStatus::Enabled) => Some(Versioning::Enabled),
            Some(BucketVersioningStatus::Suspended) => Some(Versioning::Suspended),
            _ => None,
        })
    }

    async fn put_versioning(&self, bucket: &str, v: Versioning) -> Result<(), ProvisionError> {
        let status = match v {
            Versioning::Enabled => BucketVersioningStatus::Enabled,
            Versioning::Suspended => BucketVersioningStatus::Suspended,
        };
        self.client
            .put_bucket_versioning()
            .bucket(bucket)
            .versioning_configuration(VersioningConfiguration::builder().status(status).build())
            .send()
            .await
            .map_err(|e| failed("PutBucketVersioning", bucket, &e, VERSIONING))?;
        Ok(())
    }

    /// The bucket's lifecycle rules as the store holds them (none: empty).
    async fn rules(&self, bucket: &str) -> Result<Vec<LifecycleRule>, ProvisionError> {
        match self
            .client
            .get_bucket_lifecycle_configuration()
            .bucket(bucket)
            .send()
            .await
        {
            Ok(out) => Ok(out.rules().to_vec()),
            Err(e) => none_or_err(
                "GetBucketLifecycleConfiguration",
                bucket,
                &e,
                BUCKET_LIFECYCLE,
            )
            .map(Option::unwrap_or_default),
        }
    }

    async fn put_lifecycle(&self, bucket: &str, l: &Lifecycle) -> Result<(), ProvisionError> {
        let config = l.to_s3().map_err(ProvisionError::permanent)?;
        self.client
            .put_bucket_lifecycle_configuration()
            .bucket(bucket)
            .lifecycle_configuration(config)
            .send()
            .await
            .map_err(|e| {
                failed(
                    "PutBucketLifecycleConfiguration",
                    bucket,
                    &e,
                    BUCKET_LIFECYCLE,
                )
            })?;
        Ok(())
    }

    async fn delete_lifecycle(&self, bucket: &str) -> Result<(), ProvisionError> {
        self.client
            .delete_bucket_lifecycle()
            .bucket(bucket)
            .send()
            .await
            .map_err(|e| failed("DeleteBucketLifecycle", bucket, &e, BUCKET_LIFECYCLE))?;
        Ok(())
    }

    async fn policy(&self, bucket: &str) -> Result<Option<String>, ProvisionError> {
        match self.client.get_bucket_policy().bucket(bucket).send().await {
            Ok(out) => Ok(out.policy().map(str::to_owned)),
            Err(e) => none_or_err("GetBucketPolicy", bucket, &e, BUCKET_POLICY),
        }
    }

    async fn put_policy(&self, bucket: &str, p: &TenantPolicy) -> Result<(), ProvisionError> {
        self.client
            .put_bucket_policy()
            .bucket(bucket)
            .policy(p.document())
            .send()
            .await
            .map_err(|e| failed("PutBucketPolicy", bucket, &e, BUCKET_POLICY))?;
        Ok(())
    }

    async fn delete_policy(&self, bucket: &str) -> Result<(), ProvisionError> {
        self.client
            .delete_bucket_policy()
            .bucket(bucket)
            .send()
            .await
            .map_err(|e| failed("DeleteBucketPolicy", bucket, &e, BUCKET_POLICY))?;
        Ok(())
    }

    async fn object_lock(&self, bucket: &str) -> Result<Option<ObjectLock>, ProvisionError> {
        let out = match self
            .client
            .get_object_lock_configuration()
            .bucket(bucket)
            .send()
            .await
        {
            Ok(out) => out,
            Err(e) => {
                return none_or_err("GetObjectLockConfiguration", bucket, &e, OBJECT_LOCK_MODE);
            }
        };
        let retention = out
            .object_lock_configuration()
            .and_then(|c| c.rule())
            .and_then(|r| r.default_retention());
        Ok(retention.and_then(|r| {
            let mode = match r.mode()? {
                ObjectLockRetentionMode::Governance => LockMode::Governance,
                ObjectLockRetentionMode::Compliance => LockMode::Compliance,
                _ => return None,
            };
            Some(ObjectLock {
                mode,
                days: r.days()?,
            })
        }))
    }

    async fn put_object_lock(&self, bucket: &str, lock: ObjectLock) -> Result<(), ProvisionError> {
        let mode = match lock.mode {
            LockMode::Governance => ObjectLockRetentionMode::Governance,
            LockMode::Compliance => ObjectLockRetentionMode::Compliance,
        };
        let config = ObjectLockConfiguration::builder()
            .object_lock_enabled(ObjectLockEnabled::Enabled)
            .rule(
                ObjectLockRule::builder()
                    .default_retention(
                        DefaultRetention::builder()
                            .mode(mode)
                            .days(lock.days)
                            .build(),
                    )
                    .build(),
            )
            .build();
        self.client
            .put_object_lock_configuration()
            .bucket(bucket)
            .object_lock_configuration(config)
            .send()
            .await
            .map_err(|e| {
                let f = StoreFailure::from_sdk("PutObjectLockConfiguration", bucket, &e);
                if f.is_retryable() || f.is_not_implemented() {
                    return failed("PutObjectLockConfiguration", bucket, &e, OBJECT_LOCK_MODE);
                }
                // A bucket created without object lock never gets it.
                ProvisionError::permanent(format!(
                    "{f}: object lock can only be set on a bucket created with it; this bucket was created without (the claim asked for it after its bucket was created): remove {OBJECT_LOCK_MODE} and objectLockDays, or create a new claim with them"
                ))
            })?;
        Ok(())
    }
}

/// A failed settings request, in the claim's terms: a store that does not
/// implement the request (s3s-fs answers `NotImplemented`, HTTP 501, which
/// is otherwise retried as a server error) or refuses the setting outright
/// gets a permanent message naming the key to remove.
fn failed<E>(
    op: &'static str,
    bucket: &str,
    e: &aws_sdk_s3::error::SdkError<E>,
    key: &str,
) -> ProvisionError
where
    E: std::error::Error + aws_sdk_s3::error::ProvideErrorMetadata + 'static,
{
    let f = StoreFailure::from_sdk(op, bucket, e);
    if f.is_not_implemented() {
        return ProvisionError::permanent(format!(
            "{f}: this store does not support {key}: remove {key} from the claim (or its class); docs/sample-provisioner.md lists what each store supports"
        ));
    }
    if f.is_retryable() {
        return f.into_provision_error();
    }
    ProvisionError::permanent(format!(
        "{f}: the store refused {key}; check its value, or remove {key} if this store does not support it"
    ))
}

/// [`failed`], except that the store's "no such setting" is `None`.
fn none_or_err<T, E>(
    op: &'static str,
    bucket: &str,
    e: &aws_sdk_s3::error::SdkError<E>,
    key: &str,
) -> Result<Option<T>, ProvisionError>
where
    E: std::error::Error + aws_sdk_s3::error::ProvideErrorMetadata + 'static,
{
    let f = StoreFailure::from_sdk(op, bucket, e);
    if f.code().is_some_and(|c| NONE_CODES.contains(&c)) {
        Ok(None)
    } else {
        Err(failed(op, bucket, e, key))
    }
}
