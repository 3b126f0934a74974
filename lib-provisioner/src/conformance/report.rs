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
    /// The scenarios, in the order they ran.
    pub scenarios: Vec<ScenarioReport>,
    /// How long the run took, in milliseconds.
    pub elapsed_ms: u128,
}

impl Report {
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
            writeln!(f, "     contract: {}", self.rule_text)?;
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
        let failed = ScenarioReport::new(
            Scenario::ProvisionRepeat,
            Outcome::Failed,
            "provision again failed with a permanent error: exists".to_owned(),
            vec!["provision b → Ok: access key AKID at h:1".to_owned()],
            Duration::from_millis(1500),
        );
        let skipped = ScenarioReport::new(
            Scenario::ScopeReadOnly,
            Outcome::NotApplicable,
            "shared credentials".to_owned(),
            vec!["hidden when not failed".to_owned()],
            Duration::ZERO,
        );
        Report {
            run: "abc123".to_owned(),
            scenarios: vec![failed, skipped],
            elapsed_ms: 1500,
        }
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
    }
}
