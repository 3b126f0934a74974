//! The environment's own PKI, made afresh for each one: a CA, the
//! apiserver's serving certificate, the service-account signing key, and
//! client certificates for users (the apiserver trusts the CA for client
//! authentication: `--client-ca-file`); and files only their owner may read.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use anyhow::{Context, Result};

pub(super) struct Pki {
    pub(super) ca_pem: String,
    pub(super) ca_key_pem: String,
    pub(super) serving_cert_pem: String,
    pub(super) serving_key_pem: String,
    pub(super) sa_private_pem: String,
    pub(super) sa_public_pem: String,
}

pub(super) fn generate_pki() -> Result<Pki> {
    use rcgen::{
        CertificateParams, DnType, ExtendedKeyUsagePurpose, Issuer, KeyPair, KeyUsagePurpose,
        PKCS_ECDSA_P256_SHA256,
    };

    let ca_key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
    let ca_key_pem = ca_key.serialize_pem();
    let ca_params = ca_params()?;
    let ca_cert = ca_params.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca_params, ca_key);

    let serving_key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
    let mut serving = CertificateParams::new(
        [
            "127.0.0.1",
            "::1",
            "localhost",
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
            "10.0.0.1",
        ]
        .map(String::from)
        .to_vec(),
    )?;
    serving
        .distinguished_name
        .push(DnType::CommonName, "kube-apiserver");
    serving.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let serving_cert = serving.signed_by(&serving_key, &issuer)?;

    let sa_key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;

    Ok(Pki {
        ca_pem: ca_cert.pem(),
        ca_key_pem,
        serving_cert_pem: serving_cert.pem(),
        serving_key_pem: serving_key.serialize_pem(),
        sa_private_pem: sa_key.serialize_pem(),
        sa_public_pem: sa_key.public_key_pem(),
    })
}

/// The CA's parameters: the same each time, so that the CA can be rebuilt
/// from its key to sign more certificates ([`client_certificate`]).
fn ca_params() -> Result<rcgen::CertificateParams> {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyUsagePurpose};
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(DnType::CommonName, "obc-testenv CA");
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    Ok(params)
}

/// A client certificate and its key (PEM) for `user`, signed by the CA
/// whose key is `ca_key_pem`: the apiserver authenticates it as that user
/// (the CN), in no group but `system:authenticated` (no O).
pub(super) fn client_certificate(ca_key_pem: &str, user: &str) -> Result<(String, String)> {
    use rcgen::{
        CertificateParams, DnType, ExtendedKeyUsagePurpose, Issuer, KeyPair, KeyUsagePurpose,
        PKCS_ECDSA_P256_SHA256,
    };
    let ca_key = KeyPair::from_pem(ca_key_pem).context("the CA key")?;
    let issuer = Issuer::new(ca_params()?, ca_key);
    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.distinguished_name.push(DnType::CommonName, user);
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let cert = params.signed_by(&key, &issuer)?;
    Ok((cert.pem(), key.serialize_pem()))
}

pub(super) fn write_private(path: &Path, contents: &[u8]) -> Result<()> {
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    f.write_all(contents)
        .with_context(|| format!("writing {}", path.display()))
}
