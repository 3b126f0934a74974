//! COSI (`objectstorage.k8s.io/v1alpha2`) for the end-to-end tests: the
//! CRDs from `crds/cosi/` ([`install_cosi_crds`]), the five kinds as
//! dynamic objects (so that a test states the wire format it expects, not
//! the library's Rust types), what a BucketClaim or BucketAccess says of
//! itself ([`ready`], [`error_message`]), the keys a BucketAccess's Secret
//! holds ([`access_keys`]), and the RBAC file `deploy/rbac-cosi.yaml`
//! grants beside `deploy/rbac.yaml` ([`COSI_RBAC`]).

use std::path::Path;
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use crate::testenv::TestEnv;
use crate::wait_for;

/// The API group.
pub const GROUP: &str = "objectstorage.k8s.io";
/// The only version.
pub const VERSION: &str = "v1alpha2";
/// The driver name `deploy/example-cosi-classes.yaml` names.
pub const DRIVER: &str = "sample-s3.objectbucket.io";
/// The COSI RBAC of `deploy/`, applied beside `deploy/rbac.yaml`.
pub const COSI_RBAC: &str = "deploy/rbac-cosi.yaml";
/// What an RBAC serving both OBC and COSI grants for paths an end-to-end
/// run does not take: [`crate::rbac::NEEDED_BUT_NOT_EXERCISED`] and
/// [`COSI_NEEDED_BUT_NOT_EXERCISED`].
pub fn obc_and_cosi_needed_but_not_exercised()
-> Vec<(&'static str, &'static str, &'static str, &'static str)> {
    crate::rbac::NEEDED_BUT_NOT_EXERCISED
        .iter()
        .chain(COSI_NEEDED_BUT_NOT_EXERCISED)
        .copied()
        .collect()
}

/// Permissions `deploy/rbac-cosi.yaml` grants for paths the end-to-end
/// run does not take, and why: (API group, resource, verb, reason), as
/// [`crate::rbac::NEEDED_BUT_NOT_EXERCISED`].
pub const COSI_NEEDED_BUT_NOT_EXERCISED: &[(&str, &str, &str, &str)] = &[
    (
        "objectstorage.k8s.io",
        "bucketaccesses/finalizers",
        "update",
        "an admission check (OwnerReferencesPermissionEnforcement) of the access Secrets' blockOwnerDeletion, not a request; the test apiserver does not run that plugin",
    ),
    ("objectstorage.k8s.io", "bucketclasses", "get", CLASS_GET),
    (
        "objectstorage.k8s.io",
        "bucketaccessclasses",
        "get",
        CLASS_GET,
    ),
];

/// Why a class GET may not be seen in a run.
const CLASS_GET: &str = "a class is read from its watch's cache; a GET only on a miss (a class created a moment before the claim or access naming it) or where classes are not watched (the driver role alone, without the sweep): lib-provisioner/src/cosi/fresh.rs";
/// The annotation the binding role puts on a Bucket whose claim is being
/// deleted (the host is `k8.io` in upstream's code, and here).
pub const BEING_DELETED: &str = "objectstorage.k8.io/bucketclaim-being-deleted";
/// The annotation that hands a BucketAccess back to the binding role.
pub const MANAGEMENT_OVERRIDE: &str = "objectstorage.k8s.io/controller-management-override";

/// One of the five kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `BucketClass` (cluster).
    BucketClass,
    /// `BucketClaim` (namespaced).
    BucketClaim,
    /// `Bucket` (cluster).
    Bucket,
    /// `BucketAccessClass` (cluster).
    BucketAccessClass,
    /// `BucketAccess` (namespaced).
    BucketAccess,
}

impl Kind {
    /// The kind's API resource.
    pub fn resource(self) -> ApiResource {
        let (kind, plural) = match self {
            Self::BucketClass => ("BucketClass", "bucketclasses"),
            Self::BucketClaim => ("BucketClaim", "bucketclaims"),
            Self::Bucket => ("Bucket", "buckets"),
            Self::BucketAccessClass => ("BucketAccessClass", "bucketaccessclasses"),
            Self::BucketAccess => ("BucketAccess", "bucketaccesses"),
        };
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, VERSION, kind), plural)
    }

    /// Whether its objects live in a namespace.
    pub fn namespaced(self) -> bool {
        matches!(self, Self::BucketClaim | Self::BucketAccess)
    }
}

/// The API of `kind` in `ns` (ignored for cluster-scoped kinds).
pub fn api(client: &Client, kind: Kind, ns: &str) -> Api<DynamicObject> {
    let ar = kind.resource();
    if kind.namespaced() {
        Api::namespaced_with(client.clone(), ns, &ar)
    } else {
        Api::all_with(client.clone(), &ar)
    }
}

/// The CRD files under `crds/cosi/`, by name, in name order.
pub fn cosi_crd_files() -> Result<Vec<(String, String)>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../crds/cosi");
    let mut files = Vec::new();
    for entry in std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "yaml") {
            let name = path
                .file_name()
                .context("file name")?
                .to_string_lossy()
                .into_owned();
            files.push((name, std::fs::read_to_string(&path)?));
        }
    }
    files.sort();
    if files.len() != 5 {
        bail!(
            "crds/cosi/ holds {} CRD files, not COSI's five",
            files.len()
        );
    }
    Ok(files)
}

/// Installs the CRDs of `crds/cosi/`.
pub async fn install_cosi_crds(env: &TestEnv) -> Result<()> {
    for (name, yaml) in cosi_crd_files()? {
        env.install_crds(&yaml)
            .await
            .with_context(|| format!("crds/cosi/{name}"))?;
    }
    Ok(())
}

/// An object of `kind` named `name` from its JSON body (`spec`, and
/// `metadata` fields other than the name).
pub fn object(kind: Kind, name: &str, body: Value) -> Result<DynamicObject> {
    let ar = kind.resource();
    let mut v = json!({"apiVersion": ar.api_version, "kind": ar.kind, "metadata": {"name": name}});
    if let (Some(obj), Some(extra)) = (v.as_object_mut(), body.as_object()) {
        for (k, val) in extra {
            if k == "metadata" {
                if let (Some(meta), Some(m)) = (obj["metadata"].as_object_mut(), val.as_object()) {
                    meta.extend(m.clone());
                }
            } else {
                obj.insert(k.clone(), val.clone());
            }
        }
    }
    Ok(serde_json::from_value(v)?)
}

/// Creates an object of `kind` in `ns` from its body (see [`object`]).
pub async fn create(
    client: &Client,
    kind: Kind,
    ns: &str,
    name: &str,
    body: Value,
) -> Result<DynamicObject> {
    api(client, kind, ns)
        .create(&PostParams::default(), &object(kind, name, body)?)
        .await
        .with_context(|| format!("creating {kind:?} {ns}/{name}"))
}

/// A BucketClaim's body for a new bucket of `class`.
pub fn claim_of_class(class: &str) -> Value {
    json!({"spec": {"bucketClassName": class, "protocols": ["S3"]}})
}

/// A BucketAccess's body: S3 keys of `class` for each (claim, mode, Secret
/// name) of `claims`.
pub fn access_of(class: &str, claims: &[(&str, &str, &str)]) -> Value {
    let claims: Vec<Value> = claims
        .iter()
        .map(|(claim, mode, secret)| {
            json!({"bucketClaimName": claim, "accessMode": mode, "accessSecretName": secret})
        })
        .collect();
    json!({"spec": {"bucketClaims": claims, "bucketAccessClassName": class, "protocol": "S3"}})
}

/// Whether the object's `status.readyToUse` is true.
pub fn ready(o: &DynamicObject) -> bool {
    o.data["status"]["readyToUse"].as_bool() == Some(true)
}

/// The object's `status.error.message`, or empty.
pub fn error_message(o: &DynamicObject) -> String {
    o.data["status"]["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// A string field of the object's status.
pub fn status_str(o: &DynamicObject, field: &str) -> Option<String> {
    o.data["status"][field].as_str().map(str::to_owned)
}

/// Waits until `kind` `ns/name` is `readyToUse`; on timeout the error
/// names its last status.
pub async fn wait_ready(
    client: &Client,
    kind: Kind,
    ns: &str,
    name: &str,
    timeout: Duration,
) -> Result<DynamicObject> {
    let api = api(client, kind, ns);
    let got = wait_for(
        timeout,
        format!("{kind:?} {ns}/{name} to be readyToUse"),
        || {
            let api = api.clone();
            async move {
                let o = api.get(name).await?;
                Ok(ready(&o).then_some(o))
            }
        },
    )
    .await;
    match got {
        Ok(o) => Ok(o),
        Err(e) => {
            let last = api.get(name).await.map(|o| o.data["status"].clone());
            Err(e.context(format!("last status of {kind:?} {ns}/{name}: {last:?}")))
        }
    }
}

/// Waits until `kind` `ns/name` has a non-empty `status.error.message`
/// and returns it.
pub async fn wait_error(
    client: &Client,
    kind: Kind,
    ns: &str,
    name: &str,
    timeout: Duration,
) -> Result<String> {
    let api = api(client, kind, ns);
    wait_for(
        timeout,
        format!("{kind:?} {ns}/{name} to report an error"),
        || {
            let api = api.clone();
            async move {
                let o = api.get(name).await?;
                let m = error_message(&o);
                Ok((!m.is_empty()).then_some(m))
            }
        },
    )
    .await
}

/// What a BucketAccess's Secret holds for S3 (the `COSI_S3_*` keys).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AccessKeys {
    /// `COSI_S3_BUCKET_ID`: the bucket's name on the store.
    pub bucket: String,
    /// `COSI_S3_ENDPOINT`.
    pub endpoint: String,
    /// `COSI_S3_REGION`.
    pub region: String,
    /// `COSI_S3_ADDRESSING_STYLE`.
    pub addressing_style: String,
    /// `COSI_S3_ACCESS_KEY_ID`.
    pub key_id: String,
    /// `COSI_S3_ACCESS_SECRET_KEY`.
    pub secret: String,
}

/// The `COSI_S3_*` keys of Secret `ns/name`; the secret key is registered
/// for the log scan.
pub async fn access_keys(client: &Client, ns: &str, name: &str) -> Result<AccessKeys> {
    let secret = Api::<Secret>::namespaced(client.clone(), ns)
        .get(name)
        .await
        .with_context(|| format!("the access Secret {ns}/{name}"))?;
    keys_of(&secret)
}

/// The `COSI_S3_*` keys of `secret`.
pub fn keys_of(secret: &Secret) -> Result<AccessKeys> {
    let data = secret.data.clone().unwrap_or_default();
    let value = |k: &str| -> Result<String> {
        let v = data
            .get(k)
            .with_context(|| format!("{} has no {k}", secret.name_any()))?;
        Ok(String::from_utf8(v.0.clone())?)
    };
    let keys = AccessKeys {
        bucket: value("COSI_S3_BUCKET_ID")?,
        endpoint: value("COSI_S3_ENDPOINT")?,
        region: value("COSI_S3_REGION")?,
        addressing_style: value("COSI_S3_ADDRESSING_STYLE")?,
        key_id: value("COSI_S3_ACCESS_KEY_ID")?,
        secret: value("COSI_S3_ACCESS_SECRET_KEY")?,
    };
    crate::reliability::register_secret(&keys.secret);
    Ok(keys)
}

impl AccessKeys {
    /// An S3 client with these keys, at their endpoint.
    pub fn s3(&self) -> aws_sdk_s3::Client {
        crate::testenv::s3_client_for(&self.endpoint, &self.key_id, &self.secret)
    }
}

/// What an S3 client may do in one bucket, tried: list, read `key`, write
/// a new object, delete `key`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reach {
    /// ListObjectsV2 succeeded.
    pub list: bool,
    /// GetObject of the probe key succeeded.
    pub read: bool,
    /// PutObject of a new key succeeded.
    pub write: bool,
    /// DeleteObject of the probe key succeeded (then it was put back).
    pub delete: bool,
}

impl Reach {
    /// Nothing at all.
    pub fn none(&self) -> bool {
        *self == Reach::default()
    }
}

/// Tries what `s3` may do in `bucket`; `probe` is an object that exists
/// there (written by `root` if a delete succeeded, so that the data stays).
pub async fn reach(
    s3: &aws_sdk_s3::Client,
    root: &aws_sdk_s3::Client,
    bucket: &str,
    probe: &str,
) -> Reach {
    use aws_sdk_s3::primitives::ByteStream;
    let list = s3.list_objects_v2().bucket(bucket).send().await.is_ok();
    let read = s3
        .get_object()
        .bucket(bucket)
        .key(probe)
        .send()
        .await
        .is_ok();
    let write = s3
        .put_object()
        .bucket(bucket)
        .key("reach-probe.txt")
        .body(ByteStream::from_static(b"probe"))
        .send()
        .await
        .is_ok();
    if write {
        let _ = root
            .delete_object()
            .bucket(bucket)
            .key("reach-probe.txt")
            .send()
            .await;
    }
    let body = match root.get_object().bucket(bucket).key(probe).send().await {
        Ok(o) => o.body.collect().await.map(|b| b.into_bytes()).ok(),
        Err(_) => None,
    };
    let delete = s3
        .delete_object()
        .bucket(bucket)
        .key(probe)
        .send()
        .await
        .is_ok()
        && root
            .head_object()
            .bucket(bucket)
            .key(probe)
            .send()
            .await
            .is_err();
    if delete && let Some(b) = body {
        let _ = root
            .put_object()
            .bucket(bucket)
            .key(probe)
            .body(ByteStream::from(b.to_vec()))
            .send()
            .await;
    }
    Reach {
        list,
        read,
        write,
        delete,
    }
}

/// The BucketAccessClass a [`CosiSuite`] makes.
pub const ACCESS_CLASS: &str = "cosi-keys";
/// The BucketClass (deletionPolicy Delete, forceDelete) a [`CosiSuite`]
/// makes.
pub const DELETE_CLASS: &str = "cosi-delete";
/// The BucketClass (deletionPolicy Retain) a [`CosiSuite`] makes.
pub const RETAIN_CLASS: &str = "cosi-retain";
/// Environment variable naming the COSI driver of `crash-provisioner`
/// (unset: COSI off).
pub const DRIVER_ENV: &str = "OBC_COSI_DRIVER_NAME";

/// The sample provisioner serving COSI on RustFS, as the reliability
/// suite runs it: CRDs (both APIs), `deploy/`'s namespace and RBAC with
/// [`COSI_RBAC`], the kube-controller-manager (garbage collector), RustFS,
/// its admin Secret, the classes [`DELETE_CLASS`], [`RETAIN_CLASS`] and
/// [`ACCESS_CLASS`], and a launch of one `crash-provisioner` process with
/// COSI on for [`DRIVER`].
pub struct CosiSuite {
    /// The environment (no s3s-fs: RustFS is the store).
    pub env: TestEnv,
    /// Its admin client.
    pub admin: Client,
    /// The store.
    pub store: crate::rustfs::RustFs,
    /// The store's admin API, with the root key pair.
    pub store_admin: sample_provisioner::admin::AdminClient,
    /// The process to start.
    pub launch: crate::reliability::Launch,
}

impl CosiSuite {
    /// Starts it all; `bin` is the `crash-provisioner` binary, `tag` names
    /// its logs.
    pub async fn start(bin: impl Into<std::path::PathBuf>, tag: &str) -> Result<Self> {
        use crate::reliability::{Launch, RUSTFS_ADMIN_SECRET, SYSTEM_NAMESPACE};
        let env = TestEnv::start_with(crate::testenv::Store::None).await?;
        crate::setup::install_deploy(&env).await?;
        install_cosi_crds(&env).await?;
        env.apply_yaml(&crate::setup::repo_file(COSI_RBAC)?).await?;
        env.start_controller_manager().await?;
        let store = crate::rustfs::RustFs::start(env.dir()).await?;
        let (key, secret) = store.root_credentials();
        crate::reliability::register_secret(&secret);
        let admin = env.admin_client();
        crate::setup::create_admin_secret(
            &admin,
            SYSTEM_NAMESPACE,
            RUSTFS_ADMIN_SECRET,
            &key,
            &secret,
        )
        .await?;
        let endpoint = store.endpoint().trim_end_matches('/').to_owned();
        let params = json!({
            "endpoint": endpoint,
            "adminSecretName": RUSTFS_ADMIN_SECRET,
            "adminSecretNamespace": SYSTEM_NAMESPACE,
        });
        let mut delete_params = params.clone();
        delete_params["forceDelete"] = "true".into();
        for (name, policy, params) in [
            (DELETE_CLASS, "Delete", delete_params),
            (RETAIN_CLASS, "Retain", params.clone()),
        ] {
            let spec =
                json!({"driverName": DRIVER, "deletionPolicy": policy, "parameters": params});
            create(&admin, Kind::BucketClass, "", name, json!({"spec": spec})).await?;
        }
        let spec = json!({"driverName": DRIVER, "authenticationType": "Key", "parameters": params});
        create(
            &admin,
            Kind::BucketAccessClass,
            "",
            ACCESS_CLASS,
            json!({"spec": spec}),
        )
        .await?;
        let store_admin = sample_provisioner::admin::AdminClient::new(
            &endpoint,
            "us-east-1",
            lib_provisioner::Credentials::new(key, secret),
        )?;
        let kubeconfig = env
            .service_account_kubeconfig(SYSTEM_NAMESPACE, "sample-provisioner")
            .await?;
        let mut launch = Launch::new(bin, &kubeconfig, tag);
        launch.env.push((DRIVER_ENV.to_owned(), DRIVER.to_owned()));
        Ok(Self {
            env,
            admin,
            store,
            store_admin,
            launch,
        })
    }

    /// The store's root S3 client.
    pub fn root(&self) -> aws_sdk_s3::Client {
        self.store.root_client()
    }

    /// The store's users (access keys), the root user not among them.
    pub async fn users(&self) -> Result<std::collections::BTreeSet<String>> {
        let (root, _) = self.store.root_credentials();
        Ok(self
            .store_admin
            .list_users()
            .await?
            .into_keys()
            .filter(|u| *u != root)
            .collect())
    }

    /// The store's buckets.
    pub async fn buckets(&self) -> Result<std::collections::BTreeSet<String>> {
        let out = self.root().list_buckets().send().await?;
        Ok(out
            .buckets()
            .iter()
            .filter_map(|b| b.name().map(str::to_owned))
            .collect())
    }

    /// Ends a test: scans the logs under `logs` for credentials, prints the
    /// summary (failed if `result` or the scan failed, or it counted harm),
    /// stops the store; returns the first error.
    pub async fn finish(
        &self,
        mut summary: crate::reliability::Summary,
        logs: &Path,
        result: Result<()>,
    ) -> Result<()> {
        let scan = crate::reliability::assert_no_leaks(logs);
        summary.note(
            "logs scanned for credentials",
            scan.as_ref().map_or("LEAK".to_owned(), ToString::to_string),
        );
        let clean = summary.counts.clean();
        summary.failed = result.is_err() || scan.is_err() || !clean;
        summary.print(logs);
        self.store.stop().await;
        result?;
        scan?;
        if !clean {
            bail!("counted harm: {:?}", summary.counts);
        }
        Ok(())
    }
}
