//! The validations COSI's CRDs repeat (COSI.md, "Shared types and
//! recurring validations"), as the JSON that goes into the schema.

use serde_json::{Value, json};

/// Pattern of a driver name (`DRIVER`).
pub(crate) const DRIVER_PATTERN: &str = r"^[a-zA-Z0-9]([a-zA-Z0-9\-\.]{0,61}[a-zA-Z0-9])?$";
/// Pattern of a bucket or account id (`ID`).
pub(crate) const ID_PATTERN: &str = r"^[a-zA-Z0-9/._-]+$";
/// Pattern of a UID.
pub(crate) const UID_PATTERN: &str = r"^[0-9a-f]{8}-([0-9a-f]{4}\-){3}[0-9a-f]{12}$";

const RNAME_RULE: &str = "!format.dns1123Subdomain().validate(self).hasValue()";

/// A list of CEL rules, each `(rule, message)`.
pub(crate) fn rules(list: &[(&str, &str)]) -> Value {
    Value::Array(
        list.iter()
            .map(|(rule, message)| json!({"rule": rule, "message": message}))
            .collect(),
    )
}

/// `self == oldSelf` with `message`.
pub(crate) fn immutable(message: &str) -> Value {
    rules(&[("self == oldSelf", message)])
}

/// A resource name (`RNAME`).
pub(crate) fn resource_name() -> Value {
    rules(&[(RNAME_RULE, "name must be a valid resource name")])
}

/// A resource name that cannot change once set.
pub(crate) fn immutable_resource_name(message: &str) -> Value {
    rules(&[
        (RNAME_RULE, "name must be a valid resource name"),
        ("self == oldSelf", message),
    ])
}

/// Object-level rules that `field` cannot be removed once set.
pub(crate) fn no_removal(fields: &[&str]) -> Value {
    let list: Vec<(String, String)> = fields
        .iter()
        .map(|f| {
            (
                format!("!has(oldSelf.{f}) || has(self.{f})"),
                format!("{f} cannot be removed once set"),
            )
        })
        .collect();
    Value::Array(
        list.into_iter()
            .map(|(rule, message)| json!({"rule": rule, "message": message}))
            .collect(),
    )
}

/// Object-level rule that `field` cannot be added or removed after
/// creation, with upstream's exact message.
pub(crate) fn fixed_presence(field: &str, message: &str) -> Value {
    json!({"rule": format!("has(oldSelf.{field}) == has(self.{field})"), "message": message})
}

/// A parameters map (`params map`): 1 to 512 entries.
pub(crate) fn params_map(schema: &mut schemars::Schema) {
    schema.insert("minProperties".into(), 1.into());
    schema.insert("maxProperties".into(), 512.into());
}
