//! A server on the host as a Service: Pods cannot reach 127.0.0.1 of the
//! host, but they reach the bridge address; a Service without selector plus
//! an EndpointSlice pointing at it gives them a stable ClusterIP for it.

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointPort, EndpointSlice};
use kube::api::{Api, ObjectMeta, PostParams};

use super::Node;
use super::network::BRIDGE_ADDRESS;

impl Node {
    /// Creates Service `namespace/name` (no selector) on port `port` and an
    /// EndpointSlice sending it to `BRIDGE_ADDRESS:host_port`, where a
    /// server on the host must listen (on the bridge address or 0.0.0.0).
    /// Returns the Service's ClusterIP; Pods also find it as
    /// `$<NAME>_SERVICE_HOST` (no cluster DNS here).
    pub async fn expose_host_port(
        &self,
        namespace: &str,
        name: &str,
        port: u16,
        host_port: u16,
    ) -> Result<String> {
        let services: Api<Service> = Api::namespaced(self.admin_client(), namespace);
        let service = Service {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                ..Default::default()
            },
            spec: Some(ServiceSpec {
                ports: Some(vec![ServicePort {
                    name: Some("port".into()),
                    port: i32::from(port),
                    target_port: Some(
                        k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(i32::from(
                            host_port,
                        )),
                    ),
                    protocol: Some("TCP".into()),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        };
        let created = services
            .create(&PostParams::default(), &service)
            .await
            .with_context(|| format!("creating Service {namespace}/{name}"))?;
        let slices: Api<EndpointSlice> = Api::namespaced(self.admin_client(), namespace);
        let slice = EndpointSlice {
            metadata: ObjectMeta {
                name: Some(format!("{name}-host")),
                labels: Some(
                    [
                        ("kubernetes.io/service-name".to_string(), name.to_string()),
                        (
                            "endpointslice.kubernetes.io/managed-by".to_string(),
                            "obc-node".to_string(),
                        ),
                    ]
                    .into(),
                ),
                ..Default::default()
            },
            address_type: "IPv4".into(),
            endpoints: Some(vec![Endpoint {
                addresses: vec![BRIDGE_ADDRESS.to_string()],
                ..Default::default()
            }]),
            ports: Some(vec![EndpointPort {
                name: Some("port".into()),
                port: Some(i32::from(host_port)),
                protocol: Some("TCP".into()),
                ..Default::default()
            }]),
        };
        slices
            .create(&PostParams::default(), &slice)
            .await
            .with_context(|| format!("creating EndpointSlice {namespace}/{name}-host"))?;
        created
            .spec
            .and_then(|s| s.cluster_ip)
            .with_context(|| format!("Service {namespace}/{name} got no ClusterIP"))
    }
}
