//! [`ConfigAllowList`]: which `additionalConfig` keys a class lets its
//! claims set.
//!
//! The keys are the provisioner's; the rule is the library's, so that every
//! provisioner words it the same way. A class that names its list
//! (parameter [`ConfigAllowList::PARAMETER`]) allows exactly those keys,
//! its provisioner's or not; a class without one allows the provisioner's
//! defaults (what it served before it had an allow-list) and passes keys
//! the provisioner does not read through untouched, as it always did.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use super::ProvisionError;

/// The `additionalConfig` keys one class allows.
///
/// ```
/// use std::collections::BTreeMap;
/// use lib_provisioner::provisioner::ConfigAllowList;
///
/// let class = BTreeMap::from([("allowedConfig".into(), "maxSize, versioning".into())]);
/// let allowed = ConfigAllowList::from_parameters("StorageClass \"fast\"", &class, &["maxSize"]).unwrap();
/// let claim = BTreeMap::from([("bucketPolicy".into(), "{}".into())]);
/// let refused = allowed.check(&claim, &["maxSize", "versioning", "bucketPolicy"]).unwrap_err();
/// assert!(refused.to_string().contains("bucketPolicy"));
/// assert!(refused.nothing_created());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigAllowList {
    class: String,
    /// `None`: the class names no list (defaults, and pass-through).
    listed: Option<BTreeSet<String>>,
    defaults: BTreeSet<String>,
}

impl ConfigAllowList {
    /// The class parameter naming the allowed keys, comma-separated.
    pub const PARAMETER: &'static str = "allowedConfig";

    /// The list `parameters` name, or `defaults` when they name none.
    /// `class` names the class in messages (`StorageClass "fast"`).
    /// Errors on an empty or malformed entry.
    pub fn from_parameters(
        class: impl fmt::Display,
        parameters: &BTreeMap<String, String>,
        defaults: &[&str],
    ) -> Result<Self, ProvisionError> {
        let class = class.to_string();
        let listed = match parameters.get(Self::PARAMETER) {
            None => None,
            Some(raw) => Some(parse_list(raw).map_err(|why| {
                ProvisionError::permanent(format!(
                    "{class}: parameter {} is {raw:?}: {why}; list the additionalConfig keys its claims may set, comma-separated (such as \"maxSize,versioning\"), or set it to \"\" to allow none",
                    Self::PARAMETER
                ))
            })?),
        };
        Ok(Self {
            class,
            listed,
            defaults: defaults.iter().map(|k| (*k).to_owned()).collect(),
        })
    }

    /// Whether a claim of the class may set `key`.
    pub fn allows(&self, key: &str) -> bool {
        self.listed.as_ref().unwrap_or(&self.defaults).contains(key)
    }

    /// Refuses the first key of `config` the class does not allow, naming
    /// the class, the key and the parameter that would allow it. `known`:
    /// the keys the provisioner reads; without a list on the class, other
    /// keys pass. The error says nothing was created (checked first).
    pub fn check(
        &self,
        config: &BTreeMap<String, String>,
        known: &[&str],
    ) -> Result<(), ProvisionError> {
        let refused = config.keys().find(|key| {
            let checked = self.listed.is_some() || known.contains(&key.as_str());
            checked && !self.allows(key)
        });
        match refused {
            None => Ok(()),
            Some(key) => Err(ProvisionError::permanent(self.refusal(key)).with_nothing_created()),
        }
    }

    fn refusal(&self, key: &str) -> String {
        let allowed = self.listed.as_ref().unwrap_or(&self.defaults);
        let allowed = if allowed.is_empty() {
            "none".to_owned()
        } else {
            allowed.iter().cloned().collect::<Vec<_>>().join(", ")
        };
        format!(
            "additionalConfig {key} is not allowed by {}: it allows {allowed}; remove {key} from the claim, or ask an administrator to add it to the class's {} parameter",
            self.class,
            Self::PARAMETER
        )
    }
}

fn parse_list(raw: &str) -> Result<BTreeSet<String>, String> {
    let mut keys = BTreeSet::new();
    if raw.trim().is_empty() {
        return Ok(keys);
    }
    for key in raw.split(',').map(str::trim) {
        if key.is_empty() {
            return Err("it has an empty entry".into());
        }
        if !key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        {
            return Err(format!("entry {key:?} is not a config key"));
        }
        keys.insert(key.to_owned());
    }
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    const KNOWN: &[&str] = &["maxSize", "versioning", "bucketPolicy"];

    #[test]
    fn without_a_list_the_defaults_hold_and_other_keys_pass() {
        let list = ConfigAllowList::from_parameters("StorageClass \"s\"", &map(&[]), &["maxSize"])
            .expect("no list");
        assert!(
            list.check(&map(&[("maxSize", "1Gi"), ("app", "x")]), KNOWN)
                .is_ok()
        );
        let e = list
            .check(&map(&[("versioning", "Enabled")]), KNOWN)
            .expect_err("not a default");
        let text = e.to_string();
        assert!(
            text.contains("versioning") && text.contains("StorageClass \"s\""),
            "{text}"
        );
        assert!(
            text.contains("allows maxSize") && text.contains("allowedConfig"),
            "{text}"
        );
        assert!(e.nothing_created());
    }

    #[test]
    fn a_list_allows_exactly_its_keys() {
        let params = map(&[(ConfigAllowList::PARAMETER, " versioning , maxSize")]);
        let list = ConfigAllowList::from_parameters("c", &params, &[]).expect("list");
        assert!(
            list.check(&map(&[("versioning", "Enabled")]), KNOWN)
                .is_ok()
        );
        // A list is strict: keys the provisioner does not read are refused too.
        assert!(list.check(&map(&[("app", "x")]), KNOWN).is_err());
        let none = map(&[(ConfigAllowList::PARAMETER, "")]);
        let list = ConfigAllowList::from_parameters("c", &none, &["maxSize"]).expect("empty");
        let e = list
            .check(&map(&[("maxSize", "1")]), KNOWN)
            .expect_err("none");
        assert!(e.to_string().contains("allows none"), "{e}");
    }

    #[test]
    fn malformed_lists_are_refused() {
        for bad in ["a,,b", "a b", "x,"] {
            let params = map(&[(ConfigAllowList::PARAMETER, bad)]);
            let e = ConfigAllowList::from_parameters("c", &params, &[]).expect_err(bad);
            assert!(e.to_string().contains("comma-separated"), "{e}");
        }
    }
}
