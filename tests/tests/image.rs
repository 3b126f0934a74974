//! The container image `scripts/build-image` assembles without a container
//! engine (`target/image/sample-provisioner.oci.tar`, or the archive
//! `OBC_IMAGE_ARCHIVE` names; a missing archive fails the test): a valid OCI
//! layout whose blobs match their digests, a config that names the
//! entrypoint and a non-root user (the same as `Containerfile`'s), and a
//! root filesystem in which the entrypoint runs `--help` as that user, with
//! the image's own libraries only.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail, ensure};
use obc_tests::setup::repo_file;
use obc_tests::testenv::CRANE_BINARY;
use serde_json::Value;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn archive() -> PathBuf {
    match std::env::var_os("OBC_IMAGE_ARCHIVE") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => std::env::var_os("CARGO_TARGET_DIR")
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| repo().join("target"))
            .join("image/sample-provisioner.oci.tar"),
    }
}

fn run(cmd: &mut Command) -> Result<String> {
    let out = cmd
        .output()
        .with_context(|| format!("running {:?}", cmd.get_program()))?;
    ensure!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The blob `digest` (`sha256:<hex>`) of the layout at `dir`, after
/// checking that its content has that digest.
fn blob(dir: &Path, digest: &str) -> Result<PathBuf> {
    let hex = digest
        .strip_prefix("sha256:")
        .with_context(|| format!("digest {digest} is not sha256"))?;
    let path = dir.join("blobs/sha256").join(hex);
    let sum = run(Command::new("sha256sum").arg(&path))?;
    ensure!(
        sum.split_whitespace().next() == Some(hex),
        "blob {digest} does not match its digest: {sum}"
    );
    Ok(path)
}

fn json(path: &Path) -> Result<Value> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

/// The ELF interpreter (`PT_INTERP`) of a 64-bit little-endian executable,
/// if it is dynamically linked.
fn elf_interpreter(bytes: &[u8]) -> Result<Option<String>> {
    ensure!(
        bytes.len() > 64 && &bytes[..4] == b"\x7fELF" && bytes[4] == 2 && bytes[5] == 1,
        "not a 64-bit little-endian ELF file"
    );
    let u16_at = |o: usize| u16::from_le_bytes([bytes[o], bytes[o + 1]]) as usize;
    let u64_at = |o: usize| -> Result<usize> {
        let b: [u8; 8] = bytes
            .get(o..o + 8)
            .context("truncated ELF")?
            .try_into()
            .context("8 bytes")?;
        usize::try_from(u64::from_le_bytes(b)).context("offset")
    };
    let (phoff, phentsize, phnum) = (u64_at(0x20)?, u16_at(0x36), u16_at(0x38));
    for i in 0..phnum {
        let ph = phoff + i * phentsize;
        let p_type = u32::from_le_bytes(
            bytes
                .get(ph..ph + 4)
                .context("truncated ELF")?
                .try_into()
                .context("4 bytes")?,
        );
        if p_type == 3 {
            let (offset, size) = (u64_at(ph + 8)?, u64_at(ph + 32)?);
            let raw = bytes.get(offset..offset + size).context("truncated ELF")?;
            let path = String::from_utf8_lossy(raw)
                .trim_end_matches('\0')
                .to_owned();
            return Ok(Some(path));
        }
    }
    Ok(None)
}

/// `ENTRYPOINT` (exec form) and `USER` of the final stage of `Containerfile`.
fn containerfile_entrypoint_and_user() -> Result<(Vec<String>, String)> {
    let text = repo_file("Containerfile")?;
    let last_stage = text.rsplit("\nFROM ").next().context("a FROM")?;
    let mut entrypoint = None;
    let mut user = None;
    for line in last_stage.lines() {
        if let Some(rest) = line.strip_prefix("ENTRYPOINT ") {
            entrypoint = Some(serde_json::from_str::<Vec<String>>(rest).context("ENTRYPOINT")?);
        }
        if let Some(rest) = line.strip_prefix("USER ") {
            user = Some(rest.trim().to_owned());
        }
    }
    Ok((
        entrypoint.context("Containerfile has no ENTRYPOINT")?,
        user.context("Containerfile has no USER")?,
    ))
}

#[test]
fn the_install_script_builds_the_crane_the_image_script_uses() {
    let script = repo_file("scripts/install-testenv").expect("script");
    assert!(
        script.contains("CRANE_VERSION=\"${CRANE_VERSION:-v0.22.1}\""),
        "scripts/install-testenv's crane version is not {}",
        CRANE_BINARY.cache_path
    );
    assert_eq!(CRANE_BINARY.cache_path, "crane-v0.22.1/crane");
}

#[test]
fn the_image_archive_runs_the_provisioner_as_a_non_root_user() {
    check_image(&archive()).unwrap_or_else(|e| panic!("{e:#}"));
}

fn check_image(archive: &Path) -> Result<()> {
    ensure!(
        archive.is_file(),
        "{} is missing: run `scripts/build-image` (scripts/test does), or set OBC_IMAGE_ARCHIVE",
        archive.display()
    );
    let dir = tempfile::tempdir()?;
    let layout = dir.path().join("layout");
    std::fs::create_dir(&layout)?;
    run(Command::new("tar")
        .arg("-xf")
        .arg(archive)
        .arg("-C")
        .arg(&layout))?;

    // The layout: one image, named, whose blobs are what their digests say.
    let oci_layout = json(&layout.join("oci-layout"))?;
    ensure!(oci_layout["imageLayoutVersion"] == "1.0.0", "{oci_layout}");
    let index = json(&layout.join("index.json"))?;
    let manifests = index["manifests"].as_array().context("index manifests")?;
    ensure!(manifests.len() == 1, "one image in the archive: {index}");
    let entry = &manifests[0];
    ensure!(
        entry["mediaType"] == "application/vnd.oci.image.manifest.v1+json",
        "{entry}"
    );
    let version = env!("CARGO_PKG_VERSION");
    ensure!(
        entry["annotations"]["org.opencontainers.image.ref.name"] == version,
        "the archive names the image's tag: {entry}"
    );
    let manifest = json(&blob(&layout, entry["digest"].as_str().context("digest")?)?)?;
    let config = json(&blob(
        &layout,
        manifest["config"]["digest"]
            .as_str()
            .context("config digest")?,
    )?)?;

    // The config: platform, entrypoint, a non-root user.
    ensure!(
        config["os"] == "linux" && config["architecture"] == "amd64",
        "{config}"
    );
    let c = &config["config"];
    let entrypoint: Vec<String> =
        serde_json::from_value(c["Entrypoint"].clone()).context("Entrypoint")?;
    ensure!(
        entrypoint == ["/usr/local/bin/sample-provisioner"],
        "Entrypoint {entrypoint:?}"
    );
    let user = c["User"].as_str().context("config.User")?;
    let uid: u32 = user
        .split(':')
        .next()
        .unwrap_or_default()
        .parse()
        .with_context(|| format!("User {user:?} is not a numeric uid[:gid]"))?;
    ensure!(uid != 0, "the image runs as root ({user})");
    ensure!(
        c["Labels"]["org.opencontainers.image.licenses"] == "Apache-2.0",
        "{c}"
    );
    let (cf_entrypoint, cf_user) = containerfile_entrypoint_and_user()?;
    ensure!(
        cf_entrypoint == entrypoint && cf_user == user,
        "Containerfile says ENTRYPOINT {cf_entrypoint:?} USER {cf_user}, the archive {entrypoint:?} {user}"
    );

    // The root filesystem: its layers, unpacked.
    let rootfs = dir.path().join("rootfs");
    std::fs::create_dir(&rootfs)?;
    let layers = manifest["layers"].as_array().context("layers")?;
    ensure!(!layers.is_empty(), "no layer");
    let mut listing = String::new();
    for layer in layers {
        ensure!(
            layer["mediaType"] == "application/vnd.oci.image.layer.v1.tar+gzip",
            "{layer}"
        );
        let path = blob(&layout, layer["digest"].as_str().context("layer digest")?)?;
        listing.push_str(&run(Command::new("tar").arg("-tvzf").arg(&path))?);
        run(Command::new("tar")
            .arg("-xzf")
            .arg(&path)
            .arg("-C")
            .arg(&rootfs)
            .arg("--no-same-owner"))?;
    }
    // The binary belongs to root and is not writable by its user.
    let bin_rel = entrypoint[0].trim_start_matches('/');
    let line = listing
        .lines()
        .find(|l| l.ends_with(bin_rel))
        .with_context(|| format!("{bin_rel} is not in the layers:\n{listing}"))?;
    ensure!(
        line.starts_with("-rwxr-xr-x 0/0 "),
        "the entrypoint's mode and owner: {line}"
    );
    let passwd = std::fs::read_to_string(rootfs.join("etc/passwd"))?;
    ensure!(
        passwd
            .lines()
            .any(|l| l.split(':').nth(2) == Some(&uid.to_string())),
        "uid {uid} is not in /etc/passwd:\n{passwd}"
    );
    ensure!(
        rootfs.join("etc/ssl/certs/ca-certificates.crt").is_file(),
        "no CA certificates (the S3 client reads the system's roots)"
    );

    // It runs from the image's files alone.
    let binary = rootfs.join(bin_rel);
    let interpreter = elf_interpreter(&std::fs::read(&binary)?)?;
    if let Some(interp) = &interpreter {
        let loader = rootfs.join(interp.trim_start_matches('/'));
        ensure!(loader.is_file(), "the image lacks the interpreter {interp}");
        // Every library the loader resolves is one of the image's.
        let dirs = [
            "lib/x86_64-linux-gnu",
            "usr/lib/x86_64-linux-gnu",
            "lib",
            "usr/lib",
        ]
        .map(|d| rootfs.join(d).display().to_string())
        .join(":");
        let libs = run(Command::new(&loader)
            .arg("--list")
            .arg("--library-path")
            .arg(&dirs)
            .arg(&binary))?;
        for l in libs.lines() {
            if let Some(path) = l.split(" => ").nth(1).and_then(|r| r.split(' ').next()) {
                ensure!(
                    Path::new(path).starts_with(&rootfs),
                    "a library comes from outside the image: {l}"
                );
            }
        }
    }
    let is_root = run(Command::new("id").arg("-u"))?.trim() == "0";
    let help = |args: &[&str]| -> Result<String> {
        if is_root {
            // As a container runtime would: the image's root, its user.
            let chroot = ["/usr/sbin/chroot", "/sbin/chroot", "/usr/bin/chroot"]
                .into_iter()
                .find(|p| Path::new(p).is_file())
                .context("chroot (coreutils) is not installed")?;
            run(Command::new(chroot)
                .arg(format!("--userspec={user}"))
                .arg(&rootfs)
                .arg(&entrypoint[0])
                .args(args)
                .env_clear()
                .env("PATH", "/usr/local/bin:/usr/bin:/bin"))
        } else {
            match &interpreter {
                Some(interp) => run(Command::new(rootfs.join(interp.trim_start_matches('/')))
                    .arg("--library-path")
                    .arg(rootfs.join("lib/x86_64-linux-gnu"))
                    .arg(&binary)
                    .args(args)),
                None => run(Command::new(&binary).args(args)),
            }
        }
    };
    let out = help(&["--help"])?;
    ensure!(
        out.contains("Object bucket provisioner") && out.contains("--provisioner-name"),
        "--help:\n{out}"
    );
    let out = help(&["--version"])?;
    if out.trim() != format!("sample-provisioner {version}") {
        bail!(
            "--version says {out:?}, the workspace is {version}: rebuild with scripts/build-image"
        );
    }
    Ok(())
}

#[test]
fn the_elf_reader_finds_the_interpreter_of_a_dynamic_binary() {
    let bytes = std::fs::read("/bin/sh").expect("/bin/sh");
    let interp = elf_interpreter(&bytes).expect("ELF").expect("dynamic");
    assert!(interp.contains("ld-linux"), "{interp}");
    assert!(elf_interpreter(b"#!/bin/sh\n").is_err());
}
