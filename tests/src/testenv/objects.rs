//! What the admin writes: namespaces, server-side applied YAML (RBAC,
//! classes, any kind the apiserver serves) and CRDs, waited on until
//! Established.

use std::time::Duration;

use anyhow::{Context, Result, bail};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, GroupVersionKind, ObjectMeta, Patch, PatchParams, PostParams};
use kube::discovery::{self, Scope};
use serde::Deserialize;
use serde::de::DeserializeOwned;

use super::{TestEnv, is_kube_status, wait_for};

const FIELD_MANAGER: &str = "obc-testenv";

impl TestEnv {
    /// Creates `namespace` if it does not exist.
    pub async fn ensure_namespace(&self, namespace: &str) -> Result<()> {
        let api: Api<Namespace> = Api::all(self.admin.clone());
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(namespace.to_string()),
                ..Default::default()
            },
            ..Default::default()
        };
        match api.create(&PostParams::default(), &ns).await {
            Ok(_) => Ok(()),
            Err(e) if is_kube_status(&e, 409) => Ok(()),
            Err(e) => Err(e).with_context(|| format!("creating namespace {namespace}")),
        }
    }

    /// Server-side applies every object of a multi-document YAML string with the
    /// admin client (any kind the apiserver serves: RBAC, Namespace, ServiceAccount,
    /// StorageClass, CRDs, custom objects...). Namespaced objects without a namespace
    /// go to `default`. Returns the applied objects.
    pub async fn apply_yaml(&self, yaml: &str) -> Result<Vec<DynamicObject>> {
        let mut applied = Vec::new();
        for (i, obj) in yaml_documents::<DynamicObject>(yaml, "a Kubernetes object")? {
            applied.push(
                self.apply_object(obj)
                    .await
                    .with_context(|| format!("applying YAML document {i}"))?,
            );
        }
        Ok(applied)
    }

    /// Server-side applies one object (see [`Self::apply_yaml`]).
    pub async fn apply_object(&self, obj: DynamicObject) -> Result<DynamicObject> {
        let types = obj
            .types
            .as_ref()
            .context("object has no apiVersion/kind")?;
        let gvk = GroupVersionKind::try_from(types)?;
        let name = obj
            .metadata
            .name
            .clone()
            .with_context(|| format!("{} without metadata.name", gvk.kind))?;
        let (resource, caps) = discovery::pinned_kind(&self.admin, &gvk)
            .await
            .with_context(|| format!("discovering {}/{} {}", gvk.group, gvk.version, gvk.kind))?;
        let api: Api<DynamicObject> = match caps.scope {
            Scope::Namespaced => {
                let ns = obj.metadata.namespace.as_deref().unwrap_or("default");
                Api::namespaced_with(self.admin.clone(), ns, &resource)
            }
            Scope::Cluster => Api::all_with(self.admin.clone(), &resource),
        };
        let params = PatchParams::apply(FIELD_MANAGER).force();
        api.patch(&name, &params, &Patch::Apply(&obj))
            .await
            .with_context(|| format!("applying {} {name}", gvk.kind))
    }

    /// Applies the CustomResourceDefinitions in a multi-document YAML string and
    /// waits until each is Established.
    pub async fn install_crds(&self, yaml: &str) -> Result<Vec<CustomResourceDefinition>> {
        let crds: Vec<CustomResourceDefinition> =
            yaml_documents(yaml, "a CustomResourceDefinition")?
                .into_iter()
                .map(|(_, crd)| crd)
                .collect();
        if crds.is_empty() {
            bail!("install_crds: no CustomResourceDefinition in the YAML");
        }
        let mut installed = Vec::new();
        for crd in &crds {
            installed.push(self.install_crd(crd).await?);
        }
        Ok(installed)
    }

    /// Applies one CustomResourceDefinition (e.g. `MyKind::crd()`) and waits until it
    /// is Established.
    pub async fn install_crd(
        &self,
        crd: &CustomResourceDefinition,
    ) -> Result<CustomResourceDefinition> {
        let name = crd
            .metadata
            .name
            .clone()
            .context("CustomResourceDefinition without metadata.name")?;
        let api: Api<CustomResourceDefinition> = Api::all(self.admin.clone());
        let mut body = crd.clone();
        body.metadata.managed_fields = None;
        body.metadata.resource_version = None;
        body.status = None;
        let params = PatchParams::apply(FIELD_MANAGER).force();
        api.patch(&name, &params, &Patch::Apply(&body))
            .await
            .with_context(|| format!("applying CustomResourceDefinition {name}"))?;
        wait_for(
            Duration::from_secs(30),
            format_args!("CustomResourceDefinition {name} to be Established"),
            || async {
                let crd = api.get(&name).await?;
                let established = crd
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|cs| {
                        cs.iter()
                            .any(|c| c.type_ == "Established" && c.status == "True")
                    });
                Ok(established.then_some(crd))
            },
        )
        .await
    }
}

/// The documents of a multi-document YAML string that are not empty, each
/// with its index, as `T` (`what` names it in the error if one is not).
fn yaml_documents<T: DeserializeOwned>(yaml: &str, what: &str) -> Result<Vec<(usize, T)>> {
    let mut docs = Vec::new();
    for (i, doc) in serde_yaml::Deserializer::from_str(yaml).enumerate() {
        let value = serde_yaml::Value::deserialize(doc)
            .with_context(|| format!("parsing YAML document {i}"))?;
        if value.is_null() {
            continue;
        }
        let parsed = serde_yaml::from_value(value)
            .with_context(|| format!("YAML document {i} is not {what}"))?;
        docs.push((i, parsed));
    }
    Ok(docs)
}
