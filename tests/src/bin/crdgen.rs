//! Writes the CRD YAML generated from the Rust types into `crds/`.
//!
//! `cargo run -p obc-tests --bin crdgen [DIR]` (default: `crds` at the
//! workspace root).

use std::path::PathBuf;

fn main() -> std::io::Result<()> {
    let dir = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../crds"));
    std::fs::create_dir_all(&dir)?;
    for (name, yaml) in lib_provisioner::api::crd_files() {
        let path = dir.join(name);
        std::fs::write(&path, yaml)?;
        println!("wrote {}", path.display());
    }
    Ok(())
}
