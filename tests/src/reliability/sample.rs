//! The sample provisioner's fixture: CRDs, RBAC, the admin Secret and the
//! brownfield bucket ([`install_sample`]), its classes ([`create_classes`]),
//! and what a claim asks for ([`Kind`]).

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Context as _, Result};
use kube::Client;
use lib_provisioner::api::ObjectBucketClaimSpec;

use super::logs::register_env_secrets;
use super::{ADMIN_SECRET, SHARED_BUCKET, SYSTEM_NAMESPACE};
use crate::setup::{create_admin_secret, create_class, install_deploy};
use crate::testenv::TestEnv;

/// CRDs, `deploy/` namespace and RBAC, the admin Secret and the brownfield
/// bucket; returns the kubeconfig of the provisioner's ServiceAccount.
pub async fn install_sample(env: &TestEnv) -> Result<PathBuf> {
    install_deploy(env).await?;
    let (ak, sk) = env.s3_root_credentials();
    create_admin_secret(
        &env.admin_client(),
        SYSTEM_NAMESPACE,
        ADMIN_SECRET,
        &ak,
        &sk,
    )
    .await?;
    register_env_secrets(env);
    let s3 = env.s3_client();
    s3.create_bucket()
        .bucket(SHARED_BUCKET)
        .send()
        .await
        .context("brownfield bucket")?;
    s3.put_object()
        .bucket(SHARED_BUCKET)
        .key("keep.txt")
        .body(aws_sdk_s3::primitives::ByteStream::from_static(b"keep"))
        .send()
        .await
        .context("brownfield data")?;
    env.service_account_kubeconfig(SYSTEM_NAMESPACE, "sample-provisioner")
        .await
}

/// The parameters of a working class of the sample provisioner on the
/// environment's s3s-fs, which has no user API and no bucket tagging: every
/// claim gets the admin credentials, and ownership is a marker object, both
/// of which the class must ask for.
pub fn sample_params(env: &TestEnv) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("credentialsMode".to_owned(), "shared-admin".to_owned()),
        ("ownership".to_owned(), "marker".to_owned()),
        ("endpoint".to_owned(), env.s3_endpoint()),
        ("adminSecretName".to_owned(), ADMIN_SECRET.to_owned()),
        (
            "adminSecretNamespace".to_owned(),
            SYSTEM_NAMESPACE.to_owned(),
        ),
    ])
}

/// The three classes a scenario uses, for `provisioner`:
/// `<prefix>-delete` (forceDelete), `<prefix>-retain`, `<prefix>-shared`
/// (brownfield [`SHARED_BUCKET`]).
pub async fn create_classes(
    env: &TestEnv,
    client: &Client,
    prefix: &str,
    provisioner: &str,
) -> Result<Classes> {
    let mut delete = sample_params(env);
    delete.insert("forceDelete".into(), "true".into());
    let mut shared = sample_params(env);
    shared.insert("bucketName".into(), SHARED_BUCKET.into());
    let classes = Classes {
        delete: format!("{prefix}-delete"),
        retain: format!("{prefix}-retain"),
        shared: format!("{prefix}-shared"),
    };
    create_class(client, &classes.delete, provisioner, "Delete", delete).await?;
    create_class(
        client,
        &classes.retain,
        provisioner,
        "Retain",
        sample_params(env),
    )
    .await?;
    create_class(client, &classes.shared, provisioner, "Delete", shared).await?;
    Ok(classes)
}

/// Names of a scenario's classes.
#[derive(Clone, Debug)]
pub struct Classes {
    /// Greenfield, reclaim policy Delete, forceDelete.
    pub delete: String,
    /// Greenfield, reclaim policy Retain.
    pub retain: String,
    /// Brownfield ([`SHARED_BUCKET`]).
    pub shared: String,
}

/// What a claim asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `generateBucketName`, class with reclaim Delete.
    GeneratedDelete,
    /// `bucketName`, class with reclaim Delete.
    ExactDelete,
    /// `generateBucketName`, class with reclaim Retain.
    GeneratedRetain,
    /// `bucketName`, class with reclaim Retain.
    ExactRetain,
    /// Brownfield: access to [`SHARED_BUCKET`].
    Shared,
}

impl Kind {
    /// Whether deleting the claim keeps its bucket.
    pub fn keeps_bucket(&self) -> bool {
        !matches!(self, Self::GeneratedDelete | Self::ExactDelete)
    }

    /// Whether the claim gets a bucket of its own.
    pub fn greenfield(&self) -> bool {
        *self != Self::Shared
    }

    /// The claim's spec; `unique` makes exact bucket names unique.
    pub fn spec(&self, classes: &Classes, unique: &str) -> ObjectBucketClaimSpec {
        let (class, exact) = match self {
            Self::GeneratedDelete => (&classes.delete, false),
            Self::ExactDelete => (&classes.delete, true),
            Self::GeneratedRetain => (&classes.retain, false),
            Self::ExactRetain => (&classes.retain, true),
            Self::Shared => (&classes.shared, false),
        };
        let mut spec = ObjectBucketClaimSpec {
            storage_class_name: class.clone(),
            ..Default::default()
        };
        match (self, exact) {
            (Self::Shared, _) => {}
            (_, true) => spec.bucket_name = Some(format!("exact-{unique}")),
            (_, false) => spec.generate_bucket_name = Some(format!("gen-{unique}")),
        }
        spec
    }
}
