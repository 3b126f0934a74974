//! `bucketLifecycle`: the lifecycle rules a claim asks for its bucket, in
//! `spec.additionalConfig`, as JSON or YAML in the shape
//! `aws s3api put-bucket-lifecycle-configuration` takes (or a bare list of
//! rules).
//!
//! ```yaml
//! spec:
//!   additionalConfig:
//!     bucketLifecycle: |
//!       Rules:
//!         - ID: expire-tmp
//!           Status: Enabled
//!           Filter: {Prefix: tmp/}
//!           Expiration: {Days: 7}
//!         - ID: tidy-uploads
//!           Status: Enabled
//!           AbortIncompleteMultipartUpload: {DaysAfterInitiation: 2}
//! ```
//!
//! Only expirations by age are modelled: Transitions, expiration dates,
//! delete-marker cleanup and tag or size filters are refused, so that what
//! the store returns can be compared with what was asked.

use std::collections::HashMap;
use std::fmt::Display;

use aws_sdk_s3::types::{
    AbortIncompleteMultipartUpload, BucketLifecycleConfiguration, ExpirationStatus,
    LifecycleExpiration, LifecycleRule, LifecycleRuleFilter, NoncurrentVersionExpiration,
};
use serde_yaml::{Mapping, Value};

/// How messages name the document.
const KEY: &str = "additionalConfig bucketLifecycle";
/// Largest document accepted, in bytes (20 KiB).
pub const MAX_TEXT_BYTES: usize = 20 * 1024;
/// Most rules a document may hold.
pub const MAX_RULES: usize = 100;
/// Longest period any rule may set, in days (100 years).
pub const MAX_DAYS: u32 = 36_500;
const MAX_ID_CHARS: usize = 255;
/// S3's longest object key: a longer prefix matches nothing.
const MAX_PREFIX_BYTES: usize = 1024;

const RULE_FIELDS: [&str; 7] = [
    "ID",
    "Status",
    "Filter",
    "Prefix",
    "Expiration",
    "NoncurrentVersionExpiration",
    "AbortIncompleteMultipartUpload",
];
const UNSUPPORTED: &str = "Transitions, NoncurrentVersionTransitions, Expiration Date, \
    ExpiredObjectDeleteMarker, NewerNoncurrentVersions and tag or size filters (Filter And, \
    Tag, ObjectSizeGreaterThan, ObjectSizeLessThan) are not supported";

/// The fields of a rule's nested objects.
fn nested_fields(field: &str) -> Option<&'static [&'static str]> {
    match field {
        "Filter" => Some(&["Prefix"]),
        "Expiration" => Some(&["Days"]),
        "NoncurrentVersionExpiration" => Some(&["NoncurrentDays"]),
        "AbortIncompleteMultipartUpload" => Some(&["DaysAfterInitiation"]),
        _ => None,
    }
}

/// A bucket's lifecycle rules, checked and normalised (so that what the
/// store returns compares equal to what was asked).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lifecycle {
    /// Sorted by ID.
    pub rules: Vec<Rule>,
}

/// One lifecycle rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    /// Unique within the bucket, 1-255 characters.
    pub id: String,
    /// `Status: Enabled`.
    pub enabled: bool,
    /// Key prefix the rule applies to; "" is the whole bucket.
    pub prefix: String,
    /// `Expiration.Days`.
    pub expiration_days: Option<i32>,
    /// `NoncurrentVersionExpiration.NoncurrentDays`.
    pub noncurrent_days: Option<i32>,
    /// `AbortIncompleteMultipartUpload.DaysAfterInitiation`.
    pub abort_multipart_days: Option<i32>,
}

impl Lifecycle {
    /// Parses the document a claim or class gives: JSON or YAML (one YAML
    /// parser reads both), `{"Rules": [...]}` or a bare list of rules.
    /// `max_days`: the class's bound, the longest `Days` or
    /// `NoncurrentDays` a claim may set.
    pub fn parse(text: &str, max_days: Option<u32>) -> Result<Self, String> {
        if text.len() > MAX_TEXT_BYTES {
            return Err(format!(
                "{KEY} is {} bytes, more than the {MAX_TEXT_BYTES} (20 KiB) accepted: \
                 use fewer or shorter rules",
                text.len()
            ));
        }
        let items = rule_values(text)?;
        if items.is_empty() {
            return Err(format!("{KEY} has no rules: give at least one in Rules"));
        }
        if items.len() > MAX_RULES {
            return Err(format!(
                "{KEY} has {} rules, more than the {MAX_RULES} a bucket may have",
                items.len()
            ));
        }
        let rules = items
            .into_iter()
            .enumerate()
            .map(|(index, item)| Rule::parse(index, item, max_days))
            .collect::<Result<Vec<_>, _>>()?;
        check_unique_ids(&rules)?;
        Ok(Self::sorted(rules))
    }

    /// The configuration to PUT.
    pub fn to_s3(&self) -> Result<BucketLifecycleConfiguration, String> {
        let rules = self
            .rules
            .iter()
            .map(Rule::to_s3)
            .collect::<Result<Vec<_>, _>>()?;
        BucketLifecycleConfiguration::builder()
            .set_rules(Some(rules))
            .build()
            .map_err(|e| format!("{KEY}: cannot build the lifecycle configuration: {e}"))
    }

    /// What the store holds, normalised the same way (for drift checks):
    /// None when a rule uses what this type does not model (dates, tag
    /// filters, transitions...), which means "differs, cannot compare".
    pub fn from_s3(rules: &[LifecycleRule]) -> Option<Self> {
        let rules = rules
            .iter()
            .map(Rule::from_s3)
            .collect::<Option<Vec<_>>>()?;
        Some(Self::sorted(rules))
    }

    /// Stores need not keep the order rules were given in.
    fn sorted(mut rules: Vec<Rule>) -> Self {
        rules.sort_by(|a, b| a.id.cmp(&b.id));
        Self { rules }
    }
}

/// The rules of the document, still unchecked.
fn rule_values(text: &str) -> Result<Vec<Value>, String> {
    let document: Value = serde_yaml::from_str(text)
        .map_err(|e| format!("{KEY} is neither JSON nor YAML: {}", brief(e)))?;
    let usage = "write {\"Rules\": [...]} or a list of rules";
    match document {
        Value::Sequence(items) => Ok(items),
        Value::Mapping(mut document) => {
            if let Some(key) = document.keys().find(|key| key.as_str() != Some("Rules")) {
                return Err(format!("{KEY}: unknown field {}: {usage}", field_name(key)));
            }
            match document.remove("Rules") {
                Some(Value::Sequence(items)) => Ok(items),
                _ => Err(format!("{KEY}: Rules must be a list of rules")),
            }
        }
        Value::Null => Err(format!("{KEY} is empty: {usage}")),
        _ => Err(format!("{KEY} is neither an object nor a list: {usage}")),
    }
}

fn check_unique_ids(rules: &[Rule]) -> Result<(), String> {
    let mut seen = HashMap::new();
    for (index, rule) in rules.iter().enumerate() {
        if let Some(first) = seen.insert(rule.id.as_str(), index) {
            return Err(format!(
                "{KEY}: Rules[{first}] and Rules[{index}] have the same ID {}: \
                 give each rule its own ID",
                excerpt(&rule.id)
            ));
        }
    }
    Ok(())
}

impl Rule {
    fn parse(index: usize, item: Value, max_days: Option<u32>) -> Result<Self, String> {
        let mut context = format!("{KEY} Rules[{index}]");
        if let Some(id) = item.get("ID").and_then(Value::as_str) {
            context = format!("{context} (ID {})", excerpt(id));
        }
        let context = context.as_str();
        let Value::Mapping(mut rule) = item else {
            return Err(format!(
                "{context}: a rule must be an object with ID, Status and an action"
            ));
        };
        check_fields(&rule).map_err(|e| format!("{context}: {e}"))?;
        let id = check_id(context, text(context, "ID", rule.remove("ID"))?)?;
        let enabled = check_status(context, text(context, "Status", rule.remove("Status"))?)?;
        let prefix = check_prefix(context, &mut rule)?;
        let mut action_days = |action, field, bound| days(context, &mut rule, action, field, bound);
        let expiration_days = action_days("Expiration", "Days", max_days)?;
        let noncurrent_days =
            action_days("NoncurrentVersionExpiration", "NoncurrentDays", max_days)?;
        // Not an expiration of data: the class's bound does not apply.
        let abort_multipart_days = action_days(
            "AbortIncompleteMultipartUpload",
            "DaysAfterInitiation",
            None,
        )?;
        if expiration_days.is_none() && noncurrent_days.is_none() && abort_multipart_days.is_none()
        {
            return Err(format!(
                "{context}: the rule has no action: give Expiration, \
                 NoncurrentVersionExpiration or AbortIncompleteMultipartUpload"
            ));
        }
        Ok(Self {
            id,
            enabled,
            prefix,
            expiration_days,
            noncurrent_days,
            abort_multipart_days,
        })
    }

    fn to_s3(&self) -> Result<LifecycleRule, String> {
        let status = if self.enabled {
            ExpirationStatus::Enabled
        } else {
            ExpirationStatus::Disabled
        };
        let expiration = self
            .expiration_days
            .map(|days| LifecycleExpiration::builder().days(days).build());
        let noncurrent = self.noncurrent_days.map(|days| {
            NoncurrentVersionExpiration::builder()
                .noncurrent_days(days)
                .build()
        });
        let abort = self.abort_multipart_days.map(|days| {
            AbortIncompleteMultipartUpload::builder()
                .days_after_initiation(days)
                .build()
        });
        LifecycleRule::builder()
            .id(&self.id)
            .status(status)
            // Always a Filter: S3 wants a Filter or the deprecated Prefix.
            .filter(LifecycleRuleFilter::builder().prefix(&self.prefix).build())
            .set_expiration(expiration)
            .set_noncurrent_version_expiration(noncurrent)
            .set_abort_incomplete_multipart_upload(abort)
            .build()
            .map_err(|e| format!("{KEY}: cannot build rule {}: {e}", excerpt(&self.id)))
    }

    fn from_s3(rule: &LifecycleRule) -> Option<Self> {
        if !rule.transitions().is_empty() || !rule.noncurrent_version_transitions().is_empty() {
            return None;
        }
        let enabled = match rule.status() {
            ExpirationStatus::Enabled => true,
            ExpirationStatus::Disabled => false,
            _ => return None,
        };
        Some(Self {
            id: rule.id()?.to_owned(),
            enabled,
            prefix: stored_prefix(rule)?,
            expiration_days: stored_expiration(rule.expiration())?,
            noncurrent_days: stored_noncurrent(rule.noncurrent_version_expiration())?,
            abort_multipart_days: rule
                .abort_incomplete_multipart_upload()
                .and_then(AbortIncompleteMultipartUpload::days_after_initiation),
        })
    }
}

/// Refuses the fields of a rule and of its nested objects that this type
/// does not model (as serde's `deny_unknown_fields` would), naming them.
fn check_fields(rule: &Mapping) -> Result<(), String> {
    for (key, value) in rule {
        let name = key.as_str().unwrap_or_default();
        if !RULE_FIELDS.contains(&name) {
            return Err(unknown_field(key, "", &RULE_FIELDS));
        }
        // A nested value that is not an object is refused where it is read.
        if let (Some(supported), Value::Mapping(nested)) = (nested_fields(name), value) {
            let known = |key: &Value| key.as_str().is_some_and(|key| supported.contains(&key));
            if let Some(key) = nested.keys().find(|key| !known(key)) {
                return Err(unknown_field(key, &format!(" in {name}"), supported));
            }
        }
    }
    Ok(())
}

fn unknown_field(key: &Value, place: &str, supported: &[&str]) -> String {
    format!(
        "unknown field {}{place} (supported: {}); {UNSUPPORTED}",
        field_name(key),
        supported.join(", ")
    )
}

fn field_name(key: &Value) -> String {
    key.as_str()
        .map_or_else(|| "(not a string)".to_owned(), excerpt)
}

/// A string field; null (YAML's empty value) is no value.
fn text(context: &str, field: &str, value: Option<Value>) -> Result<Option<String>, String> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text)),
        // YAML reads `ID: 1` or `Prefix: 2024` as numbers.
        Some(_) => Err(format!(
            "{context}: {field} must be a string (in YAML, quote it)"
        )),
    }
}

fn check_id(context: &str, id: Option<String>) -> Result<String, String> {
    let Some(id) = id else {
        return Err(format!(
            "{context}: ID is missing: give each rule an ID of 1-{MAX_ID_CHARS} characters"
        ));
    };
    let chars = id.chars().count();
    if chars == 0 || chars > MAX_ID_CHARS {
        return Err(format!(
            "{context}: ID has {chars} characters: it must have 1-{MAX_ID_CHARS}"
        ));
    }
    Ok(id)
}

fn check_status(context: &str, status: Option<String>) -> Result<bool, String> {
    match status.as_deref() {
        Some("Enabled") => Ok(true),
        Some("Disabled") => Ok(false),
        Some(other) => Err(format!(
            "{context}: Status {} is neither \"Enabled\" nor \"Disabled\"",
            excerpt(other)
        )),
        None => Err(format!(
            "{context}: Status is missing: set it to \"Enabled\" or \"Disabled\""
        )),
    }
}

/// The prefix, from `Filter` or the older top-level `Prefix`.
fn check_prefix(context: &str, rule: &mut Mapping) -> Result<String, String> {
    let prefix = match (rule.remove("Filter"), rule.remove("Prefix")) {
        // S3 refuses a rule with both.
        (Some(_), Some(_)) => {
            return Err(format!(
                "{context}: both Filter and Prefix are given: give the prefix once, in Filter"
            ));
        }
        (Some(Value::Mapping(mut filter)), None) => {
            text(context, "Filter Prefix", filter.remove("Prefix"))?
        }
        (Some(Value::Null) | None, prefix) => text(context, "Prefix", prefix)?,
        (Some(_), None) => {
            return Err(format!("{context}: Filter must be an object with Prefix"));
        }
    };
    let prefix = prefix.unwrap_or_default();
    if prefix.len() > MAX_PREFIX_BYTES {
        return Err(format!(
            "{context}: the prefix is {} bytes, longer than an object key can be \
             ({MAX_PREFIX_BYTES})",
            prefix.len()
        ));
    }
    Ok(prefix)
}

/// The days of one of the rule's actions (`{action: {field: N}}`), if it
/// has that action.
fn days(
    context: &str,
    rule: &mut Mapping,
    action: &str,
    field: &str,
    bound: Option<u32>,
) -> Result<Option<i32>, String> {
    let days = match rule.remove(action) {
        None => return Ok(None),
        Some(Value::Mapping(mut object)) => object.remove(field),
        Some(_) => {
            return Err(format!(
                "{context}: {action} must be an object with {field}"
            ));
        }
    };
    let field = format!("{action} {field}");
    let days = days
        .as_ref()
        .and_then(Value::as_i64)
        .filter(|days| (1..=i64::from(MAX_DAYS)).contains(days))
        .ok_or_else(|| {
            format!("{context}: {field} must be a whole number of days, 1-{MAX_DAYS}")
        })?;
    if let Some(bound) = bound.filter(|&bound| days > i64::from(bound)) {
        return Err(format!(
            "{context}: {field} is {days}, more than the {bound} days the class allows \
             (its lifecycleMaxDays parameter): ask for at most {bound}"
        ));
    }
    i32::try_from(days)
        .map(Some)
        .map_err(|_| format!("{context}: {field} is out of range"))
}

/// The rule's prefix, from its Filter or the older top-level Prefix (which
/// stores may still return); None for a filter this type does not model.
#[allow(deprecated)]
fn stored_prefix(rule: &LifecycleRule) -> Option<String> {
    let filter_prefix = match rule.filter() {
        Some(filter) if filter.tag().is_some() || filter.and().is_some() => return None,
        // Some stores write an absent size bound as 0.
        Some(filter)
            if filter.object_size_greater_than().is_some_and(|n| n != 0)
                || filter.object_size_less_than().is_some_and(|n| n != 0) =>
        {
            return None;
        }
        Some(filter) => filter.prefix().unwrap_or_default(),
        None => "",
    };
    match (filter_prefix, rule.prefix().unwrap_or_default()) {
        (prefix, "") | ("", prefix) => Some(prefix.to_owned()),
        (a, b) if a == b => Some(a.to_owned()),
        _ => None,
    }
}

fn stored_expiration(expiration: Option<&LifecycleExpiration>) -> Option<Option<i32>> {
    match expiration {
        None => Some(None),
        Some(e) if e.date().is_some() || e.expired_object_delete_marker() == Some(true) => None,
        Some(e) => Some(e.days()),
    }
}

fn stored_noncurrent(noncurrent: Option<&NoncurrentVersionExpiration>) -> Option<Option<i32>> {
    match noncurrent {
        None => Some(None),
        Some(n) if n.newer_noncurrent_versions().is_some_and(|n| n != 0) => None,
        Some(n) => Some(n.noncurrent_days()),
    }
}

/// `text` quoted and cut to a few characters: a message goes to the
/// claim's status, which must not carry a tenant's whole document.
pub(super) fn excerpt(text: &str) -> String {
    const MAX_CHARS: usize = 40;
    match text.char_indices().nth(MAX_CHARS) {
        Some((end, _)) => format!("{:?}…", &text[..end]),
        None => format!("{text:?}"),
    }
}

/// A parser's message, cut: some quote the input they refuse.
pub(super) fn brief(message: impl Display) -> String {
    const MAX_CHARS: usize = 160;
    let message = message.to_string();
    match message.char_indices().nth(MAX_CHARS) {
        Some((end, _)) => format!("{}…", &message[..end]),
        None => message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(id: &str) -> Rule {
        Rule {
            id: id.to_owned(),
            enabled: true,
            prefix: String::new(),
            expiration_days: None,
            noncurrent_days: None,
            abort_multipart_days: None,
        }
    }

    fn refused(text: &str) -> String {
        Lifecycle::parse(text, None).expect_err("refused")
    }

    /// A document of one rule with `fields` besides ID and Status.
    fn one_rule(fields: &str) -> String {
        format!(r#"{{"Rules":[{{"ID":"r","Status":"Enabled",{fields}}}]}}"#)
    }

    #[test]
    fn json_and_yaml_give_the_same_value() {
        let json = r#"{"Rules":[
            {"ID":"tmp","Status":"Enabled","Filter":{"Prefix":"tmp/"},"Expiration":{"Days":7},
             "NoncurrentVersionExpiration":{"NoncurrentDays":3}},
            {"ID":"abort","Status":"Disabled","AbortIncompleteMultipartUpload":{"DaysAfterInitiation":2}}
        ]}"#;
        let yaml = "Rules:\n\
            - ID: tmp\n  Status: Enabled\n  Filter: {Prefix: tmp/}\n  Expiration: {Days: 7}\n  \
              NoncurrentVersionExpiration:\n    NoncurrentDays: 3\n\
            - ID: abort\n  Status: Disabled\n  AbortIncompleteMultipartUpload: {DaysAfterInitiation: 2}\n";
        let expected = Lifecycle {
            rules: vec![
                Rule {
                    enabled: false,
                    abort_multipart_days: Some(2),
                    ..rule("abort")
                },
                Rule {
                    prefix: "tmp/".to_owned(),
                    expiration_days: Some(7),
                    noncurrent_days: Some(3),
                    ..rule("tmp")
                },
            ],
        };
        assert_eq!(Lifecycle::parse(json, None), Ok(expected.clone()));
        assert_eq!(Lifecycle::parse(yaml, None), Ok(expected));
    }

    #[test]
    fn a_bare_list_of_rules_is_accepted() {
        let bare = r#"[{"ID":"a","Status":"Enabled","Expiration":{"Days":1}}]"#;
        let wrapped = format!(r#"{{"Rules":{bare}}}"#);
        assert_eq!(
            Lifecycle::parse(bare, None),
            Lifecycle::parse(&wrapped, None)
        );
    }

    #[test]
    fn rules_are_sorted_by_id() {
        let text = r#"[{"ID":"b","Status":"Enabled","Expiration":{"Days":1}},
                       {"ID":"a","Status":"Enabled","Expiration":{"Days":1}}]"#;
        let ids: Vec<_> = Lifecycle::parse(text, None)
            .expect("parsed")
            .rules
            .into_iter()
            .map(|r| r.id)
            .collect();
        assert_eq!(ids, ["a", "b"]);
    }

    #[test]
    fn the_prefix_comes_from_filter_or_top_level_prefix() {
        let prefix = |text: &str| Lifecycle::parse(text, None).map(|l| l.rules[0].prefix.clone());
        let days = r#""Expiration":{"Days":1}"#;
        assert_eq!(
            prefix(&one_rule(&format!(r#""Filter":{{"Prefix":"a/"}},{days}"#))),
            Ok("a/".into())
        );
        assert_eq!(
            prefix(&one_rule(&format!(r#""Prefix":"b/",{days}"#))),
            Ok("b/".into())
        );
        assert_eq!(
            prefix(&one_rule(&format!(r#""Filter":{{}},{days}"#))),
            Ok(String::new())
        );
        assert_eq!(prefix(&one_rule(days)), Ok(String::new()));
    }

    #[test]
    fn both_filter_and_prefix_are_refused() {
        let message = refused(&one_rule(
            r#""Prefix":"a/","Filter":{"Prefix":"a/"},"Expiration":{"Days":1}"#,
        ));
        assert!(message.contains("both Filter and Prefix"), "{message}");
    }

    #[test]
    fn unknown_fields_are_refused_naming_them_and_what_is_supported() {
        let message = refused(&one_rule(
            r#""Transitions":[{"Days":30,"StorageClass":"GLACIER"}]"#,
        ));
        assert!(
            message.starts_with("additionalConfig bucketLifecycle Rules[0] (ID \"r\")"),
            "{message}"
        );
        assert!(
            message.contains("unknown field \"Transitions\""),
            "{message}"
        );
        assert!(message.contains("supported: ID, Status"), "{message}");
        assert!(
            message.contains("Transitions, NoncurrentVersionTransitions"),
            "{message}"
        );
    }

    #[test]
    fn unsupported_nested_fields_are_refused() {
        for (fields, unknown) in [
            (
                r#""Expiration":{"Date":"2030-01-01T00:00:00Z"}"#,
                "\"Date\" in Expiration",
            ),
            (
                r#""Expiration":{"ExpiredObjectDeleteMarker":true}"#,
                "\"ExpiredObjectDeleteMarker\" in Expiration",
            ),
            (
                r#""Filter":{"Tag":{"Key":"k","Value":"v"}},"Expiration":{"Days":1}"#,
                "\"Tag\" in Filter",
            ),
            (
                r#""NoncurrentVersionExpiration":{"NoncurrentDays":1,"NewerNoncurrentVersions":2}"#,
                "\"NewerNoncurrentVersions\" in NoncurrentVersionExpiration",
            ),
        ] {
            let message = refused(&one_rule(fields));
            assert!(
                message.contains(&format!("unknown field {unknown}")),
                "{message}"
            );
            assert!(message.contains("are not supported"), "{message}");
        }
    }

    #[test]
    fn unknown_top_level_fields_are_refused() {
        let message = refused(r#"{"rules":[]}"#);
        assert!(
            message.contains("unknown field \"rules\": write {\"Rules\": [...]}"),
            "{message}"
        );
    }

    #[test]
    fn long_input_is_not_echoed_whole() {
        let long = "x".repeat(5000);
        for text in [
            one_rule(&format!(r#""{long}":1"#)),
            one_rule(&format!(r#""Expiration":{{"Days":"{long}"}}"#)),
            one_rule(&format!(r#""Status":"{long}""#)).replace(r#""Status":"Enabled","#, ""),
        ] {
            let message = refused(&text);
            assert!(message.len() < 600, "{message}");
        }
    }

    #[test]
    fn no_rules_are_refused() {
        assert!(refused(r#"{"Rules":[]}"#).contains("has no rules"));
        assert!(refused("[]").contains("has no rules"));
        assert!(refused("").contains("is empty"));
    }

    #[test]
    fn more_than_100_rules_are_refused() {
        let rules: Vec<String> = (0..101)
            .map(|i| format!(r#"{{"ID":"{i}","Status":"Enabled","Expiration":{{"Days":1}}}}"#))
            .collect();
        let message = refused(&format!("[{}]", rules.join(",")));
        assert!(
            message.contains("101 rules, more than the 100"),
            "{message}"
        );
    }

    #[test]
    fn a_document_over_20_kib_is_refused() {
        let message = refused(&format!("{}[]", " ".repeat(MAX_TEXT_BYTES)));
        assert!(
            message.contains("more than the 20480 (20 KiB)"),
            "{message}"
        );
    }

    #[test]
    fn text_that_is_not_yaml_is_refused() {
        let message = refused("{\"Rules\": [");
        assert!(message.contains("is neither JSON nor YAML"), "{message}");
        assert!(refused("42").contains("is neither an object nor a list"));
        assert!(refused(r#"{"Rules":{}}"#).contains("Rules must be a list of rules"));
    }

    #[test]
    fn yaml_alias_bombs_are_refused() {
        let mut text = String::from("a: &a [x, x, x, x, x, x, x, x, x]\n");
        let mut previous = 'a';
        for name in 'b'..='p' {
            let aliases = vec![format!("*{previous}"); 9].join(", ");
            text += &format!("{name}: &{name} [{aliases}]\n");
            previous = name;
        }
        assert!(refused(&text).contains("is neither JSON nor YAML"));
    }

    #[test]
    fn a_rule_that_is_not_an_object_is_refused() {
        assert!(refused(r#"["r"]"#).contains("Rules[0]: a rule must be an object"));
    }

    #[test]
    fn the_id_is_required() {
        let message = refused(r#"[{"Status":"Enabled","Expiration":{"Days":1}}]"#);
        assert!(message.contains("Rules[0]: ID is missing"), "{message}");
    }

    #[test]
    fn strings_must_be_strings() {
        let message = refused("- {ID: 1, Status: Enabled, Expiration: {Days: 1}}");
        assert!(
            message.contains("Rules[0]: ID must be a string (in YAML, quote it)"),
            "{message}"
        );
        let message = refused(&one_rule(
            r#""Filter":{"Prefix":2024},"Expiration":{"Days":1}"#,
        ));
        assert!(
            message.contains("Filter Prefix must be a string"),
            "{message}"
        );
        let message = refused(&one_rule(r#""Filter":"logs/","Expiration":{"Days":1}"#));
        assert!(
            message.contains("Filter must be an object with Prefix"),
            "{message}"
        );
    }

    #[test]
    fn the_id_has_1_to_255_characters() {
        let with_id =
            |id: &str| format!(r#"[{{"ID":"{id}","Status":"Enabled","Expiration":{{"Days":1}}}}]"#);
        assert!(refused(&with_id("")).contains("ID has 0 characters"));
        assert!(refused(&with_id(&"é".repeat(256))).contains("ID has 256 characters"));
        assert!(Lifecycle::parse(&with_id(&"é".repeat(255)), None).is_ok());
    }

    #[test]
    fn ids_are_unique() {
        let text = r#"[{"ID":"a","Status":"Enabled","Expiration":{"Days":1}},
                       {"ID":"b","Status":"Enabled","Expiration":{"Days":1}},
                       {"ID":"a","Status":"Enabled","Expiration":{"Days":2}}]"#;
        let message = refused(text);
        assert!(
            message.contains("Rules[0] and Rules[2] have the same ID \"a\""),
            "{message}"
        );
    }

    #[test]
    fn the_status_is_required_and_enabled_or_disabled() {
        let missing = refused(r#"[{"ID":"a","Expiration":{"Days":1}}]"#);
        assert!(
            missing.contains("(ID \"a\"): Status is missing"),
            "{missing}"
        );
        let wrong = refused(r#"[{"ID":"a","Status":"enabled","Expiration":{"Days":1}}]"#);
        assert!(wrong.contains("Status \"enabled\" is neither"), "{wrong}");
    }

    #[test]
    fn a_rule_needs_an_action() {
        let message = refused(&one_rule(r#""Filter":{"Prefix":"a/"}"#));
        assert!(message.contains("the rule has no action"), "{message}");
    }

    #[test]
    fn days_are_1_to_36500() {
        for fields in [
            r#""Expiration":{"Days":0}"#,
            r#""NoncurrentVersionExpiration":{"NoncurrentDays":36501}"#,
            r#""AbortIncompleteMultipartUpload":{"DaysAfterInitiation":-1}"#,
        ] {
            let message = refused(&one_rule(fields));
            assert!(
                message.contains("must be a whole number of days, 1-36500"),
                "{message}"
            );
        }
        assert!(Lifecycle::parse(&one_rule(r#""Expiration":{"Days":36500}"#), None).is_ok());
    }

    #[test]
    fn days_must_be_whole_numbers() {
        let message = refused(&one_rule(r#""Expiration":{"Days":"7"}"#));
        assert!(
            message.contains("Expiration Days must be a whole number"),
            "{message}"
        );
        let message = refused(&one_rule(r#""Expiration":7"#));
        assert!(
            message.contains("Expiration must be an object with Days"),
            "{message}"
        );
        let message = refused(&one_rule(r#""Expiration":{}"#));
        assert!(
            message.contains("Expiration Days must be a whole number"),
            "{message}"
        );
    }

    #[test]
    fn the_class_bounds_expiration_days() {
        let parse = |fields: &str| Lifecycle::parse(&one_rule(fields), Some(30));
        let message = parse(r#""Expiration":{"Days":31}"#).expect_err("refused");
        assert!(
            message.contains("Expiration Days is 31, more than the 30 days the class allows (its lifecycleMaxDays"),
            "{message}"
        );
        let message =
            parse(r#""NoncurrentVersionExpiration":{"NoncurrentDays":31}"#).expect_err("refused");
        assert!(
            message.contains("NoncurrentDays is 31, more than the 30"),
            "{message}"
        );
        assert!(parse(r#""Expiration":{"Days":30}"#).is_ok());
        // Aborting uploads expires no data.
        assert!(parse(r#""AbortIncompleteMultipartUpload":{"DaysAfterInitiation":90}"#).is_ok());
    }

    #[test]
    fn the_prefix_has_at_most_1024_bytes() {
        let fields = |n| {
            format!(
                r#""Filter":{{"Prefix":"{}"}},"Expiration":{{"Days":1}}"#,
                "p".repeat(n)
            )
        };
        assert!(refused(&one_rule(&fields(1025))).contains("the prefix is 1025 bytes"));
        assert!(Lifecycle::parse(&one_rule(&fields(1024)), None).is_ok());
    }

    #[test]
    fn to_s3_and_from_s3_round_trip() {
        let text = r#"[{"ID":"b","Status":"Disabled","Prefix":"logs/","Expiration":{"Days":30},
                        "NoncurrentVersionExpiration":{"NoncurrentDays":7}},
                       {"ID":"a","Status":"Enabled","AbortIncompleteMultipartUpload":{"DaysAfterInitiation":1}}]"#;
        let lifecycle = Lifecycle::parse(text, None).expect("parsed");
        let s3 = lifecycle.to_s3().expect("built");
        assert_eq!(s3.rules().len(), 2);
        assert_eq!(
            s3.rules()[1].filter().and_then(|f| f.prefix()),
            Some("logs/")
        );
        assert_eq!(Lifecycle::from_s3(s3.rules()), Some(lifecycle));
    }

    fn stored(
        build: impl FnOnce(
            aws_sdk_s3::types::builders::LifecycleRuleBuilder,
        ) -> aws_sdk_s3::types::builders::LifecycleRuleBuilder,
    ) -> LifecycleRule {
        build(
            LifecycleRule::builder()
                .id("a")
                .status(ExpirationStatus::Enabled),
        )
        .build()
        .expect("built")
    }

    #[test]
    #[allow(deprecated)] // Stores may still return the top-level Prefix.
    fn from_s3_normalises_prefixes_and_order() {
        let rules = [
            stored(|r| {
                r.id("b")
                    .prefix("x/")
                    .expiration(LifecycleExpiration::builder().days(1).build())
            }),
            stored(|r| {
                r.filter(
                    LifecycleRuleFilter::builder()
                        .object_size_greater_than(0)
                        .build(),
                )
                .expiration(
                    LifecycleExpiration::builder()
                        .days(2)
                        .expired_object_delete_marker(false)
                        .build(),
                )
            }),
        ];
        let expected = Lifecycle {
            rules: vec![
                Rule {
                    expiration_days: Some(2),
                    ..rule("a")
                },
                Rule {
                    prefix: "x/".into(),
                    expiration_days: Some(1),
                    ..rule("b")
                },
            ],
        };
        assert_eq!(Lifecycle::from_s3(&rules), Some(expected));
    }

    #[test]
    #[allow(deprecated)] // Stores may still return the top-level Prefix.
    fn from_s3_cannot_compare_what_it_does_not_model() {
        use aws_sdk_s3::primitives::DateTime;
        use aws_sdk_s3::types::{Tag, Transition};
        let days = || LifecycleExpiration::builder().days(1).build();
        let tag = Tag::builder().key("k").value("v").build().expect("tag");
        let unmodelled = [
            stored(|r| {
                r.expiration(
                    LifecycleExpiration::builder()
                        .date(DateTime::from_secs(0))
                        .build(),
                )
            }),
            stored(|r| {
                r.expiration(
                    LifecycleExpiration::builder()
                        .expired_object_delete_marker(true)
                        .build(),
                )
            }),
            stored(|r| {
                r.expiration(days())
                    .transitions(Transition::builder().days(1).build())
            }),
            stored(|r| {
                r.expiration(days())
                    .filter(LifecycleRuleFilter::builder().tag(tag).build())
            }),
            stored(|r| {
                r.expiration(days())
                    .status(ExpirationStatus::from("Paused"))
            }),
            stored(|r| r.expiration(days()).set_id(None)),
            stored(|r| {
                r.expiration(days())
                    .prefix("a/")
                    .filter(LifecycleRuleFilter::builder().prefix("b/").build())
            }),
        ];
        for rule in unmodelled {
            assert_eq!(
                Lifecycle::from_s3(std::slice::from_ref(&rule)),
                None,
                "{rule:?}"
            );
        }
    }

    #[test]
    fn excerpts_are_short() {
        assert_eq!(excerpt("ab"), "\"ab\"");
        assert_eq!(excerpt(&"é".repeat(50)), format!("\"{}\"…", "é".repeat(40)));
    }
}
