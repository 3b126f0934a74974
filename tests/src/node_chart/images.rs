//! The two images' archives (`scripts/build-image`,
//! `scripts/build-app-image`), found where the scripts write them, and
//! renamed for the node.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use anyhow::{Context as _, Result, ensure};

use super::TAG;

pub(super) fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `target/image/<file>` (or `$CARGO_TARGET_DIR/image/<file>`), or the path
/// in `env_var`; an error naming the script that builds it when missing.
pub fn image_archive(env_var: &str, file: &str, script: &str) -> Result<PathBuf> {
    let path = match std::env::var_os(env_var) {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => std::env::var_os("CARGO_TARGET_DIR")
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| repo().join("target"))
            .join("image")
            .join(file),
    };
    ensure!(
        path.is_file(),
        "{} is missing: run `{script}`, or set {env_var}",
        path.display()
    );
    Ok(path)
}

/// The provisioner's archive from `scripts/build-image`.
pub fn provisioner_archive() -> Result<PathBuf> {
    image_archive(
        "OBC_IMAGE_ARCHIVE",
        "sample-provisioner.oci.tar",
        "scripts/build-image",
    )
}

/// The application's archive from `scripts/build-app-image`.
pub fn app_archive() -> Result<PathBuf> {
    image_archive(
        "OBC_APP_IMAGE_ARCHIVE",
        "bucket-app.oci.tar",
        "scripts/build-app-image",
    )
}

pub(super) fn run(cmd: &mut std::process::Command) -> Result<String> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {:?}", cmd.get_program()))?;
    ensure!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A copy of the OCI archive `src` in `dir` whose only image is named
/// `name` (what containerd calls it on import), whatever name it had.
pub fn renamed_archive(src: &Path, name: &str, dir: &Path) -> Result<PathBuf> {
    let layout = dir.join(format!("layout-{}", name.replace(['/', ':'], "_")));
    std::fs::create_dir_all(&layout)?;
    run(std::process::Command::new("tar")
        .arg("-xf")
        .arg(src)
        .arg("-C")
        .arg(&layout))?;
    let index_path = layout.join("index.json");
    let mut index: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&index_path)?)
        .context("the archive's index.json")?;
    let manifests = index["manifests"]
        .as_array_mut()
        .context("index.json has no manifests")?;
    ensure!(manifests.len() == 1, "one image in {}", src.display());
    let tag = name.rsplit(':').next().unwrap_or(TAG);
    manifests[0]["annotations"] = serde_json::json!({
        "io.containerd.image.name": name,
        "org.opencontainers.image.ref.name": tag,
    });
    std::fs::write(&index_path, serde_json::to_vec(&index)?)?;
    let out = dir.join(format!("{}.oci.tar", name.replace(['/', ':'], "_")));
    run(std::process::Command::new("tar")
        .arg("-cf")
        .arg(&out)
        .arg("-C")
        .arg(&layout)
        .args(["oci-layout", "index.json", "blobs"]))?;
    std::fs::remove_dir_all(&layout)?;
    Ok(out)
}
