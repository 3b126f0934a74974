//! `local-env` (`tests/src/bin/local-env.rs`) starts the store it serves
//! and needs only that store's binary; a missing binary is named, with the
//! `scripts/install-testenv` command that builds it, before anything starts.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const LOCAL_ENV: &str = env!("CARGO_BIN_EXE_local-env");

/// A `local-env` process: interrupted (Ctrl-C, so that it stops what it
/// started) when dropped, killed if it does not exit.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-INT", &self.0.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A path where no binary is.
fn nowhere(name: &str) -> String {
    format!("/nonexistent/obc-testenv/{name}")
}

#[test]
fn with_rustfs_it_runs_without_s3s_fs() {
    let mut child = Command::new(LOCAL_ENV)
        .env("OBC_S3_SERVER", nowhere("s3s-fs"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("local-env starts");
    let stdout = child.stdout.take().expect("stdout");
    let running = Running(child);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(180);
    let mut seen = Vec::new();
    let up = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) if line.starts_with("Test environment is up") => break true,
            Ok(line) => seen.push(line),
            Err(_) => break false,
        }
    };
    assert!(
        up,
        "local-env did not come up without s3s-fs (OBC_S3_SERVER={}):\n{}",
        nowhere("s3s-fs"),
        seen.join("\n")
    );
    drop(running);
}

#[test]
fn a_missing_store_is_named_with_the_command_that_builds_it() {
    let started = Instant::now();
    let out = Command::new(LOCAL_ENV)
        .env("OBC_RUSTFS_SERVER", nowhere("rustfs"))
        .stdin(Stdio::null())
        .output()
        .expect("local-env runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        !out.status.success(),
        "local-env started without RustFS:\n{stdout}"
    );
    assert!(
        stderr.contains("rustfs") && stderr.contains("scripts/install-testenv rustfs"),
        "the message names neither the missing rustfs nor `scripts/install-testenv rustfs`:\n{stderr}"
    );
    assert!(
        !stdout.contains("Test environment is up"),
        "it started the environment before failing:\n{stdout}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "it took {:.1?} to fail: it started something first",
        started.elapsed()
    );
}
