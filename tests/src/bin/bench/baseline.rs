//! The apiserver's baselines: how fast it creates small objects (ConfigMaps,
//! a small custom resource) with nothing else going on, and how long single
//! requests take one at a time.

use std::collections::BTreeMap;
use std::time::Instant;

use anyhow::{Context, Result};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};

use crate::report::{ms, percentile};

/// A small custom resource for the baseline: custom resources cost the
/// apiserver more per write than built-in kinds (JSON, schema validation,
/// pruning, unstructured managedFields), and 5 of the library's 8 writes
/// per claim are to custom resources.
pub const RECORD_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: benchrecords.bench.objectbucket.io
spec:
  group: bench.objectbucket.io
  scope: Namespaced
  names: {kind: BenchRecord, plural: benchrecords, singular: benchrecord, listKind: BenchRecordList}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                key: {type: string}
"#;

fn record_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("bench.objectbucket.io", "v1", "BenchRecord"),
        "benchrecords",
    )
}

/// Which small object a baseline creates.
#[derive(Clone, Copy)]
pub enum Raw {
    ConfigMap,
    CustomResource,
}

async fn create_raw(client: &Client, kind: Raw, ns: &str, name: &str) -> Result<()> {
    match kind {
        Raw::ConfigMap => {
            let mut cm = ConfigMap {
                data: Some(BTreeMap::from([("key".to_owned(), "value".to_owned())])),
                ..Default::default()
            };
            cm.metadata.name = Some(name.to_owned());
            Api::<ConfigMap>::namespaced(client.clone(), ns)
                .create(&PostParams::default(), &cm)
                .await
                .with_context(|| format!("creating ConfigMap {ns}/{name}"))?;
        }
        Raw::CustomResource => {
            let ar = record_resource();
            let mut obj = DynamicObject::new(name, &ar).within(ns);
            obj.data = serde_json::json!({ "spec": { "key": "value" } });
            Api::<DynamicObject>::namespaced_with(client.clone(), ns, &ar)
                .create(&PostParams::default(), &obj)
                .await
                .with_context(|| format!("creating BenchRecord {ns}/{name}"))?;
        }
    }
    Ok(())
}

/// Creates `count` small objects, `concurrency` at a time; objects/s.
pub async fn raw_create_rate(
    client: &Client,
    kind: Raw,
    ns: &str,
    prefix: &str,
    count: usize,
    concurrency: usize,
) -> Result<f64> {
    let started = Instant::now();
    futures::stream::iter(0..count)
        .map(|i| async move { create_raw(client, kind, ns, &format!("{prefix}-{i:05}")).await })
        .buffer_unordered(concurrency)
        .try_for_each(|_| async { Ok(()) })
        .await?;
    Ok(count as f64 / started.elapsed().as_secs_f64())
}

/// Latency of single requests, one at a time: the floor under bind latency.
pub async fn serial_latency(client: &Client, ns: &str, count: usize) -> Result<String> {
    let mut cm = Vec::with_capacity(count);
    let mut cr = Vec::with_capacity(count);
    let mut get = Vec::with_capacity(count);
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    for i in 0..count {
        let t = Instant::now();
        create_raw(client, Raw::ConfigMap, ns, &format!("serial-{i:05}")).await?;
        cm.push(t.elapsed());
        let t = Instant::now();
        create_raw(client, Raw::CustomResource, ns, &format!("serial-{i:05}")).await?;
        cr.push(t.elapsed());
        let t = Instant::now();
        cms.get_opt(&format!("absent-{i:05}")).await?;
        get.push(t.elapsed());
    }
    for v in [&mut cm, &mut cr, &mut get] {
        v.sort();
    }
    Ok(format!(
        "one request at a time, p50: ConfigMap create {:.1} ms, custom resource create {:.1} ms, GET (404) {:.1} ms",
        ms(percentile(&cm, 0.5)),
        ms(percentile(&cr, 0.5)),
        ms(percentile(&get, 0.5))
    ))
}
