//! The figures every reliability test reports ([`Summary`]), and the
//! suite-wide table `reliability-report` prints ([`suite_table`]).

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;
use std::time::Instant;

use anyhow::{Result, bail};

use super::agreement::Agreement;

/// The environment variable naming the file every reliability test appends
/// its figures to, one [`Record`] per line (JSON), for the suite-wide table
/// that `reliability-report` prints after `cargo test`. `scripts/test` sets
/// it; unset, nothing is appended.
pub const REPORT_ENV: &str = "OBC_RELIABILITY_REPORT";

/// The figures every reliability test reports, and the suite adds up.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Counts {
    /// Scenarios run.
    pub scenarios: usize,
    /// Crashes injected (failpoint aborts, SIGKILLs, freezes).
    pub crashes: usize,
    /// Dependency faults survived (S3 outages, apiserver restarts, conflicts).
    pub faults: usize,
    /// Bad inputs tried.
    pub bad_inputs: usize,
    /// Buckets lost.
    pub lost: usize,
    /// Buckets, ObjectBuckets, Secrets or ConfigMaps orphaned.
    pub orphaned: usize,
    /// Tenant attacks tried (the `tenant_attacks` theme; see
    /// `docs/security.md`).
    #[serde(default)]
    pub attacks: usize,
    /// Buckets a tenant's claim reached that were not the claim's: keys
    /// that worked on them, or a claim tagged or bound to them.
    #[serde(default)]
    pub foreign_buckets: usize,
    /// Keys revoked (or asked to be revoked) that were not the claim's.
    #[serde(default)]
    pub foreign_revocations: usize,
    /// Objects lost from a bucket that was not the attacker's.
    #[serde(default)]
    pub data_lost: usize,
    /// Store principals (users) left without a live owner: counted by
    /// listing the store's users after an attack ([`super::principals`]).
    #[serde(default)]
    pub orphaned_principals: usize,
}

impl Counts {
    /// The names of [`Counts::cells`], in a test's own table.
    const NAMES: [&'static str; 11] = [
        "scenarios run",
        "crashes injected",
        "faults survived",
        "bad inputs tried",
        "buckets lost",
        "orphans (bucket/OB/Secret/ConfigMap)",
        "tenant attacks tried",
        "buckets reached that were not the claim's",
        "keys revoked that were not the claim's",
        "objects lost",
        "store users without a live owner",
    ];

    /// The figures as table cells, in the order of [`Counts::NAMES`].
    fn cells(&self) -> [String; 11] {
        [
            self.scenarios,
            self.crashes,
            self.faults,
            self.bad_inputs,
            self.lost,
            self.orphaned,
            self.attacks,
            self.foreign_buckets,
            self.foreign_revocations,
            self.data_lost,
            self.orphaned_principals,
        ]
        .map(|n| n.to_string())
    }

    fn add(&mut self, other: &Counts) {
        self.scenarios += other.scenarios;
        self.crashes += other.crashes;
        self.faults += other.faults;
        self.bad_inputs += other.bad_inputs;
        self.lost += other.lost;
        self.orphaned += other.orphaned;
        self.attacks += other.attacks;
        self.foreign_buckets += other.foreign_buckets;
        self.foreign_revocations += other.foreign_revocations;
        self.data_lost += other.data_lost;
        self.orphaned_principals += other.orphaned_principals;
    }

    /// No bucket lost, nothing orphaned, no attack reached anything that
    /// was not the attacker's.
    pub fn clean(&self) -> bool {
        self.lost == 0
            && self.orphaned == 0
            && self.foreign_buckets == 0
            && self.foreign_revocations == 0
            && self.data_lost == 0
            && self.orphaned_principals == 0
    }
}

/// The figures a reliability test reports at its end.
#[derive(Debug)]
pub struct Summary {
    test: String,
    started: Instant,
    /// Whether the test failed (its scenario, or the credential scan).
    pub failed: bool,
    /// The figures the suite adds up.
    pub counts: Counts,
    /// Other figures, in order.
    pub notes: Vec<(String, String)>,
}

impl Summary {
    /// An empty summary for `test`; the clock starts now.
    pub fn new(test: &str) -> Self {
        Self {
            test: test.to_owned(),
            started: Instant::now(),
            failed: false,
            counts: Counts::default(),
            notes: Vec::new(),
        }
    }

    /// Adds a figure.
    pub fn note(&mut self, what: &str, value: impl std::fmt::Display) {
        self.notes.push((what.to_owned(), value.to_string()));
    }

    /// Counts the problems of an agreement check.
    pub fn record(&mut self, a: &Agreement) {
        self.counts.lost += a.lost.len();
        self.counts.orphaned += a.orphaned.len();
    }

    /// Counts the problems of an agreement check, and fails on any.
    pub fn check(&mut self, when: &str, a: &Agreement) -> Result<()> {
        self.counts.lost += a.lost.len();
        self.counts.orphaned += a.orphaned.len();
        if !a.ok() {
            bail!(
                "{when}: the cluster and the store disagree ({} claims, {} buckets):\n{}",
                a.claims,
                a.buckets,
                a.problems()
            );
        }
        Ok(())
    }

    /// The table.
    pub fn table(&self) -> String {
        let mut rows: Vec<(String, String)> = Counts::NAMES
            .iter()
            .map(|n| (*n).to_owned())
            .zip(self.counts.cells())
            .collect();
        rows.extend(self.notes.iter().cloned());
        rows.push((
            "wall time".into(),
            format!("{:.1}s", self.started.elapsed().as_secs_f64()),
        ));
        let rows: Vec<Vec<String>> = rows.into_iter().map(|(k, v)| vec![k, v]).collect();
        format!(
            "\n== reliability summary: {} ==\n{}",
            self.test,
            markdown_table(&["what", "count"], &rows)
        )
    }

    /// The figures the suite-wide table adds up.
    pub fn to_record(&self) -> Record {
        Record {
            test: self.test.clone(),
            failed: self.failed,
            counts: self.counts.clone(),
            wall_secs: self.started.elapsed().as_secs_f64(),
        }
    }

    /// Prints the table (past the test harness's capture) and appends it to
    /// `summary.txt` under the log root.
    pub fn print(&self, log_root: &Path) {
        let table = self.table();
        let _ = std::io::stderr().lock().write_all(table.as_bytes());
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log_root.join("summary.txt"))
        {
            let _ = f.write_all(table.as_bytes());
        }
        if let Some(path) = std::env::var_os(REPORT_ENV) {
            let appended = serde_json::to_string(&self.to_record())
                .map_err(std::io::Error::other)
                .and_then(|line| {
                    std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(&path)?
                        .write_all(format!("{line}\n").as_bytes())
                });
            if let Err(e) = appended {
                eprintln!("cannot append to {}: {e}", Path::new(&path).display());
            }
        }
    }
}

/// One test's line in the suite-wide table.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Record {
    /// The test's summary title.
    pub test: String,
    /// Whether it failed.
    pub failed: bool,
    /// Its figures.
    #[serde(flatten)]
    pub counts: Counts,
    /// Wall time of the test.
    pub wall_secs: f64,
}

/// The suite-wide table: one row per test (sorted by title), then the
/// totals. Wall times add up to more than the suite's, as tests run side by
/// side.
pub fn suite_table(records: &[Record]) -> String {
    let mut records = records.to_vec();
    records.sort_by(|a, b| a.test.cmp(&b.test));
    let row = |name: String, r: &Record| {
        let mut cells = vec![name, if r.failed { "FAILED" } else { "ok" }.to_owned()];
        cells.extend(r.counts.cells());
        cells.push(format!("{:.1}s", r.wall_secs));
        cells
    };
    let mut total = Record::default();
    let mut rows = Vec::with_capacity(records.len() + 1);
    for r in &records {
        total.failed |= r.failed;
        total.counts.add(&r.counts);
        total.wall_secs += r.wall_secs;
        rows.push(row(r.test.clone(), r));
    }
    rows.push(row(format!("total ({} tests)", records.len()), &total));
    markdown_table(
        &[
            "test",
            "result",
            "scenarios",
            "crashes injected",
            "faults survived",
            "bad inputs",
            "buckets lost",
            "orphans",
            "attacks",
            "foreign buckets reached",
            "foreign keys revoked",
            "objects lost",
            "ownerless store users",
            "wall time",
        ],
        &rows,
    )
}

/// A Markdown table: the first column left-aligned, the others right-aligned,
/// every column as wide as its widest cell (header included).
fn markdown_table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut out = String::from("|");
        for (i, (cell, w)) in cells.zip(&widths).enumerate() {
            let _ = if i == 0 {
                write!(out, " {cell:<w$} |")
            } else {
                write!(out, " {cell:>w$} |")
            };
        }
        out.push('\n');
        out
    };
    let mut out = line(&mut header.iter().copied());
    out.push('|');
    for w in &widths {
        out.push_str(&"-".repeat(w + 2));
        out.push('|');
    }
    out.push('\n');
    for row in rows {
        out.push_str(&line(&mut row.iter().map(String::as_str)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_suite_table_adds_up_every_test_and_aligns_its_columns() {
        let one = |test: &str, scenarios, failed| Record {
            test: test.into(),
            failed,
            counts: Counts {
                scenarios,
                crashes: 2,
                faults: 1,
                bad_inputs: 0,
                lost: 0,
                orphaned: usize::from(failed),
                attacks: 5,
                ..Counts::default()
            },
            wall_secs: 1.25,
        };
        let table = suite_table(&[one("b", 3, false), one("a", 40, true)]);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 5, "{table}");
        assert!(lines[2].starts_with("| a "), "sorted by title:\n{table}");
        assert!(lines[2].contains("FAILED") && lines[3].contains(" ok "));
        assert_eq!(
            lines[4].split('|').map(str::trim).collect::<Vec<_>>(),
            vec![
                "",
                "total (2 tests)",
                "FAILED",
                "43",
                "4",
                "2",
                "0",
                "0",
                "1",
                "10",
                "0",
                "0",
                "0",
                "0",
                "2.5s",
                ""
            ]
        );
        let width = lines[0].chars().count();
        assert!(lines.iter().all(|l| l.chars().count() == width), "{table}");
    }

    #[test]
    fn an_attack_that_reached_anything_foreign_is_not_clean() {
        let mut counts = Counts {
            attacks: 3,
            ..Counts::default()
        };
        assert!(counts.clean());
        counts.foreign_revocations = 1;
        assert!(!counts.clean());
        let ownerless_user = Counts {
            orphaned_principals: 1,
            ..Counts::default()
        };
        assert!(!ownerless_user.clean(), "a store user without an owner");
    }

    #[test]
    fn records_written_before_the_attack_counts_still_read() {
        let line = r#"{"test":"t","failed":false,"scenarios":1,"crashes":0,"faults":0,"bad_inputs":0,"lost":0,"orphaned":0,"wall_secs":1.0}"#;
        let record: Record = serde_json::from_str(line).expect("an older record parses");
        assert_eq!(record.counts.attacks, 0);
    }

    #[test]
    fn a_summary_table_is_as_wide_as_its_header() {
        let table = Summary::new("t").table();
        let lines: Vec<&str> = table.lines().filter(|l| l.starts_with('|')).collect();
        let width = lines[0].chars().count();
        assert!(lines.iter().all(|l| l.chars().count() == width), "{table}");
    }
}
