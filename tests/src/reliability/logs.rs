//! Credentials in logs: the log root every provisioner process writes
//! into, the credentials the suite registers, and the scan of every captured
//! log for them (verbatim and base64-encoded).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use anyhow::{Context as _, Result, bail};
use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::{Api, ListParams};

use crate::testenv::TestEnv;

static LOG_ROOT: OnceLock<PathBuf> = OnceLock::new();
static SECRETS: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

/// The directory every provisioner process of this test process logs into:
/// `<base>/reliability-logs/run-<pid>`. Kept after the run for reading;
/// of earlier runs, only the two newest are kept.
pub fn log_root(base: &Path) -> &'static Path {
    LOG_ROOT.get_or_init(|| {
        let parent = base.join("reliability-logs");
        // Keep the two newest earlier runs (and any still running).
        if let Ok(entries) = std::fs::read_dir(&parent) {
            let mut dead: Vec<(std::time::SystemTime, PathBuf)> = entries
                .flatten()
                .filter(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    !name
                        .strip_prefix("run-")
                        .is_some_and(|pid| Path::new(&format!("/proc/{pid}")).exists())
                })
                .map(|e| {
                    let modified = e
                        .metadata()
                        .and_then(|m| m.modified())
                        .unwrap_or(std::time::UNIX_EPOCH);
                    (modified, e.path())
                })
                .collect();
            dead.sort();
            for (_, path) in dead.iter().rev().skip(2) {
                let _ = std::fs::remove_dir_all(path);
            }
        }
        let dir = parent.join(format!("run-{}", std::process::id()));
        if let Err(e) = std::fs::create_dir_all(&dir) {
            eprintln!("cannot create {}: {e}", dir.display());
        }
        dir
    })
}

/// Remembers a credential the suite minted or handed out, for
/// [`scan_logs`]. Values shorter than 8 characters are ignored (they would
/// match by chance).
pub fn register_secret(value: &str) {
    let value = value.trim();
    if value.len() >= 8 {
        SECRETS
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(value.to_owned());
    }
}

/// How many distinct credentials are registered.
pub fn registered_secrets() -> usize {
    SECRETS.lock().unwrap_or_else(|p| p.into_inner()).len()
}

/// Registers the S3 root key pair's secret half and the admin token of `env`.
pub fn register_env_secrets(env: &TestEnv) {
    register_secret(&env.s3_root_credentials().1);
    register_secret(env.admin_token());
}

/// Registers every `AWS_SECRET_ACCESS_KEY` of the Secrets in `namespaces`;
/// returns how many Secrets held one.
pub async fn register_claim_secrets(client: &Client, namespaces: &[&str]) -> Result<usize> {
    let mut n = 0;
    for ns in namespaces {
        let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
        for s in secrets.list(&ListParams::default()).await?.items {
            if let Some(v) = s.data.as_ref().and_then(|d| d.get("AWS_SECRET_ACCESS_KEY")) {
                register_secret(&String::from_utf8_lossy(&v.0));
                n += 1;
            }
        }
    }
    Ok(n)
}

fn base64(data: &[u8]) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// A credential found in a log.
#[derive(Debug)]
pub struct Leak {
    /// The log file.
    pub file: PathBuf,
    /// 1-based line number.
    pub line: usize,
    /// The credential's first 4 characters and its length (never the value).
    pub what: String,
}

/// Scans every file under the log root for every registered credential,
/// verbatim and base64-encoded (as a Secret's `data` would carry it).
/// Returns the files scanned and the hits.
pub fn scan_logs(root: &Path) -> Result<(usize, Vec<Leak>)> {
    let secrets: Vec<String> = SECRETS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .cloned()
        .collect();
    let needles: Vec<(String, String)> = secrets
        .iter()
        .flat_map(|s| {
            let head: String = s.chars().take(4).collect();
            let what = format!("{head}… ({} chars)", s.chars().count());
            let b64 = base64(s.as_bytes());
            // The encoding of a value without its padding, which is what
            // appears when the value sits inside a longer encoded string
            // only if aligned; the aligned prefix is enough to find it.
            let b64 = b64.trim_end_matches('=').to_owned();
            [(s.clone(), what.clone()), (b64, format!("{what}, base64"))]
        })
        .collect();
    let mut files = 0;
    let mut leaks = Vec::new();
    for entry in std::fs::read_dir(root).with_context(|| format!("reading {}", root.display()))? {
        let path = entry?.path();
        if path.extension().is_none_or(|e| e != "log") {
            continue;
        }
        files += 1;
        let text = String::from_utf8_lossy(&std::fs::read(&path)?).into_owned();
        for (i, line) in text.lines().enumerate() {
            for (needle, what) in &needles {
                if line.contains(needle.as_str()) {
                    leaks.push(Leak {
                        file: path.clone(),
                        line: i + 1,
                        what: what.clone(),
                    });
                }
            }
        }
    }
    Ok((files, leaks))
}

/// Fails if any registered credential appears in any captured log.
pub fn assert_no_leaks(root: &Path) -> Result<usize> {
    let (files, leaks) = scan_logs(root)?;
    if !leaks.is_empty() {
        bail!("credentials found in provisioner logs: {leaks:#?}");
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_the_standard_encoding() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }

    #[test]
    fn the_scan_finds_credentials_verbatim_and_base64_encoded() {
        let dir = tempfile::tempdir().expect("tempdir");
        register_secret("s3cr3t-value-for-the-scan-test");
        std::fs::write(dir.path().join("clean.log"), "nothing to see\n").expect("write");
        let (files, leaks) = scan_logs(dir.path()).expect("scan");
        assert_eq!((files, leaks.len()), (1, 0));
        std::fs::write(
            dir.path().join("leaky.log"),
            format!(
                "a\nkey=s3cr3t-value-for-the-scan-test\ndata={}\n",
                base64(b"s3cr3t-value-for-the-scan-test")
            ),
        )
        .expect("write");
        std::fs::write(
            dir.path().join("other.txt"),
            "s3cr3t-value-for-the-scan-test",
        )
        .expect("write");
        let (files, leaks) = scan_logs(dir.path()).expect("scan");
        assert_eq!(files, 2, "only .log files are scanned");
        assert_eq!(
            leaks.iter().map(|l| l.line).collect::<Vec<_>>(),
            vec![2, 3],
            "{leaks:?}"
        );
        assert!(
            leaks.iter().all(|l| !l.what.contains("value-for")),
            "{leaks:?}"
        );
    }
}
