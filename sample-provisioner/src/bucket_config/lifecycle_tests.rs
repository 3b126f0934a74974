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
        message.contains(
            "Expiration Days is 31, more than the 30 days the class allows (its lifecycleMaxDays"
        ),
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
