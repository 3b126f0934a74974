//! `bucketPolicy`: statements a claim adds to its bucket's policy, in
//! `spec.additionalConfig`, as the JSON of an S3 bucket policy. (The
//! example's anonymous `Allow` needs a class whose `bucketPolicyPrincipals`
//! is `"*"`; by default only `Deny` statements are accepted.)
//!
//! ```yaml
//! spec:
//!   additionalConfig:
//!     bucketPolicy: |
//!       {"Version": "2012-10-17",
//!        "Statement": [{
//!          "Sid": "PublicRead",
//!          "Effect": "Allow",
//!          "Principal": "*",
//!          "Action": "s3:GetObject",
//!          "Resource": "arn:aws:s3:::${bucket}/public/*"}]}
//! ```
//!
//! Tenants are not trusted: every `Resource` must be the claim's bucket
//! (`arn:aws:s3:::<bucket>`) or objects in it (`arn:aws:s3:::<bucket>/...`),
//! and an `Allow` may only grant the principals the class's
//! `bucketPolicyPrincipals` parameter lists (`"*"` there: any principal,
//! anonymous included). `Deny` statements, which only narrow access, may
//! name any principal. `${bucket}` in a `Resource` stands for the bucket's
//! name, for claims whose bucket name is generated after they are written.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::lifecycle::{brief, excerpt};

/// How messages name the document.
const KEY: &str = "additionalConfig bucketPolicy";
/// Largest document accepted, in bytes (20 KiB, S3's own limit).
pub const MAX_TEXT_BYTES: usize = 20 * 1024;
/// Most statements a document may hold.
pub const MAX_STATEMENTS: usize = 50;
/// The policy language version, the one with policy variables.
pub const VERSION: &str = "2012-10-17";
/// Replaced by the bucket's name in every `Resource`.
pub const BUCKET_PLACEHOLDER: &str = "${bucket}";
const ARN_PREFIX: &str = "arn:aws:s3:::";
/// The principal that is anyone, anonymous included.
const ANYONE: &str = "*";

const POLICY_FIELDS: [&str; 2] = ["Version", "Statement"];
const STATEMENT_FIELDS: [&str; 6] = [
    "Sid",
    "Effect",
    "Principal",
    "Action",
    "Resource",
    "Condition",
];

/// The statements a tenant adds to its bucket's policy, checked.
#[derive(Clone, Debug, PartialEq)]
pub struct TenantPolicy {
    statements: Vec<Statement>,
}

#[derive(Clone, Debug, PartialEq)]
struct Statement {
    sid: Option<String>,
    allow: bool,
    principal: Principal,
    /// Sets: neither order nor repetition changes what a statement means.
    actions: BTreeSet<String>,
    /// With `${bucket}` replaced.
    resources: BTreeSet<String>,
    condition: Option<Map<String, Value>>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Principal {
    /// `"*"`, or `{"AWS": "*"}`: the same anonymous principal.
    Anyone,
    /// `{"AWS": [<arn>, ...]}`.
    Aws(BTreeSet<String>),
}

impl TenantPolicy {
    /// `bucket`: the claim's bucket, the only one its statements may name.
    /// `allowed_principals`: the class's list of principals an `Allow` may
    /// name (`"*"` in it: any principal, anonymous included); empty: only
    /// `Deny` statements are accepted.
    pub fn parse(text: &str, bucket: &str, allowed_principals: &[String]) -> Result<Self, String> {
        check_bucket_name(bucket)?;
        if text.len() > MAX_TEXT_BYTES {
            return Err(format!(
                "{KEY} is {} bytes, more than the {MAX_TEXT_BYTES} (20 KiB) accepted",
                text.len()
            ));
        }
        let document: Value = serde_json::from_str(text)
            .map_err(|e| format!("{KEY} is not JSON ({}): a bucket policy is JSON", brief(e)))?;
        let statements = statement_values(document)?
            .into_iter()
            .enumerate()
            .map(|(index, item)| Statement::parse(index, item, bucket, allowed_principals))
            .collect::<Result<Vec<_>, _>>()?;
        check_unique_sids(&statements)?;
        Ok(Self { statements })
    }

    /// The policy document to PUT, as compact JSON. Written from the
    /// checked statements, never from the tenant's text, so that what is
    /// PUT is what was checked (a key given twice, which parsers resolve
    /// differently, cannot slip past the check).
    pub fn document(&self) -> String {
        let statements: Vec<Value> = self.statements.iter().map(Statement::to_json).collect();
        // Version first, as policies are written (a JSON map would sort it last).
        format!(
            r#"{{"Version":"{VERSION}","Statement":{}}}"#,
            Value::Array(statements)
        )
    }

    /// Whether a policy the store returns (GetBucketPolicy's JSON) holds the
    /// same statements, in any order: key order, a string or a list of
    /// one, and whitespace do not matter.
    pub fn same_as(&self, stored: &str) -> bool {
        let Ok(stored) = serde_json::from_str::<Value>(stored) else {
            return false;
        };
        let stored = match stored.get("Statement") {
            Some(Value::Array(items)) => canonical(items.iter()),
            Some(item @ Value::Object(_)) => canonical([item].into_iter()),
            _ => return false,
        };
        let ours: Vec<Value> = self.statements.iter().map(Statement::to_json).collect();
        canonical(ours.iter()) == stored
    }
}

/// The claim's bucket must be a plain name: a wildcard in it would let the
/// resource check pass other buckets.
fn check_bucket_name(bucket: &str) -> Result<(), String> {
    let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_');
    if bucket.is_empty() || !bucket.chars().all(plain) {
        return Err(format!(
            "{KEY} cannot be checked: the bucket name {} is not a plain S3 bucket name",
            excerpt(bucket)
        ));
    }
    Ok(())
}

/// The statements of the document, still unchecked.
fn statement_values(document: Value) -> Result<Vec<Value>, String> {
    let Value::Object(mut policy) = document else {
        return Err(format!(
            "{KEY} must be a JSON object: {{\"Version\": \"{VERSION}\", \"Statement\": [...]}}"
        ));
    };
    check_fields(KEY, &policy, &POLICY_FIELDS, "")?;
    match policy.remove("Version") {
        None => {}
        Some(Value::String(version)) if version == VERSION => {}
        Some(other) => {
            return Err(format!(
                "{KEY}: Version {} is not supported: write \"{VERSION}\" or leave it out",
                shown(&other)
            ));
        }
    }
    let statements = match policy.remove("Statement") {
        Some(Value::Array(items)) => items,
        Some(item @ Value::Object(_)) => vec![item],
        Some(_) => {
            return Err(format!(
                "{KEY}: Statement must be an object or a list of them"
            ));
        }
        None => return Err(format!("{KEY}: Statement is missing")),
    };
    if statements.is_empty() {
        return Err(format!(
            "{KEY}: Statement is empty: give at least one statement"
        ));
    }
    if statements.len() > MAX_STATEMENTS {
        return Err(format!(
            "{KEY} has {} statements, more than the {MAX_STATEMENTS} accepted",
            statements.len()
        ));
    }
    Ok(statements)
}

/// Refuses fields not supported, naming them (cut: a tenant chooses their
/// length).
fn check_fields(
    context: &str,
    object: &Map<String, Value>,
    supported: &[&str],
    hint: &str,
) -> Result<(), String> {
    match object.keys().find(|key| !supported.contains(&key.as_str())) {
        Some(key) => Err(format!(
            "{context}: unknown field {} (supported: {}){hint}",
            excerpt(key),
            supported.join(", ")
        )),
        None => Ok(()),
    }
}

fn check_unique_sids(statements: &[Statement]) -> Result<(), String> {
    let mut seen = BTreeSet::new();
    for sid in statements.iter().filter_map(|s| s.sid.as_deref()) {
        if !seen.insert(sid) {
            return Err(format!(
                "{KEY}: more than one statement has Sid {}: give each its own Sid",
                excerpt(sid)
            ));
        }
    }
    Ok(())
}

impl Statement {
    fn parse(index: usize, item: Value, bucket: &str, allowed: &[String]) -> Result<Self, String> {
        let mut context = format!("{KEY} Statement[{index}]");
        if let Some(sid) = item.get("Sid").and_then(Value::as_str) {
            context = format!("{context} (Sid {})", excerpt(sid));
        }
        let context = context.as_str();
        let Value::Object(mut statement) = item else {
            return Err(format!("{context}: a statement must be an object"));
        };
        let hint = "; NotAction, NotResource and NotPrincipal are not supported: \
                    name what the statement applies to in Action, Resource and Principal";
        check_fields(context, &statement, &STATEMENT_FIELDS, hint)?;
        let sid = match statement.remove("Sid") {
            None => None,
            Some(Value::String(sid)) => Some(sid),
            Some(_) => return Err(format!("{context}: Sid must be a string")),
        };
        let allow = check_effect(context, statement.remove("Effect"))?;
        let principal = Principal::parse(context, statement.remove("Principal"))?;
        if allow {
            principal.check_allowed(context, allowed)?;
        }
        let condition = match statement.remove("Condition") {
            None => None,
            Some(Value::Object(condition)) => Some(condition),
            Some(_) => return Err(format!("{context}: Condition must be an object")),
        };
        Ok(Self {
            sid,
            allow,
            principal,
            actions: check_actions(context, statement.remove("Action"))?,
            resources: check_resources(context, statement.remove("Resource"), bucket)?,
            condition,
        })
    }

    fn to_json(&self) -> Value {
        let list = |set: &BTreeSet<String>| set.iter().map(String::as_str).collect::<Value>();
        let mut object = Map::new();
        if let Some(sid) = &self.sid {
            object.insert("Sid".into(), sid.as_str().into());
        }
        let effect = if self.allow { "Allow" } else { "Deny" };
        object.insert("Effect".into(), effect.into());
        object.insert("Principal".into(), self.principal.to_json());
        object.insert("Action".into(), list(&self.actions));
        object.insert("Resource".into(), list(&self.resources));
        if let Some(condition) = &self.condition {
            object.insert("Condition".into(), Value::Object(condition.clone()));
        }
        Value::Object(object)
    }
}

impl Principal {
    fn parse(context: &str, principal: Option<Value>) -> Result<Self, String> {
        let usage = "write \"*\" or {\"AWS\": [\"<arn>\", ...]}";
        let aws = match principal {
            None => return Err(format!("{context}: Principal is missing: {usage}")),
            Some(Value::String(name)) if name == ANYONE => return Ok(Self::Anyone),
            Some(Value::Object(mut object)) if object.len() == 1 && object.contains_key("AWS") => {
                object.remove("AWS")
            }
            Some(_) => return Err(format!("{context}: Principal is not supported: {usage}")),
        };
        let names = strings(context, "Principal AWS", aws, usage)?;
        if let Some(name) = names
            .iter()
            .find(|n| *n != ANYONE && !n.starts_with("arn:"))
        {
            return Err(format!(
                "{context}: Principal AWS {} is neither \"*\" nor an ARN",
                excerpt(name)
            ));
        }
        // Anyone includes every other principal named beside it.
        if names.iter().any(|name| name == ANYONE) {
            return Ok(Self::Anyone);
        }
        Ok(Self::Aws(names.into_iter().collect()))
    }

    /// Whether an `Allow` may grant this principal.
    fn check_allowed(&self, context: &str, allowed: &[String]) -> Result<(), String> {
        if allowed.iter().any(|name| name == ANYONE) {
            return Ok(());
        }
        let refused = match self {
            Self::Anyone => Some(ANYONE),
            Self::Aws(names) => names
                .iter()
                .map(String::as_str)
                .find(|name| !allowed.iter().any(|a| a == name)),
        };
        let Some(refused) = refused else {
            return Ok(());
        };
        let none = if allowed.is_empty() {
            " (it lists none, so only Deny statements are accepted)"
        } else {
            ""
        };
        Err(format!(
            "{context}: an Allow statement may not grant principal {}: the class's \
             bucketPolicyPrincipals parameter decides which principals may be granted{none}",
            excerpt(refused)
        ))
    }

    fn to_json(&self) -> Value {
        match self {
            Self::Anyone => ANYONE.into(),
            Self::Aws(names) => {
                let names = names.iter().map(String::as_str).collect::<Value>();
                Value::Object(Map::from_iter([("AWS".to_owned(), names)]))
            }
        }
    }
}

fn check_effect(context: &str, effect: Option<Value>) -> Result<bool, String> {
    match effect {
        None => Err(format!(
            "{context}: Effect is missing: write \"Allow\" or \"Deny\""
        )),
        Some(Value::String(effect)) if effect == "Allow" => Ok(true),
        Some(Value::String(effect)) if effect == "Deny" => Ok(false),
        Some(other) => Err(format!(
            "{context}: Effect {} is neither \"Allow\" nor \"Deny\"",
            shown(&other)
        )),
    }
}

/// A string or a non-empty list of them, as policies write one or more.
fn strings(
    context: &str,
    field: &str,
    value: Option<Value>,
    usage: &str,
) -> Result<Vec<String>, String> {
    let not_strings =
        || format!("{context}: {field} must be a string or a list of strings: {usage}");
    let values = match value {
        None => return Err(format!("{context}: {field} is missing: {usage}")),
        Some(Value::String(one)) => vec![one],
        Some(Value::Array(items)) => items
            .into_iter()
            .map(|item| match item {
                Value::String(text) => Some(text),
                _ => None,
            })
            .collect::<Option<Vec<_>>>()
            .ok_or_else(not_strings)?,
        Some(_) => return Err(not_strings()),
    };
    if values.is_empty() {
        return Err(format!("{context}: {field} is empty: {usage}"));
    }
    Ok(values)
}

fn check_actions(context: &str, actions: Option<Value>) -> Result<BTreeSet<String>, String> {
    let usage = "name S3 actions such as \"s3:GetObject\"";
    let actions = strings(context, "Action", actions, usage)?;
    let s3_action = |action: &str| {
        action.strip_prefix("s3:").is_some_and(|name| {
            !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '*' || c == '?')
        })
    };
    match actions.iter().find(|action| !s3_action(action)) {
        Some(action) => Err(format!(
            "{context}: Action {} is not an S3 action: {usage}",
            excerpt(action)
        )),
        None => Ok(actions.into_iter().collect()),
    }
}

fn check_resources(
    context: &str,
    resources: Option<Value>,
    bucket: &str,
) -> Result<BTreeSet<String>, String> {
    let usage = format!(
        "name arn:aws:s3:::{BUCKET_PLACEHOLDER} or arn:aws:s3:::{BUCKET_PLACEHOLDER}/<key pattern>"
    );
    let resources = strings(context, "Resource", resources, &usage)?;
    resources
        .into_iter()
        .map(|resource| {
            let resource = resource.replace(BUCKET_PLACEHOLDER, bucket);
            // Exactly the bucket, or keys in it: a wildcard after the name
            // or a longer name (`<bucket>-x`) would reach other buckets.
            let own = resource
                .strip_prefix(ARN_PREFIX)
                .and_then(|rest| rest.strip_prefix(bucket))
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'));
            if own {
                Ok(resource)
            } else {
                Err(format!(
                    "{context}: Resource {} is not this claim's bucket {bucket:?}: {usage}",
                    excerpt(&resource)
                ))
            }
        })
        .collect()
}

/// An excerpt of a value: a string's text, or another value's JSON.
fn shown(value: &Value) -> String {
    match value {
        Value::String(text) => excerpt(text),
        other => excerpt(&other.to_string()),
    }
}

/// Statements in a form where equal meaning is equal value, sorted.
fn canonical<'a>(statements: impl Iterator<Item = &'a Value>) -> Vec<String> {
    let mut statements: Vec<String> = statements
        .map(|statement| canonical_statement(statement).to_string())
        .collect();
    statements.sort();
    statements
}

fn canonical_statement(statement: &Value) -> Value {
    let Value::Object(object) = statement else {
        return canonical_value(statement);
    };
    let entries = object
        .iter()
        // An empty Sid is no Sid: stores may drop it.
        .filter(|(key, value)| !(*key == "Sid" && value.as_str() == Some("")))
        .map(|(key, value)| {
            let value = if key == "Principal" {
                canonical_principal(value)
            } else {
                canonical_value(value)
            };
            (key.clone(), value)
        });
    sorted_object(entries)
}

/// `"*"`, `{"AWS": "*"}` and `{"AWS": ["*", ...]}` are all anyone.
fn canonical_principal(principal: &Value) -> Value {
    let names_anyone = |names: &Value| match names {
        Value::String(name) => name == ANYONE,
        Value::Array(names) => names.iter().any(|name| name.as_str() == Some(ANYONE)),
        _ => false,
    };
    let anyone = match principal {
        Value::String(name) => name == ANYONE,
        Value::Object(object) => object.len() == 1 && object.get("AWS").is_some_and(names_anyone),
        _ => false,
    };
    if anyone {
        ANYONE.into()
    } else {
        canonical_value(principal)
    }
}

/// Lists as sorted sets, a list of one as its element, and scalars as
/// strings (a store may write a condition's `true` as `"true"`).
fn canonical_value(value: &Value) -> Value {
    match value {
        Value::Array(items) => {
            let mut items: Vec<Value> = items.iter().map(canonical_value).collect();
            items.sort_by_cached_key(Value::to_string);
            items.dedup();
            match items.as_slice() {
                [one] => one.clone(),
                _ => Value::Array(items),
            }
        }
        Value::Object(object) => sorted_object(
            object
                .iter()
                .map(|(key, value)| (key.clone(), canonical_value(value))),
        ),
        Value::Bool(b) => b.to_string().into(),
        Value::Number(n) => n.to_string().into(),
        Value::String(_) | Value::Null => value.clone(),
    }
}

/// An object whose text does not depend on key order, whether or not
/// serde_json keeps insertion order.
fn sorted_object(entries: impl Iterator<Item = (String, Value)>) -> Value {
    let mut entries: Vec<(String, Value)> = entries.collect();
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    Value::Object(entries.into_iter().collect())
}

#[cfg(test)]
#[path = "policy_tests.rs"]
mod tests;
