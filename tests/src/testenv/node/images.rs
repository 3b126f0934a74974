//! Container images made here, never pulled: an [`OciImage`] is a list of
//! files packed as one uncompressed layer into an OCI image layout tar,
//! which `ctr -n k8s.io images import` loads into the namespace the CRI
//! uses. Names are under `localhost/` (a pull, if anything ever tried one,
//! would go to loopback); Pods use `imagePullPolicy: Never`.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};

use super::host::output;

/// The sandbox ("pause") image containerd's CRI runs for every Pod.
pub const PAUSE_IMAGE: &str = "localhost/obc/pause:1";
/// busybox (Debian's busybox-static, one symlink per applet), entrypoint `/bin/sh`.
pub const BUSYBOX_IMAGE: &str = "localhost/obc/busybox:1";
/// Where `busybox-static` installs the static busybox.
pub const BUSYBOX_PATH: &str = "/bin/busybox";

const PAUSE_SOURCE: &str = include_str!("pause.c");

enum Entry {
    Dir { mode: u32 },
    File { data: Vec<u8>, mode: u32 },
    Symlink { target: String },
}

/// An image being assembled: paths (relative, no leading `/`) to files,
/// directories and symlinks, all owned by root, mtime 0.
///
/// ```no_run
/// # use obc_tests::testenv::node::{OciImage, busybox_image};
/// # fn f() -> anyhow::Result<()> {
/// let mut image = busybox_image("localhost/obc/app:1")?;
/// image.file_from("usr/local/bin/app", std::path::Path::new("target/app"), 0o755)?;
/// image.entrypoint(&["/usr/local/bin/app"]);
/// image.write_archive(std::path::Path::new("/tmp/app.tar"))?;
/// # Ok(()) }
/// ```
pub struct OciImage {
    name: String,
    entries: Vec<(String, Entry)>,
    entrypoint: Vec<String>,
    env: Vec<String>,
}

impl OciImage {
    /// An empty image called `name` (`localhost/<path>:<tag>`).
    pub fn new(name: &str) -> OciImage {
        OciImage {
            name: name.to_string(),
            entries: Vec::new(),
            entrypoint: Vec::new(),
            env: vec!["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into()],
        }
    }

    /// The image's full name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A directory (its parents are added as needed).
    pub fn dir(&mut self, path: &str, mode: u32) -> &mut Self {
        self.parents(path);
        self.push(path, Entry::Dir { mode });
        self
    }

    /// A file with `data`.
    pub fn file(&mut self, path: &str, data: Vec<u8>, mode: u32) -> &mut Self {
        self.parents(path);
        self.push(path, Entry::File { data, mode });
        self
    }

    /// A file with the contents of the host's `source`.
    pub fn file_from(&mut self, path: &str, source: &Path, mode: u32) -> Result<&mut Self> {
        let data =
            std::fs::read(source).with_context(|| format!("reading {}", source.display()))?;
        Ok(self.file(path, data, mode))
    }

    /// A symlink to `target`.
    pub fn symlink(&mut self, path: &str, target: &str) -> &mut Self {
        self.parents(path);
        self.push(
            path,
            Entry::Symlink {
                target: target.to_string(),
            },
        );
        self
    }

    /// The command the container runs (`ENTRYPOINT`).
    pub fn entrypoint(&mut self, argv: &[&str]) -> &mut Self {
        self.entrypoint = argv.iter().map(|s| s.to_string()).collect();
        self
    }

    /// Adds `KEY=value` to the environment.
    pub fn env(&mut self, key_value: &str) -> &mut Self {
        self.env.push(key_value.to_string());
        self
    }

    fn push(&mut self, path: &str, entry: Entry) {
        let path = path.trim_matches('/').to_string();
        self.entries.retain(|(p, _)| *p != path);
        self.entries.push((path, entry));
    }

    fn parents(&mut self, path: &str) {
        let path = path.trim_matches('/');
        let mut at = String::new();
        let parts: Vec<&str> = path.split('/').collect();
        for part in &parts[..parts.len().saturating_sub(1)] {
            if !at.is_empty() {
                at.push('/');
            }
            at.push_str(part);
            if !self.entries.iter().any(|(p, _)| *p == at) {
                self.entries.push((at.clone(), Entry::Dir { mode: 0o755 }));
            }
        }
    }

    /// The layer: a tar of the entries, parents before children.
    fn layer(&self) -> Result<Vec<u8>> {
        let mut tar = Vec::new();
        let mut entries: Vec<&(String, Entry)> = self.entries.iter().collect();
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        for (path, entry) in entries {
            match entry {
                Entry::Dir { mode } => {
                    tar_entry(&mut tar, &format!("{path}/"), b'5', *mode, &[], "")?
                }
                Entry::File { data, mode } => tar_entry(&mut tar, path, b'0', *mode, data, "")?,
                Entry::Symlink { target } => tar_entry(&mut tar, path, b'2', 0o777, &[], target)?,
            }
        }
        tar.extend_from_slice(&[0u8; 1024]);
        Ok(tar)
    }

    /// Writes the image as an OCI image layout tar to `path`, with the
    /// annotations `ctr images import` names the image by.
    pub fn write_archive(&self, path: &Path) -> Result<PathBuf> {
        let Some((_, tag)) = self.name.rsplit_once(':') else {
            bail!("image name {} has no tag", self.name);
        };
        let layer = self.layer()?;
        let layer_digest = sha256(&layer);
        let config = serde_json::to_vec(&serde_json::json!({
            "architecture": "amd64",
            "os": "linux",
            "config": {"Entrypoint": self.entrypoint, "Env": self.env, "WorkingDir": "/"},
            "rootfs": {"type": "layers", "diff_ids": [format!("sha256:{layer_digest}")]},
        }))?;
        let config_digest = sha256(&config);
        let manifest = serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                       "digest": format!("sha256:{config_digest}"), "size": config.len()},
            "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar",
                        "digest": format!("sha256:{layer_digest}"), "size": layer.len()}],
        }))?;
        let manifest_digest = sha256(&manifest);
        let index = serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": [{
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": format!("sha256:{manifest_digest}"), "size": manifest.len(),
                "annotations": {"io.containerd.image.name": self.name,
                                "org.opencontainers.image.ref.name": tag},
            }],
        }))?;
        let file = File::create(path).with_context(|| format!("creating {}", path.display()))?;
        let mut out = BufWriter::new(file);
        let mut header = Vec::new();
        let mut put = |name: &str, kind: u8, data: &[u8]| -> Result<()> {
            header.clear();
            tar_entry(
                &mut header,
                name,
                kind,
                if kind == b'5' { 0o755 } else { 0o644 },
                data,
                "",
            )?;
            out.write_all(&header)?;
            Ok(())
        };
        put("oci-layout", b'0', br#"{"imageLayoutVersion":"1.0.0"}"#)?;
        put("index.json", b'0', &index)?;
        put("blobs/", b'5', &[])?;
        put("blobs/sha256/", b'5', &[])?;
        put(&format!("blobs/sha256/{manifest_digest}"), b'0', &manifest)?;
        put(&format!("blobs/sha256/{config_digest}"), b'0', &config)?;
        put(&format!("blobs/sha256/{layer_digest}"), b'0', &layer)?;
        out.write_all(&[0u8; 1024])?;
        out.flush()?;
        Ok(path.to_path_buf())
    }
}

fn sha256(data: &[u8]) -> String {
    format!("{:x}", Sha256::digest(data))
}

/// Appends one ustar entry (header, data, padding) to `out`.
fn tar_entry(
    out: &mut Vec<u8>,
    name: &str,
    kind: u8,
    mode: u32,
    data: &[u8],
    link: &str,
) -> Result<()> {
    let mut h = [0u8; 512];
    let (prefix, name) = split_name(name)?;
    h[..name.len()].copy_from_slice(name.as_bytes());
    octal(&mut h[100..108], u64::from(mode));
    octal(&mut h[108..116], 0);
    octal(&mut h[116..124], 0);
    octal(&mut h[124..136], data.len() as u64);
    octal(&mut h[136..148], 0);
    h[156] = kind;
    if link.len() > 100 {
        bail!("symlink target {link} is longer than 100 bytes");
    }
    h[157..157 + link.len()].copy_from_slice(link.as_bytes());
    h[257..263].copy_from_slice(b"ustar\0");
    h[263..265].copy_from_slice(b"00");
    h[265..269].copy_from_slice(b"root");
    h[297..301].copy_from_slice(b"root");
    h[345..345 + prefix.len()].copy_from_slice(prefix.as_bytes());
    // The checksum is computed with its own field as spaces.
    h[148..156].copy_from_slice(b"        ");
    let sum: u32 = h.iter().map(|b| u32::from(*b)).sum();
    let field = format!("{sum:06o}\0 ");
    h[148..156].copy_from_slice(field.as_bytes());
    out.extend_from_slice(&h);
    out.extend_from_slice(data);
    out.resize(out.len().div_ceil(512) * 512, 0);
    Ok(())
}

/// ustar's name field holds 100 bytes; longer paths split at a `/` into a
/// 155-byte prefix and the rest.
fn split_name(name: &str) -> Result<(&str, &str)> {
    if name.len() <= 100 {
        return Ok(("", name));
    }
    let trimmed = name.trim_end_matches('/');
    for (i, _) in trimmed.match_indices('/') {
        let (prefix, rest) = (&name[..i], &name[i + 1..]);
        if prefix.len() <= 155 && rest.len() <= 100 {
            return Ok((prefix, rest));
        }
    }
    bail!("path {name} is too long for a ustar header")
}

/// A NUL-terminated octal number filling `field`.
fn octal(field: &mut [u8], value: u64) {
    let digits = field.len() - 1;
    let text = format!("{value:0digits$o}");
    field[..digits].copy_from_slice(&text.as_bytes()[text.len() - digits..]);
    field[digits] = 0;
}

/// The pause image: `pause.c` compiled in `work_dir` with `gcc -Os -static -s`.
pub fn pause_image(work_dir: &Path) -> Result<OciImage> {
    let source = work_dir.join("pause.c");
    let binary = work_dir.join("pause");
    std::fs::write(&source, PAUSE_SOURCE)?;
    output(
        "gcc",
        &[
            "-Os",
            "-static",
            "-s",
            "-o",
            &binary.to_string_lossy(),
            &source.to_string_lossy(),
        ],
    )
    .context("compiling the pause program (needs gcc and the static C library: apt-get install gcc libc6-dev)")?;
    let mut image = OciImage::new(PAUSE_IMAGE);
    image
        .file_from("pause", &binary, 0o755)?
        .entrypoint(&["/pause"]);
    Ok(image)
}

/// An image called `name` with the host's static busybox as `/bin/busybox`,
/// a symlink per applet where `busybox --list-full` puts it, `/etc/passwd`,
/// `/etc/group` and `/tmp`; entrypoint `/bin/sh`. Add files to it for an
/// application image.
pub fn busybox_image(name: &str) -> Result<OciImage> {
    let applets = output(BUSYBOX_PATH, &["--list-full"]).with_context(|| {
        format!("listing {BUSYBOX_PATH}'s applets (apt-get install busybox-static)")
    })?;
    let mut image = OciImage::new(name);
    image.file_from("bin/busybox", Path::new(BUSYBOX_PATH), 0o755)?;
    for applet in applets.lines().map(str::trim).filter(|a| !a.is_empty()) {
        if applet != "bin/busybox" {
            image.symlink(applet, "/bin/busybox");
        }
    }
    image
        .file(
            "etc/passwd",
            b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n".to_vec(),
            0o644,
        )
        .file(
            "etc/group",
            b"root:x:0:\nnogroup:x:65534:\n".to_vec(),
            0o644,
        )
        .dir("tmp", 0o1777)
        .dir("root", 0o700)
        .entrypoint(&["/bin/sh"]);
    Ok(image)
}
