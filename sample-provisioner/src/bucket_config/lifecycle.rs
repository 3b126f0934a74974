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
#[path = "lifecycle_tests.rs"]
mod tests;
