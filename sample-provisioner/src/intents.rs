//! Creation intents kept in Kubernetes, for stores whose buckets carry
//! their owner as a tag (no state bucket on the store).
//!
//! CreateBucket and PutBucketTagging are two requests: a process that dies
//! between them leaves an empty, untagged bucket, which looks the same as an
//! empty bucket someone else made. So before CreateBucket the provisioner
//! creates a ConfigMap [`intent_name`] in its own namespace naming the claim;
//! Kubernetes' create is atomic, so two claims racing for one bucket name
//! cannot both record one. It is deleted once the tag is written (or the
//! claim goes). The ConfigMaps carry the label [`INTENT_LABEL`] so that they
//! are easy to list; they hold no secret.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DeleteParams, ObjectMeta, PostParams};
use kube::{Api, Client};
use lib_provisioner::ProvisionError;
use sha2::{Digest, Sha256};

use crate::ownership::{Owner, Record};

/// Label on every intent ConfigMap.
pub const INTENT_LABEL: &str = "objectbucket.io/creation-intent";
const BUCKET_KEY: &str = "bucket";
const ENDPOINT_KEY: &str = "endpoint";
const CLAIM_UID_KEY: &str = "claimUid";
const CLAIM_KEY: &str = "claim";

/// The name of the intent ConfigMap for `bucket` on the store at `endpoint`:
/// the bucket name (S3 names are valid in Kubernetes names, save dots' and
/// length limits being wider) and a hash of the endpoint, so that two
/// stores' buckets of one name do not meet.
pub fn intent_name(endpoint: &str, bucket: &str) -> String {
    let hash = hex::encode(&Sha256::digest(endpoint.as_bytes())[..4]);
    format!("obc-intent-{bucket}-{hash}")
}

/// The intents of one store, in one namespace.
#[derive(Clone)]
pub struct KubeIntents {
    api: Api<ConfigMap>,
    namespace: String,
    endpoint: String,
}

impl std::fmt::Debug for KubeIntents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeIntents")
            .field("namespace", &self.namespace)
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

fn retryable(what: &str, e: &kube::Error) -> ProvisionError {
    ProvisionError::retryable(format!("could not {what}: {e}"))
}

fn is_status(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == code)
}

impl KubeIntents {
    /// Intents for the store at `endpoint`, as ConfigMaps in `namespace`.
    pub fn new(client: Client, namespace: &str, endpoint: &str) -> Self {
        Self {
            api: Api::namespaced(client, namespace),
            namespace: namespace.to_owned(),
            endpoint: endpoint.to_owned(),
        }
    }

    fn name(&self, bucket: &str) -> String {
        intent_name(&self.endpoint, bucket)
    }

    /// The intent recorded for `bucket`, if any.
    pub async fn get(&self, bucket: &str) -> Result<Option<Record>, ProvisionError> {
        let name = self.name(bucket);
        let found = self
            .api
            .get_opt(&name)
            .await
            .map_err(|e| retryable(&format!("read intent {}/{name}", self.namespace), &e))?;
        Ok(found.and_then(|cm| {
            let mut data = cm.data.unwrap_or_default();
            let claim_uid = data.remove(CLAIM_UID_KEY)?;
            Some(Record {
                claim_uid,
                claim: data.remove(CLAIM_KEY),
            })
        }))
    }

    /// Records `owner`'s intent to create `bucket`. `Ok(None)`: recorded
    /// (now or by an earlier attempt of this claim); `Ok(Some(other))`:
    /// another claim's intent is there.
    pub async fn record(
        &self,
        bucket: &str,
        owner: &Owner<'_>,
    ) -> Result<Option<Record>, ProvisionError> {
        let name = self.name(bucket);
        let intent = ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                labels: Some(BTreeMap::from([(
                    INTENT_LABEL.to_owned(),
                    "true".to_owned(),
                )])),
                ..Default::default()
            },
            data: Some(BTreeMap::from([
                (BUCKET_KEY.to_owned(), bucket.to_owned()),
                (ENDPOINT_KEY.to_owned(), self.endpoint.clone()),
                (CLAIM_UID_KEY.to_owned(), owner.claim_uid.to_owned()),
                (CLAIM_KEY.to_owned(), owner.claim.to_owned()),
            ])),
            ..Default::default()
        };
        match self.api.create(&PostParams::default(), &intent).await {
            Ok(_) => return Ok(None),
            Err(e) if is_status(&e, 409) => {}
            Err(e) if is_status(&e, 403) => {
                return Err(ProvisionError::permanent(format!(
                    "the provisioner may not create ConfigMap {}/{name}, the creation intent of bucket {bucket:?}: grant its ServiceAccount create, get and delete on configmaps in namespace {} (see deploy/rbac.yaml)",
                    self.namespace, self.namespace
                )));
            }
            Err(e) => {
                return Err(retryable(
                    &format!("record intent {}/{name}", self.namespace),
                    &e,
                ));
            }
        }
        match self.get(bucket).await? {
            Some(r) if r.claim_uid == owner.claim_uid => Ok(None),
            Some(other) => Ok(Some(other)),
            None => Err(ProvisionError::retryable(format!(
                "the creation intent {}/{name} of bucket {bucket:?} was deleted while it was written; retrying",
                self.namespace
            ))),
        }
    }

    /// Deletes the intent for `bucket` (gone already: fine).
    pub async fn delete(&self, bucket: &str) -> Result<(), ProvisionError> {
        let name = self.name(bucket);
        match self.api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(e) if is_status(&e, 404) => Ok(()),
            Err(e) => Err(retryable(
                &format!("delete intent {}/{name}", self.namespace),
                &e,
            )),
        }
    }

    /// Where intents are kept, for messages.
    pub fn describe(&self, bucket: &str) -> String {
        format!("ConfigMap {}/{}", self.namespace, self.name(bucket))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_valid_and_per_store() {
        let a = intent_name("http://10.0.0.1:9000", "photos-abc");
        assert!(a.starts_with("obc-intent-photos-abc-"), "{a}");
        assert_eq!(a.len(), "obc-intent-photos-abc-".len() + 8);
        assert_ne!(a, intent_name("http://10.0.0.2:9000", "photos-abc"));
        let longest = intent_name("http://s3", &"b".repeat(63));
        assert!(longest.len() <= 253);
    }
}
