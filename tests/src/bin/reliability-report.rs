//! Prints the reliability suite's suite-wide table from the figures each test
//! appended to the file [`REPORT_ENV`] names (`scripts/test` sets it and runs
//! this after `cargo test`):
//!
//! ```text
//! cargo run -p obc-tests --bin reliability-report -- target/reliability-report.jsonl
//! ```
//!
//! Exits 1 if a test failed or a bucket was lost or orphaned, 2 if the file
//! cannot be read.

use std::process::ExitCode;

use obc_tests::reliability::{REPORT_ENV, Record, suite_table};

fn main() -> ExitCode {
    let Some(path) = std::env::args_os()
        .nth(1)
        .or_else(|| std::env::var_os(REPORT_ENV))
    else {
        eprintln!("usage: reliability-report FILE (or set {REPORT_ENV})");
        return ExitCode::from(2);
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) => {
            eprintln!("cannot read {}: {e}", path.to_string_lossy());
            return ExitCode::from(2);
        }
    };
    let mut records = Vec::new();
    for (n, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        match serde_json::from_str::<Record>(line) {
            Ok(r) => records.push(r),
            Err(e) => {
                eprintln!(
                    "{}:{}: not a test record: {e}",
                    path.to_string_lossy(),
                    n + 1
                );
                return ExitCode::from(2);
            }
        }
    }
    println!("\n== reliability suite: all tests ==");
    print!("{}", suite_table(&records));
    let bad = records.iter().any(|r| r.failed || !r.counts.clean());
    if bad {
        println!("FAILED: a test failed, or a bucket was lost or orphaned (see its table above)");
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
