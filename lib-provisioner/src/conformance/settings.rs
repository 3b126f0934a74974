//! Bucket settings (versioning, lifecycle rules, a bucket policy, object
//! lock): what a probe reads back from the store ([`StoreSettings`]), what
//! the store must then hold ([`ExpectedSettings`]), and the cases an author
//! gives the kit ([`SettingsCases`]).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// One of the settings the kit reads back.
///
/// ```
/// use lib_provisioner::conformance::BucketSetting;
/// assert_eq!(BucketSetting::LifecycleRules.to_string(), "lifecycle rules");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum BucketSetting {
    /// The bucket's versioning state.
    Versioning,
    /// Its lifecycle rules.
    LifecycleRules,
    /// Its bucket policy.
    Policy,
    /// Its object lock default retention.
    ObjectLock,
}

impl BucketSetting {
    /// Every setting, in the order the kit reports them.
    pub const ALL: [Self; 4] = [
        Self::Versioning,
        Self::LifecycleRules,
        Self::Policy,
        Self::ObjectLock,
    ];
}

impl fmt::Display for BucketSetting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Versioning => "versioning",
            Self::LifecycleRules => "lifecycle rules",
            Self::Policy => "bucket policy",
            Self::ObjectLock => "object lock",
        })
    }
}

/// A bucket's settings as the store holds them, read back by
/// [`StoreProbe::bucket_settings`](super::StoreProbe::bucket_settings).
///
/// A setting the store cannot read at all (an S3 store answering
/// `NotImplemented`) is listed in [`unreadable`](Self::unreadable), its
/// field left at its default: the kit then reports an expectation on it as
/// not verified, never as met or as absent.
///
/// ```
/// use std::collections::BTreeSet;
/// use lib_provisioner::conformance::{BucketSetting, StoreSettings};
/// let held = StoreSettings {
///     versioning: Some("Enabled".into()),
///     lifecycle_rules: BTreeSet::from(["logs".to_owned()]),
///     unreadable: BTreeSet::from([BucketSetting::ObjectLock]),
///     ..Default::default()
/// };
/// assert!(held.policy.is_none());
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StoreSettings {
    /// `Enabled` or `Suspended`; `None`: versioning was never set.
    pub versioning: Option<String>,
    /// The IDs of the lifecycle rules (empty: none).
    pub lifecycle_rules: BTreeSet<String>,
    /// The bucket policy, as the store returns it (JSON).
    pub policy: Option<String>,
    /// Object lock's default retention, mode (`GOVERNANCE`, `COMPLIANCE`)
    /// and days; `None`: no object lock, or no default retention.
    pub object_lock: Option<(String, i32)>,
    /// The settings the store cannot read (their fields say nothing).
    pub unreadable: BTreeSet<BucketSetting>,
}

/// What an [`ExpectedSettings`] says of one setting.
///
/// ```
/// use lib_provisioner::conformance::Expect;
/// let removed: Expect<String> = Expect::Absent; // checked: none on the store
/// assert_ne!(removed, Expect::Any); // Any: not checked at all
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Expect<T> {
    /// Not checked (the default): the case does not manage this setting.
    #[default]
    Any,
    /// The store holds none of it (removed, or never set).
    Absent,
    /// The store holds this.
    Is(T),
}

/// What the store must hold after a step of
/// [`Kit::bucket_settings`](super::Kit::bucket_settings)'s scenario: each
/// setting [`Expect::Any`] (not checked), [`Expect::Absent`] or
/// [`Expect::Is`].
///
/// ```
/// use std::collections::BTreeSet;
/// use lib_provisioner::conformance::{Expect, ExpectedSettings};
/// let removed = ExpectedSettings {
///     versioning: Expect::Is("Suspended".into()),
///     lifecycle_rules: Expect::Absent,
///     policy: Expect::Absent,
///     ..Default::default() // object lock: not checked
/// };
/// # let _ = removed;
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExpectedSettings {
    /// `Is("Enabled")`, `Is("Suspended")`; `Absent`: never set.
    pub versioning: Expect<String>,
    /// Exactly these rule IDs; `Absent`: no rules.
    pub lifecycle_rules: Expect<BTreeSet<String>>,
    /// A policy whose text contains each of these fragments, `${bucket}`
    /// standing for the bucket's name; `Absent`: no policy. Fragments, not
    /// a whole document: stores reformat the policy they keep.
    pub policy: Expect<Vec<String>>,
    /// Object lock's default retention, mode and days; `Absent`: none.
    pub object_lock: Expect<(String, i32)>,
}

/// The cases of the `settings.applied` scenario: the `additionalConfig`
/// that turns bucket settings on and what the store then holds; and the
/// `additionalConfig` of an update that changes or removes them, and what
/// the store holds after it.
///
/// ```
/// use std::collections::{BTreeMap, BTreeSet};
/// use lib_provisioner::conformance::{Expect, ExpectedSettings, SettingsCases};
/// let cases = SettingsCases {
///     provision: BTreeMap::from([("versioning".into(), "Enabled".into())]),
///     after_provision: ExpectedSettings {
///         versioning: Expect::Is("Enabled".into()),
///         ..Default::default()
///     },
///     update: BTreeMap::from([("versioning".into(), "Suspended".into())]),
///     after_update: ExpectedSettings {
///         versioning: Expect::Is("Suspended".into()),
///         ..Default::default()
///     },
/// };
/// # let _ = cases;
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SettingsCases {
    /// The claim's `additionalConfig` at provisioning: settings on.
    pub provision: BTreeMap<String, String>,
    /// What the store holds after provisioning (and after its retry and a
    /// re-issue of credentials).
    pub after_provision: ExpectedSettings,
    /// The claim's `additionalConfig` after bind, which `update` applies
    /// (its previous config: [`provision`](Self::provision)): settings
    /// changed or removed.
    pub update: BTreeMap<String, String>,
    /// What the store holds after that update (and after its repeat).
    pub after_update: ExpectedSettings,
}

/// How [`compare`] found the store against an expectation.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Compared {
    /// What the store does not hold as expected, one line per setting.
    pub(crate) missed: Vec<String>,
    /// Settings expected, but the store cannot read them.
    pub(crate) unreadable: Vec<BucketSetting>,
    /// Settings expected and read.
    pub(crate) checked: usize,
}

/// `fragment` with `${bucket}` standing for `bucket`.
fn fragment(fragment: &str, bucket: &str) -> String {
    fragment.replace("${bucket}", bucket)
}

/// Compares `held`, read from `bucket`, with `expected`.
pub(crate) fn compare(expected: &ExpectedSettings, held: &StoreSettings, bucket: &str) -> Compared {
    let mut out = Compared::default();
    let mut one = |setting: BucketSetting, expect_any: bool, missed: Option<String>| {
        if expect_any {
            return;
        }
        if held.unreadable.contains(&setting) {
            out.unreadable.push(setting);
            return;
        }
        out.checked += 1;
        out.missed.extend(missed);
    };
    let versioning = held.versioning.as_deref().unwrap_or("never set");
    one(
        BucketSetting::Versioning,
        expected.versioning == Expect::Any,
        match &expected.versioning {
            Expect::Is(want) if held.versioning.as_ref() != Some(want) => Some(format!(
                "versioning: expected {want}, the store holds {versioning}"
            )),
            Expect::Absent if held.versioning.is_some() => Some(format!(
                "versioning: expected never set, the store holds {versioning}"
            )),
            _ => None,
        },
    );
    let rules = &held.lifecycle_rules;
    one(
        BucketSetting::LifecycleRules,
        expected.lifecycle_rules == Expect::Any,
        match &expected.lifecycle_rules {
            Expect::Is(want) if want != rules => Some(format!(
                "lifecycle rules: expected exactly {want:?}, the store holds {}",
                shown_rules(rules)
            )),
            Expect::Absent if !rules.is_empty() => Some(format!(
                "lifecycle rules: expected none, the store holds {rules:?}"
            )),
            _ => None,
        },
    );
    one(
        BucketSetting::Policy,
        expected.policy == Expect::Any,
        match (&expected.policy, &held.policy) {
            (Expect::Is(want), None) => {
                let want: Vec<String> = want.iter().map(|f| fragment(f, bucket)).collect();
                Some(format!(
                    "bucket policy: expected one containing {want:?}, the store holds none"
                ))
            }
            (Expect::Is(want), Some(policy)) => {
                let lacks: Vec<String> = want
                    .iter()
                    .map(|f| fragment(f, bucket))
                    .filter(|f| !policy.contains(f.as_str()))
                    .collect();
                (!lacks.is_empty()).then(|| {
                    format!(
                        "bucket policy: expected one containing {lacks:?}, the store holds {policy}"
                    )
                })
            }
            (Expect::Absent, Some(policy)) => Some(format!(
                "bucket policy: expected none, the store holds {policy}"
            )),
            _ => None,
        },
    );
    let lock = shown_lock(held.object_lock.as_ref());
    one(
        BucketSetting::ObjectLock,
        expected.object_lock == Expect::Any,
        match &expected.object_lock {
            Expect::Is(want) if held.object_lock.as_ref() != Some(want) => Some(format!(
                "object lock: expected {}, the store holds {lock}",
                shown_lock(Some(want))
            )),
            Expect::Absent if held.object_lock.is_some() => Some(format!(
                "object lock: expected none, the store holds {lock}"
            )),
            _ => None,
        },
    );
    out
}

/// What changed from `was` to `now`, one line per setting (unreadable
/// settings are not compared).
pub(crate) fn changes(was: &StoreSettings, now: &StoreSettings) -> Vec<String> {
    let readable = |s: BucketSetting| !was.unreadable.contains(&s) && !now.unreadable.contains(&s);
    let mut out = Vec::new();
    if readable(BucketSetting::Versioning) && was.versioning != now.versioning {
        let shown = |v: &Option<String>| v.clone().unwrap_or_else(|| "never set".to_owned());
        out.push(format!(
            "versioning {} → {}",
            shown(&was.versioning),
            shown(&now.versioning)
        ));
    }
    if readable(BucketSetting::LifecycleRules) && was.lifecycle_rules != now.lifecycle_rules {
        out.push(format!(
            "lifecycle rules {} → {}",
            shown_rules(&was.lifecycle_rules),
            shown_rules(&now.lifecycle_rules)
        ));
    }
    if readable(BucketSetting::Policy) && was.policy != now.policy {
        let shown = |p: &Option<String>| p.clone().unwrap_or_else(|| "none".to_owned());
        out.push(format!(
            "bucket policy {} → {}",
            shown(&was.policy),
            shown(&now.policy)
        ));
    }
    if readable(BucketSetting::ObjectLock) && was.object_lock != now.object_lock {
        out.push(format!(
            "object lock {} → {}",
            shown_lock(was.object_lock.as_ref()),
            shown_lock(now.object_lock.as_ref())
        ));
    }
    out
}

fn shown_rules(rules: &BTreeSet<String>) -> String {
    if rules.is_empty() {
        "none".to_owned()
    } else {
        format!("{rules:?}")
    }
}

fn shown_lock(lock: Option<&(String, i32)>) -> String {
    match lock {
        Some((mode, days)) => format!("{mode} for {days} days"),
        None => "none".to_owned(),
    }
}

impl ExpectedSettings {
    /// The expectation in words, for `bucket` (what is not checked left out).
    pub(crate) fn shown(&self, bucket: &str) -> String {
        let mut parts = Vec::new();
        match &self.versioning {
            Expect::Is(v) => parts.push(format!("versioning {v}")),
            Expect::Absent => parts.push("versioning never set".to_owned()),
            Expect::Any => {}
        }
        match &self.lifecycle_rules {
            Expect::Is(ids) => parts.push(format!("lifecycle rules exactly {ids:?}")),
            Expect::Absent => parts.push("no lifecycle rules".to_owned()),
            Expect::Any => {}
        }
        match &self.policy {
            Expect::Is(fragments) => {
                let fragments: Vec<String> =
                    fragments.iter().map(|f| fragment(f, bucket)).collect();
                parts.push(format!("a bucket policy containing {fragments:?}"));
            }
            Expect::Absent => parts.push("no bucket policy".to_owned()),
            Expect::Any => {}
        }
        match &self.object_lock {
            Expect::Is(lock) => parts.push(format!("object lock {}", shown_lock(Some(lock)))),
            Expect::Absent => parts.push("no object lock".to_owned()),
            Expect::Any => {}
        }
        if parts.is_empty() {
            "any settings (the case checks none)".to_owned()
        } else {
            parts.join(", ")
        }
    }
}

impl fmt::Display for StoreSettings {
    /// One line for the report's log; the policy by size (it is shown
    /// whole where it fails a check).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if !self.unreadable.contains(&BucketSetting::Versioning) {
            let v = self.versioning.as_deref().unwrap_or("never set");
            parts.push(format!("versioning {v}"));
        }
        if !self.unreadable.contains(&BucketSetting::LifecycleRules) {
            parts.push(format!(
                "lifecycle rules {}",
                shown_rules(&self.lifecycle_rules)
            ));
        }
        if !self.unreadable.contains(&BucketSetting::Policy) {
            parts.push(match &self.policy {
                Some(p) => format!("a bucket policy ({} bytes)", p.len()),
                None => "no bucket policy".to_owned(),
            });
        }
        if !self.unreadable.contains(&BucketSetting::ObjectLock) {
            parts.push(format!(
                "object lock {}",
                shown_lock(self.object_lock.as_ref())
            ));
        }
        if !self.unreadable.is_empty() {
            let names: Vec<String> = self.unreadable.iter().map(ToString::to_string).collect();
            parts.push(format!("unreadable: {}", names.join(", ")));
        }
        f.write_str(&parts.join(", "))
    }
}

#[cfg(test)]
#[path = "settings_tests.rs"]
mod tests;
