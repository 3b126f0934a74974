//! What the S3 store holds: its buckets with their ownership markers, and
//! the creation intents in the sample's state bucket.

use std::collections::BTreeMap;

use anyhow::{Context as _, Result, anyhow};
use sample_provisioner::store::{
    DEFAULT_STATE_BUCKET, INTENT_PREFIX, OWNER_MARKER_KEY, STATE_BUCKET_MARKER,
};

/// The store's buckets and their ownership markers (`None`: no marker),
/// without the provisioner's state buckets (marked [`STATE_BUCKET_MARKER`]).
pub async fn store_buckets(s3: &aws_sdk_s3::Client) -> Result<BTreeMap<String, Option<String>>> {
    let out = s3.list_buckets().send().await.context("ListBuckets")?;
    let mut buckets = BTreeMap::new();
    for b in out.buckets() {
        let Some(name) = b.name() else { continue };
        let marker = match s3
            .get_object()
            .bucket(name)
            .key(OWNER_MARKER_KEY)
            .send()
            .await
        {
            Ok(o) => Some(
                String::from_utf8_lossy(&o.body.collect().await?.into_bytes())
                    .trim()
                    .to_owned(),
            ),
            Err(e) => {
                let missing = e.as_service_error().is_some_and(|s| s.is_no_such_key());
                if !missing {
                    // A bucket deleted between the listing and the read.
                    let gone = s3.head_bucket().bucket(name).send().await.is_err();
                    if gone {
                        continue;
                    }
                    return Err(anyhow!("reading the marker of {name}: {e:?}"));
                }
                None
            }
        };
        if marker.as_deref() == Some(STATE_BUCKET_MARKER) {
            continue;
        }
        buckets.insert(name.to_owned(), marker);
    }
    Ok(buckets)
}

/// A creation intent in the sample's state bucket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Intent {
    /// The bucket it is for.
    pub bucket: String,
    /// The claim UID it holds.
    pub uid: String,
    /// `namespace/name` of its claim (metadata), if recorded.
    pub claim: Option<String>,
}

/// The intents in the default state bucket (none if there is none).
pub async fn store_intents(s3: &aws_sdk_s3::Client) -> Result<Vec<Intent>> {
    let listed = match s3
        .list_objects_v2()
        .bucket(DEFAULT_STATE_BUCKET)
        .prefix(INTENT_PREFIX)
        .send()
        .await
    {
        Ok(listed) => listed,
        Err(e) if e.as_service_error().is_some_and(|s| s.is_no_such_bucket()) => {
            return Ok(Vec::new());
        }
        Err(e) => return Err(anyhow!("listing the intents: {e:?}")),
    };
    let mut intents = Vec::new();
    for key in listed.contents().iter().filter_map(|o| o.key()) {
        let Some(bucket) = key.strip_prefix(INTENT_PREFIX) else {
            continue;
        };
        let o = match s3
            .get_object()
            .bucket(DEFAULT_STATE_BUCKET)
            .key(key)
            .send()
            .await
        {
            Ok(o) => o,
            // Deleted between the listing and the read.
            Err(e) if e.as_service_error().is_some_and(|s| s.is_no_such_key()) => continue,
            Err(e) => return Err(anyhow!("reading intent {key}: {e:?}")),
        };
        let claim = o.metadata().and_then(|m| m.get("obc-claim")).cloned();
        let uid = String::from_utf8_lossy(&o.body.collect().await?.into_bytes())
            .trim()
            .to_owned();
        intents.push(Intent {
            bucket: bucket.to_owned(),
            uid,
            claim,
        });
    }
    Ok(intents)
}
