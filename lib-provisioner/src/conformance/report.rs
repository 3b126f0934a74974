//! [`Report`]: what the kit found, per scenario, for a human
//! ([`Display`](std::fmt::Display)) and for tools ([`Report::to_json`]).

use std::fmt;
use std::time::Duration;

use serde::Serialize;

use super::{Rule, Scenario};

/// How a scenario ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// The provisioner met the rule.
    Passed,
    /// It did not, or the kit could not tell (a probe failed): see `detail`.
    Failed,
    /// The scenario does not apply (an optional method the provisioner
    /// does not implement, shared credentials): `detail` says why.
    NotApplicable,
}

/// One scenario's result.
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct ScenarioReport {
    /// The scenario's stable name.
    pub name: &'static str,
    /// The scenario.
    #[serde(skip)]
    pub scenario: Scenario,
    /// How it ended.
    pub outcome: Outcome,
    /// Why it failed or does not apply, or a summary of what passed.
    pub detail: String,
    /// What the kit did and what the provisioner and the store answered,
    /// in order (no secret: access key ids only).
    pub happened: Vec<String>,
    /// The check that failed (what was expected, in one sentence), when
    /// the scenario failed on one: more precise than [`rule`](Self::rule).
    pub check: Option<String>,
    /// The probe whose answers the verdict rests on ([`StoreProbe::name`](super::StoreProbe::name)).
    pub probe: String,
    /// What this scenario could not verify, and why (the probe cannot
    /// list principals, say).
    pub not_verified: Vec<String>,
    /// The rule checked.
    pub rule: Rule,
    /// The rule, in one sentence.
    pub rule_text: &'static str,
    /// The guide's section on the rule.
    pub guide: String,
    /// How long the scenario took, in milliseconds.
    pub elapsed_ms: u128,
}

impl ScenarioReport {
    pub(crate) fn new(
        scenario: Scenario,
        outcome: Outcome,
        detail: String,
        happened: Vec<String>,
        elapsed: Duration,
    ) -> Self {
        let rule = scenario.rule();
        Self {
            name: scenario.name(),
            scenario,
            outcome,
            detail,
            happened,
            check: None,
            probe: String::new(),
            not_verified: Vec::new(),
            rule,
            rule_text: rule.text(),
            guide: rule.link(),
            elapsed_ms: elapsed.as_millis(),
        }
    }
}

/// The kit's findings.
///
/// ```
/// # async fn example(report: lib_provisioner::conformance::Report) {
/// use lib_provisioner::conformance::{Outcome, Scenario};
/// assert!(report.passed(), "{report}");
/// let repeat = report.scenario(Scenario::ProvisionRepeat).expect("ran");
/// assert_eq!(repeat.outcome, Outcome::Passed);
/// println!("{}", report.to_json());
/// # }
/// ```
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct Report {
    /// The run's id: every bucket and claim of the run carries it.
    pub run: String,
    /// The probe whose answers the verdicts rest on.
    pub probe: String,
    /// The scenarios, in the order they ran.
    pub scenarios: Vec<ScenarioReport>,
    /// What the run did not exercise or verify, and why, each once with
    /// the number of scenarios it concerns: scenarios that do not apply,
    /// and checks the probe cannot make.
    pub not_exercised: Vec<NotExercised>,
    /// How long the run took, in milliseconds.
    pub elapsed_ms: u128,
}

/// Something the run did not exercise or verify.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct NotExercised {
    /// What, and why.
    pub what: String,
    /// The scenarios it concerns, by name (none: the whole run).
    pub scenarios: Vec<&'static str>,
}

impl Report {
    pub(crate) fn new(
        run: String,
        probe: String,
        scenarios: Vec<ScenarioReport>,
        elapsed: Duration,
    ) -> Self {
        let mut not_exercised: Vec<NotExercised> = Vec::new();
        let mut add = |what: String, name: &'static str| match not_exercised
            .iter_mut()
            .find(|n| n.what == what)
        {
            Some(n) => n.scenarios.push(name),
            None => not_exercised.push(NotExercised {
                what,
                scenarios: vec![name],
            }),
        };
        for s in &scenarios {
            if s.outcome == Outcome::NotApplicable {
                add(format!("{}: {}", s.name, s.detail), s.name);
            }
            for what in &s.not_verified {
                add(what.clone(), s.name);
            }
        }
        not_exercised.push(NotExercised {
            what: "COSI methods (create_bucket, existing_bucket, grant_access per access mode and for several buckets, revoke_access): no scenario of the kit calls them yet; the COSI end-to-end tests do".to_owned(),
            scenarios: Vec::new(),
        });
        Self {
            run,
            probe,
            scenarios,
            not_exercised,
            elapsed_ms: elapsed.as_millis(),
        }
    }

    /// Whether no scenario failed.
    pub fn passed(&self) -> bool {
        self.scenarios.iter().all(|s| s.outcome != Outcome::Failed)
    }

    /// The scenarios that failed.
    pub fn failures(&self) -> impl Iterator<Item = &ScenarioReport> {
        self.scenarios
            .iter()
            .filter(|s| s.outcome == Outcome::Failed)
    }

    /// The result of `scenario`, if it ran.
    pub fn scenario(&self, scenario: Scenario) -> Option<&ScenarioReport> {
        self.scenarios.iter().find(|s| s.scenario == scenario)
    }

    /// The report as JSON.
    pub fn to_json(&self) -> serde_json::Value {
        // Plain data (strings, numbers, enums): serializing cannot fail.
        serde_json::to_value(self).unwrap_or_default()
    }

    fn count(&self, outcome: Outcome) -> usize {
        self.scenarios
            .iter()
            .filter(|s| s.outcome == outcome)
            .count()
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "provisioner conformance (run {}): {} scenarios, {} passed, {} failed, {} not applicable, {:.1} s",
            self.run,
            self.scenarios.len(),
            self.count(Outcome::Passed),
            self.count(Outcome::Failed),
            self.count(Outcome::NotApplicable),
            self.elapsed_ms as f64 / 1000.0
        )?;
        writeln!(
            f,
            "probe: {} (every verdict below rests on its answers)",
            self.probe
        )?;
        if !self.not_exercised.is_empty() {
            writeln!(f, "not exercised or not verified:")?;
            for n in &self.not_exercised {
                match n.scenarios.len() {
                    0 | 1 => writeln!(f, "  - {}", n.what)?,
                    k => writeln!(f, "  - {} ({k} scenarios)", n.what)?,
                }
            }
        }
        for s in &self.scenarios {
            write!(f, "{s}")?;
        }
        Ok(())
    }
}

impl fmt::Display for ScenarioReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mark = match self.outcome {
            Outcome::Passed => "pass",
            Outcome::Failed => "FAIL",
            Outcome::NotApplicable => "n/a ",
        };
        writeln!(
            f,
            "{mark} {:<31} {:>7.1} s  {}",
            self.name,
            self.elapsed_ms as f64 / 1000.0,
            self.detail
        )?;
        if self.outcome == Outcome::Failed {
            match &self.check {
                Some(check) => {
                    writeln!(f, "     contract: {check}")?;
                    writeln!(f, "     rule: {}", self.rule_text)?;
                }
                None => writeln!(f, "     contract: {}", self.rule_text)?,
            }
            writeln!(f, "     probe: {}", self.probe)?;
            writeln!(f, "     see: {}", self.guide)?;
            writeln!(f, "     what happened:")?;
            for line in &self.happened {
                writeln!(f, "       {line}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report() -> Report {
        let mut failed = ScenarioReport::new(
            Scenario::ProvisionRepeat,
            Outcome::Failed,
            "provision again failed with a permanent error: exists".to_owned(),
            vec!["provision b → Ok: access key AKID at h:1".to_owned()],
            Duration::from_millis(1500),
        );
        failed.check = Some("provision again succeeds".to_owned());
        failed.not_verified = vec!["principals: the probe cannot list them".to_owned()];
        let skipped = ScenarioReport::new(
            Scenario::ScopeReadOnly,
            Outcome::NotApplicable,
            "shared credentials".to_owned(),
            vec!["hidden when not failed".to_owned()],
            Duration::ZERO,
        );
        Report::new(
            "abc123".to_owned(),
            "TestProbe".to_owned(),
            vec![failed, skipped],
            Duration::from_millis(1500),
        )
    }

    #[test]
    fn a_failure_shows_what_happened_the_rule_and_its_section() {
        let r = report();
        assert!(!r.passed());
        assert_eq!(r.failures().count(), 1);
        let shown = r.to_string();
        assert!(
            shown.contains("2 scenarios, 0 passed, 1 failed, 1 not applicable"),
            "{shown}"
        );
        assert!(shown.contains("FAIL provision.repeat"), "{shown}");
        assert!(shown.contains(Rule::Repeat.text()), "{shown}");
        assert!(
            shown.contains("provisioner-guide.md#calls-repeat"),
            "{shown}"
        );
        assert!(shown.contains("provision b → Ok"), "{shown}");
        assert!(shown.contains("n/a  scope.read-only"), "{shown}");
        assert!(!shown.contains("hidden when not failed"), "{shown}");
        assert!(
            shown.contains("contract: provision again succeeds"),
            "{shown}"
        );
        assert!(shown.contains("probe: TestProbe"), "{shown}");
        assert!(
            shown.contains("  - principals: the probe cannot list them\n"),
            "{shown}"
        );
        assert!(
            shown.contains("  - scope.read-only: shared credentials"),
            "{shown}"
        );
    }

    #[test]
    fn the_json_form_names_each_scenario_and_its_rule() {
        let json = report().to_json();
        let first = &json["scenarios"][0];
        assert_eq!(first["name"], "provision.repeat");
        assert_eq!(first["outcome"], "failed");
        assert_eq!(first["rule"], "repeat");
        assert_eq!(first["elapsed_ms"], 1500);
        assert_eq!(json["scenarios"][1]["outcome"], "not-applicable");
        assert_eq!(first["check"], "provision again succeeds");
        assert_eq!(json["probe"], "TestProbe");
        assert_eq!(json["not_exercised"][0]["scenarios"][0], "provision.repeat");
    }
}
