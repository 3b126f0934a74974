//! Generates lib-provisioner's COSI gRPC code (`src/cosi/grpc/generated.rs`)
//! from `lib-provisioner/proto/cosi.proto` with tonic-prost-build and the
//! system's protoc. The `protogen` binary writes it; the `cosi_proto` test
//! fails when the checked-in file differs from what this generates.

use std::path::PathBuf;

use anyhow::{Context, Result};

/// The file protoc's output for package `sigs.k8s.io.cosi.v1alpha2` lands in.
const PACKAGE_FILE: &str = "sigs.k8s.io.cosi.v1alpha2.rs";

/// Messages holding secrets: no derived `Debug` (lib-provisioner writes one
/// that redacts them).
const SECRET_MESSAGES: [&str; 3] = [
    ".sigs.k8s.io.cosi.v1alpha2.S3CredentialInfo",
    ".sigs.k8s.io.cosi.v1alpha2.AzureCredentialInfo",
    ".sigs.k8s.io.cosi.v1alpha2.GcsCredentialInfo",
];

const HEADER: &str = "// Generated from lib-provisioner/proto/cosi.proto by\n// `cargo run -p obc-tests --bin protogen`; do not edit.\n\n";

/// `lib-provisioner/proto`.
pub fn proto_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../lib-provisioner/proto")
}

/// Where the generated code is checked in.
pub fn generated_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../lib-provisioner/src/cosi/grpc/generated.rs")
}

/// The code generated from the .proto: messages, the client (no transport
/// of its own: callers bring a channel) and the server traits.
pub fn generate() -> Result<String> {
    let out = tempfile::tempdir()?;
    let dir = proto_dir();
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .build_transport(false)
        .emit_rerun_if_changed(false)
        .skip_debug(SECRET_MESSAGES)
        .out_dir(out.path())
        .compile_protos(&[dir.join("cosi.proto")], std::slice::from_ref(&dir))
        .context("protoc could not compile cosi.proto (apt-get install protobuf-compiler)")?;
    let path = out.path().join(PACKAGE_FILE);
    let code =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    Ok(format!("{HEADER}{code}"))
}
