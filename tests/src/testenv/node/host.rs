//! Small helpers for changing the host: commands that must succeed (with
//! their stderr in the error), file writes that create their directory,
//! and process signals.

use std::fs;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

/// Runs `program args`; fails with its stderr unless it exits 0.
pub(super) fn run(program: &str, args: &[&str]) -> Result<()> {
    output(program, args).map(drop)
}

/// Runs `program args` and returns its stdout; fails with its stderr unless
/// it exits 0.
pub(super) fn output(program: &str, args: &[&str]) -> Result<String> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {program} (is it installed?)"))?;
    if !out.status.success() {
        bail!(
            "`{program} {}` failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs `program args` with `input` on stdin; fails unless it exits 0.
pub(super) fn run_stdin(program: &str, args: &[&str], input: &str) -> Result<()> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("running {program} (is it installed?)"))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(input.as_bytes())?;
    }
    let out = child.wait_with_output()?;
    if !out.status.success() {
        bail!(
            "`{program} {}` failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Writes `contents` to `path`, creating its directory.
pub(super) fn write_file(path: &Path, contents: &str) -> Result<()> {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    }
    fs::write(path, contents).with_context(|| format!("writing {}", path.display()))
}

/// Sends `signal` (e.g. `TERM`, `KILL`) to `pid`; a process already gone is
/// no error.
pub(super) fn signal(pid: u32, signal: &str) {
    let _ = Command::new("kill")
        .args([format!("-{signal}"), pid.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// Whether `pid` is a live process (a zombie counts as gone).
pub(super) fn alive(pid: u32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name in parentheses.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// Every process as (pid, executable path, command line joined by spaces).
pub(super) fn processes() -> Vec<(u32, String, String)> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let exe = fs::read_link(format!("/proc/{pid}/exe")).ok()?;
            let cmdline = fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            Some((pid, exe.to_string_lossy().into_owned(), cmdline))
        })
        .collect()
}

/// SIGTERMs `pids`, waits up to `grace` for them to go, SIGKILLs the rest
/// and waits for those too (a few seconds at most). A zero `grace` kills
/// at once.
pub(super) fn terminate(pids: &[u32], grace: std::time::Duration) {
    use std::time::{Duration, Instant};
    if !grace.is_zero() {
        for &pid in pids {
            signal(pid, "TERM");
        }
    }
    let deadline = Instant::now() + grace;
    while pids.iter().any(|&p| alive(p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    for &pid in pids.iter().filter(|&&p| alive(p)) {
        if !grace.is_zero() {
            let exe = fs::read_link(format!("/proc/{pid}/exe")).unwrap_or_default();
            tracing::warn!(pid, exe = %exe.display(), "still running {grace:?} after SIGTERM: SIGKILL");
        }
        signal(pid, "KILL");
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while pids.iter().any(|&p| alive(p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
}
