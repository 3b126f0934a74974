//! Writes the CRD YAML generated from the Rust types into `crds/` (the
//! objectbucket.io ones) and `crds/cosi/` (the objectstorage.k8s.io ones).
//!
//! `cargo run -p obc-tests --bin crdgen [DIR]` (default: `crds` at the
//! workspace root).

use std::path::PathBuf;

fn main() -> std::io::Result<()> {
    let dir = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../crds"));
    write(&dir, lib_provisioner::api::crd_files())?;
    write(&dir.join("cosi"), lib_provisioner::cosi::api::crd_files())
}

fn write(dir: &std::path::Path, files: Vec<(&str, String)>) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    for (name, yaml) in files {
        let path = dir.join(name);
        std::fs::write(&path, yaml)?;
        println!("wrote {}", path.display());
    }
    Ok(())
}
