//! Kubernetes COSI (`objectstorage.k8s.io/v1alpha2`) served by any [`Provisioner`](crate::Provisioner).
#[cfg(feature = "cosi-grpc")]
pub mod grpc;
