use super::*;

const BUCKET: &str = "team-a";

fn anyone() -> Vec<String> {
    vec![ANYONE.to_owned()]
}

fn parse(text: &str, allowed: &[String]) -> Result<TenantPolicy, String> {
    TenantPolicy::parse(text, BUCKET, allowed)
}

/// A document of one statement with `fields` besides those given.
fn statement(fields: &str) -> String {
    let mut statement: Map<String, Value> =
        serde_json::from_str(&format!("{{{fields}}}")).expect("fields");
    let defaults = [
        ("Effect", Value::from("Allow")),
        ("Principal", Value::from("*")),
        ("Action", Value::from("s3:GetObject")),
        ("Resource", Value::from("arn:aws:s3:::team-a/*")),
    ];
    for (key, value) in defaults {
        statement.entry(key).or_insert(value);
    }
    statement.retain(|_, value| !value.is_null());
    format!(r#"{{"Statement":[{}]}}"#, Value::Object(statement))
}

fn refused(fields: &str) -> String {
    parse(&statement(fields), &anyone()).expect_err("refused")
}

#[test]
fn the_document_is_normalised_compact_json() {
    let text = r#"{
        "Version": "2012-10-17",
        "Statement": [{
            "Sid": "Read",
            "Effect": "Allow",
            "Principal": {"AWS": ["arn:aws:iam::1:user/b", "arn:aws:iam::1:user/a"]},
            "Action": ["s3:ListBucket", "s3:GetObject"],
            "Resource": ["arn:aws:s3:::team-a/*", "arn:aws:s3:::team-a"],
            "Condition": {"Bool": {"aws:SecureTransport": true}}
        }]}"#;
    let allowed = [
        "arn:aws:iam::1:user/a".to_owned(),
        "arn:aws:iam::1:user/b".to_owned(),
    ];
    let policy = parse(text, &allowed).expect("parsed");
    assert_eq!(
        policy.document(),
        r#"{"Version":"2012-10-17","Statement":[{"Action":["s3:GetObject","s3:ListBucket"],"Condition":{"Bool":{"aws:SecureTransport":true}},"Effect":"Allow","Principal":{"AWS":["arn:aws:iam::1:user/a","arn:aws:iam::1:user/b"]},"Resource":["arn:aws:s3:::team-a","arn:aws:s3:::team-a/*"],"Sid":"Read"}]}"#
    );
    assert!(policy.same_as(&policy.document()));
    // Stores may write a condition's true as "true".
    assert!(policy.same_as(&policy.document().replace("true", "\"true\"")));
}

#[test]
fn what_is_put_is_what_was_checked() {
    // JSON parsers differ on a key given twice: the document is written
    // from the checked value, so no other reading reaches the store.
    let text = r#"{"Statement":[{"Effect":"Deny","Principal":"*","Action":"s3:*",
        "Resource":"arn:aws:s3:::other","Resource":"arn:aws:s3:::team-a"}]}"#;
    let document = parse(text, &[]).expect("parsed").document();
    assert!(!document.contains("other"), "{document}");
}

#[test]
fn a_single_statement_object_and_no_version_are_accepted() {
    let text = r#"{"Statement":{"Effect":"Deny","Principal":"*","Action":"s3:*","Resource":"arn:aws:s3:::team-a"}}"#;
    assert!(parse(text, &[]).is_ok());
}

#[test]
fn the_bucket_placeholder_is_replaced_in_resources() {
    let policy = parse(
        &statement(r#""Resource":["arn:aws:s3:::${bucket}","arn:aws:s3:::${bucket}/x/*"]"#),
        &anyone(),
    )
    .expect("parsed");
    assert!(
        policy
            .document()
            .contains(r#""Resource":["arn:aws:s3:::team-a","arn:aws:s3:::team-a/x/*"]"#)
    );
    let message = refused(r#""Resource":"arn:aws:s3:::${bucket}x/*""#);
    assert!(
        message.contains("\"arn:aws:s3:::team-ax/*\" is not this claim's bucket"),
        "{message}"
    );
}

#[test]
fn resources_outside_the_bucket_are_refused() {
    for resource in [
        "arn:aws:s3:::team-a*",
        "arn:aws:s3:::team-a*/x",
        "arn:aws:s3:::*",
        "arn:aws:s3:::team-?",
        "arn:aws:s3:::other",
        "arn:aws:s3:::other/*",
        "arn:aws:s3:::team-a-x/secret",
        "arn:aws:s3:::team-ab",
        "arn:aws-cn:s3:::team-a",
        "arn:aws:s3:::",
        "*",
    ] {
        let message = refused(&format!(
            r#""Resource":["arn:aws:s3:::team-a/*","{resource}"]"#
        ));
        assert!(
            message.contains(&format!("Resource {resource:?} is not this claim's bucket")),
            "{message}"
        );
    }
}

#[test]
fn a_bucket_name_with_wildcards_is_refused() {
    for bucket in ["", "team-*", "a/b"] {
        let message = TenantPolicy::parse(&statement(""), bucket, &anyone()).expect_err("refused");
        assert!(
            message.contains("is not a plain S3 bucket name"),
            "{message}"
        );
    }
}

#[test]
fn only_json_is_accepted() {
    let message = parse("Statement:\n- Effect: Deny\n", &[]).expect_err("refused");
    assert!(message.contains("is not JSON"), "{message}");
    let message = parse("[]", &[]).expect_err("refused");
    assert!(message.contains("must be a JSON object"), "{message}");
}

#[test]
fn a_document_over_20_kib_is_refused() {
    let text = format!("{}{}", " ".repeat(MAX_TEXT_BYTES), statement(""));
    assert!(
        parse(&text, &anyone())
            .expect_err("refused")
            .contains("(20 KiB)")
    );
}

#[test]
fn only_version_2012_10_17_is_accepted() {
    let message = parse(r#"{"Version":"2008-10-17","Statement":[]}"#, &[]).expect_err("refused");
    assert!(
        message.contains("Version \"2008-10-17\" is not supported"),
        "{message}"
    );
}

#[test]
fn unknown_top_level_fields_are_refused() {
    let message = parse(r#"{"Id":"x","Statement":[]}"#, &[]).expect_err("refused");
    assert!(
        message.contains("unknown field \"Id\" (supported: Version, Statement)"),
        "{message}"
    );
}

#[test]
fn statement_must_be_a_non_empty_list_of_at_most_50() {
    assert!(
        parse(r#"{"Statement":[]}"#, &[])
            .expect_err("refused")
            .contains("Statement is empty")
    );
    assert!(
        parse(r#"{"Version":"2012-10-17"}"#, &[])
            .expect_err("refused")
            .contains("Statement is missing")
    );
    assert!(
        parse(r#"{"Statement":"x"}"#, &[])
            .expect_err("refused")
            .contains("must be an object or a list")
    );
    assert!(
        parse(r#"{"Statement":["x"]}"#, &[])
            .expect_err("refused")
            .contains("Statement[0]: a statement must be an object")
    );
    let one =
        r#"{"Effect":"Deny","Principal":"*","Action":"s3:*","Resource":"arn:aws:s3:::team-a"}"#;
    let text = |n| format!(r#"{{"Statement":[{}]}}"#, vec![one; n].join(","));
    assert!(parse(&text(50), &[]).is_ok());
    assert!(
        parse(&text(51), &[])
            .expect_err("refused")
            .contains("51 statements, more than the 50")
    );
}

#[test]
fn not_action_and_not_resource_are_refused() {
    for field in ["NotAction", "NotResource", "NotPrincipal"] {
        let message = refused(&format!(r#""{field}":"x""#));
        assert!(
            message.contains(&format!("unknown field \"{field}\"")),
            "{message}"
        );
        assert!(
            message.contains("supported: Sid, Effect, Principal, Action, Resource, Condition"),
            "{message}"
        );
        assert!(
            message.contains("NotAction, NotResource and NotPrincipal are not supported"),
            "{message}"
        );
    }
}

#[test]
fn the_sid_is_a_string() {
    assert!(refused(r#""Sid":1"#).contains("Statement[0]: Sid must be a string"));
}

#[test]
fn the_effect_is_allow_or_deny() {
    assert!(refused(r#""Effect":null"#).contains("Effect is missing"));
    assert!(refused(r#""Effect":"allow""#).contains("Effect \"allow\" is neither"));
}

#[test]
fn the_principal_is_anyone_or_aws_arns() {
    assert!(refused(r#""Principal":null"#).contains("Principal is missing"));
    for principal in [
        r#"{"Service":"s3.amazonaws.com"}"#,
        r#"{"AWS":"*","Service":"x"}"#,
        r#""arn:x""#,
    ] {
        let message = refused(&format!(r#""Principal":{principal}"#));
        assert!(message.contains("Principal is not supported"), "{message}");
    }
    assert!(
        refused(r#""Principal":{"AWS":"123456789012"}"#)
            .contains("\"123456789012\" is neither \"*\" nor an ARN")
    );
    let message = refused(r#""Principal":{"AWS":[1]}"#);
    assert!(
        message.contains("Principal AWS must be a string or a list of strings"),
        "{message}"
    );
    assert!(refused(r#""Principal":{"AWS":[]}"#).contains("Principal AWS is empty"));
}

#[test]
fn actions_are_s3_actions() {
    assert!(refused(r#""Action":null"#).contains("Action is missing"));
    assert!(refused(r#""Action":[]"#).contains("Action is empty"));
    for action in ["iam:PassRole", "*", "s3:", "s3:Get Object"] {
        let message = refused(&format!(r#""Action":["s3:GetObject","{action}"]"#));
        assert!(
            message.contains(&format!("Action {action:?} is not an S3 action")),
            "{message}"
        );
    }
    assert!(parse(&statement(r#""Action":["s3:Get*","s3:*"]"#), &anyone()).is_ok());
}

#[test]
fn the_resource_is_required() {
    assert!(refused(r#""Resource":null"#).contains("Resource is missing"));
    assert!(refused(r#""Resource":[]"#).contains("Resource is empty"));
    assert!(refused(r#""Resource":7"#).contains("Resource must be a string or a list of strings"));
    assert!(refused(r#""Resource":["x",7]"#).contains("Resource must be a string or a list"));
}

#[test]
fn the_condition_is_an_object_passed_through() {
    let condition = r#"{"IpAddress":{"aws:SourceIp":["10.0.0.0/8"]}}"#;
    let policy = parse(
        &statement(&format!(r#""Condition":{condition}"#)),
        &anyone(),
    )
    .expect("parsed");
    assert!(
        policy
            .document()
            .contains(&format!(r#""Condition":{condition}"#))
    );
    assert!(refused(r#""Condition":"x""#).contains("Condition must be an object"));
}

#[test]
fn allow_grants_only_the_principals_the_class_lists() {
    let arn = r#""Principal":{"AWS":["arn:aws:iam::1:user/a","arn:aws:iam::2:root"]}"#;
    let allowed = ["arn:aws:iam::1:user/a".to_owned()];
    let message = parse(&statement(arn), &allowed).expect_err("refused");
    assert!(
        message.contains("may not grant principal \"arn:aws:iam::2:root\""),
        "{message}"
    );
    assert!(message.contains("bucketPolicyPrincipals"), "{message}");
    let message = parse(&statement(""), &[]).expect_err("refused");
    assert!(
        message.contains("only Deny statements are accepted"),
        "{message}"
    );
    // "*" in the class's list: any principal, a named one included.
    assert!(parse(&statement(arn), &anyone()).is_ok());
}

#[test]
fn star_and_aws_star_are_the_same_anonymous_principal() {
    let named = ["arn:aws:iam::1:user/a".to_owned()];
    for principal in [
        r#""*""#,
        r#"{"AWS":"*"}"#,
        r#"{"AWS":["arn:aws:iam::1:user/a","*"]}"#,
    ] {
        let text = statement(&format!(r#""Principal":{principal}"#));
        let message = parse(&text, &named).expect_err("refused");
        assert!(
            message.contains("may not grant principal \"*\""),
            "{message}"
        );
        assert_eq!(parse(&text, &anyone()), parse(&statement(""), &anyone()));
    }
}

#[test]
fn deny_may_name_any_principal() {
    for principal in [r#""*""#, r#"{"AWS":"arn:aws:iam::9:root"}"#] {
        let text = statement(&format!(r#""Effect":"Deny","Principal":{principal}"#));
        assert!(parse(&text, &[]).is_ok(), "{principal}");
    }
}

#[test]
fn sids_are_unique() {
    let one = r#"{"Sid":"A","Effect":"Deny","Principal":"*","Action":"s3:*","Resource":"arn:aws:s3:::team-a"}"#;
    let message = parse(&format!(r#"{{"Statement":[{one},{one}]}}"#), &[]).expect_err("refused");
    assert!(
        message.contains("more than one statement has Sid \"A\""),
        "{message}"
    );
}

#[test]
fn messages_name_the_statement_and_excerpt_input() {
    let message = refused(r#""Sid":"S1","Effect":"Maybe""#);
    assert!(
        message.starts_with("additionalConfig bucketPolicy Statement[0] (Sid \"S1\"): "),
        "{message}"
    );
    let long = "x".repeat(5000);
    for fields in [
        format!(r#""{long}":1"#),
        format!(r#""Action":"{long}""#),
        format!(r#""Resource":{{"{long}":1}}"#),
    ] {
        let message = refused(&fields);
        assert!(message.len() < 600, "{message}");
    }
}

#[test]
fn same_as_ignores_key_order_whitespace_and_lists_of_one() {
    let policy = parse(
        &statement(r#""Sid":"R","Condition":{"StringLike":{"s3:prefix":"home/"}}"#),
        &anyone(),
    )
    .expect("parsed");
    let stored = r#"{ "Statement" : [ {
        "Resource": ["arn:aws:s3:::team-a/*"], "Principal": {"AWS": ["*"]},
        "Condition": {"StringLike": {"s3:prefix": ["home/"]}},
        "Action": "s3:GetObject", "Effect": "Allow", "Sid": "R" } ],
        "Version": "2012-10-17" }"#;
    assert!(policy.same_as(stored));
    assert!(!policy.same_as(&stored.replace("s3:GetObject", "s3:PutObject")));
    assert!(!policy.same_as(&stored.replace(r#""Sid": "R""#, r#""Sid": "S""#)));
    assert!(!policy.same_as("not json"));
    assert!(!policy.same_as(r#"{"Statement":[]}"#));
}

#[test]
fn same_as_ignores_statement_and_list_order() {
    let a = r#"{"Sid":"A","Effect":"Deny","Principal":"*","Action":["s3:GetObject","s3:PutObject"],"Resource":"arn:aws:s3:::team-a/*"}"#;
    let b = r#"{"Sid":"B","Effect":"Deny","Principal":"*","Action":"s3:*","Resource":"arn:aws:s3:::team-a"}"#;
    let policy = parse(&format!(r#"{{"Statement":[{a},{b}]}}"#), &[]).expect("parsed");
    let reordered = format!(
        r#"{{"Statement":[{b},{}]}}"#,
        a.replace(
            r#"["s3:GetObject","s3:PutObject"]"#,
            r#"["s3:PutObject","s3:GetObject"]"#
        )
    );
    assert!(policy.same_as(&reordered));
}
