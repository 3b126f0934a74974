//! Kubernetes COSI (`objectstorage.k8s.io/v1alpha2`) served from the same
//! [`Provisioner`](crate::Provisioner): the API types ([`api`]) and the
//! controllers that bind claims and drive the provisioner.

pub mod api;
