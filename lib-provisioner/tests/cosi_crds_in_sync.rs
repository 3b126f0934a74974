//! The checked-in COSI CRDs (`crds/cosi/`) must be exactly what the types
//! in `src/cosi/api/` generate, and carry upstream's names, scopes and
//! validations.

use std::path::PathBuf;

use serde_yaml::Value;

fn crds_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../crds/cosi")
}

#[test]
fn checked_in_cosi_crds_match_the_types() {
    for (name, generated) in lib_provisioner::cosi::api::crd_files() {
        let path = crds_dir().join(name);
        let on_disk = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "{}: {e}; run `cargo run -p obc-tests --bin crdgen`",
                path.display()
            )
        });
        assert!(
            on_disk == generated,
            "{} drifted from lib-provisioner/src/cosi/api/; run `cargo run -p obc-tests --bin crdgen`",
            path.display()
        );
    }
}

fn crd(file: &str) -> Value {
    let files = lib_provisioner::cosi::api::crd_files();
    let (_, yaml) = files
        .iter()
        .find(|(name, _)| *name == file)
        .unwrap_or_else(|| panic!("no {file}"));
    serde_yaml::from_str(yaml).expect("yaml")
}

fn schema(crd: &Value) -> &Value {
    &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
}

fn rules(v: &Value) -> Vec<(String, String)> {
    v["x-kubernetes-validations"]
        .as_sequence()
        .map(|s| {
            s.iter()
                .map(|r| {
                    (
                        r["rule"].as_str().unwrap_or_default().to_owned(),
                        r["message"].as_str().unwrap_or_default().to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn has_message(v: &Value, message: &str) -> bool {
    rules(v).iter().any(|(_, m)| m == message)
}

#[test]
fn names_scopes_and_subresources_are_upstreams() {
    for (file, kind, plural, scope, status) in [
        (
            "objectstorage.k8s.io_bucketclasses.yaml",
            "BucketClass",
            "bucketclasses",
            "Cluster",
            false,
        ),
        (
            "objectstorage.k8s.io_bucketclaims.yaml",
            "BucketClaim",
            "bucketclaims",
            "Namespaced",
            true,
        ),
        (
            "objectstorage.k8s.io_buckets.yaml",
            "Bucket",
            "buckets",
            "Cluster",
            true,
        ),
        (
            "objectstorage.k8s.io_bucketaccessclasses.yaml",
            "BucketAccessClass",
            "bucketaccessclasses",
            "Cluster",
            false,
        ),
        (
            "objectstorage.k8s.io_bucketaccesses.yaml",
            "BucketAccess",
            "bucketaccesses",
            "Namespaced",
            true,
        ),
    ] {
        let c = crd(file);
        assert_eq!(
            c["metadata"]["name"].as_str(),
            Some(format!("{plural}.objectstorage.k8s.io").as_str())
        );
        assert_eq!(
            c["metadata"]["annotations"]["api-approved.kubernetes.io"],
            "unapproved, experimental v1alpha2 changes"
        );
        assert_eq!(c["spec"]["names"]["kind"], kind);
        assert_eq!(c["spec"]["names"]["plural"], plural);
        // listKind is left to the apiserver, which defaults it to
        // `<kind>List` as upstream's YAML spells it (checked on the real
        // apiserver in tests/tests/cosi_crds.rs).
        assert!(
            c["spec"]["names"]["shortNames"].is_null(),
            "{kind}: no shortNames upstream"
        );
        assert_eq!(c["spec"]["scope"], scope);
        let version = &c["spec"]["versions"][0];
        assert_eq!(version["name"], "v1alpha2");
        assert_eq!(version["served"], true);
        assert_eq!(version["storage"], true);
        assert!(version["additionalPrinterColumns"].is_null());
        assert_eq!(
            !version["subresources"]["status"].is_null(),
            status,
            "{kind}: status subresource"
        );
        let required = schema(&c)["required"].as_sequence().expect("required");
        assert!(
            required.contains(&Value::from("spec")),
            "{kind}: spec is required"
        );
        let text = serde_yaml::to_string(&c).expect("yaml");
        assert!(
            !text.contains("default:"),
            "{kind}: upstream has no defaults"
        );
    }
}

#[test]
fn bucket_claim_validations() {
    let c = crd("objectstorage.k8s.io_bucketclaims.yaml");
    let spec = &schema(&c)["properties"]["spec"];
    assert_eq!(spec["minProperties"], 1);
    for m in [
        "exactly one of the fields in [bucketClassName existingBucketName] must be set",
        "bucketClassName cannot be added or removed after creation",
        "existingBucketName cannot be added or removed after creation",
        "protocols list cannot be added or removed after creation",
    ] {
        assert!(has_message(spec, m), "spec lacks {m:?}");
    }
    let class = &spec["properties"]["bucketClassName"];
    assert_eq!(class["maxLength"], 253);
    assert!(has_message(class, "bucketClassName is immutable"));
    assert!(has_message(class, "name must be a valid resource name"));
    let protocols = &spec["properties"]["protocols"];
    assert_eq!(protocols["x-kubernetes-list-type"], "set");
    assert_eq!(protocols["maxItems"], 3);
    assert_eq!(
        protocols["items"]["enum"],
        serde_yaml::from_str::<Value>("[S3, Azure, GCS]").expect("yaml")
    );
    let status = &schema(&c)["properties"]["status"];
    assert_eq!(
        status["required"],
        serde_yaml::from_str::<Value>("[readyToUse]").expect("yaml")
    );
    assert!(has_message(
        status,
        "boundBucketName cannot be removed once set"
    ));
    assert!(has_message(status, "protocols cannot be removed once set"));
    assert_eq!(
        status["properties"]["error"]["properties"]["message"]["maxLength"],
        1572864
    );
    assert_eq!(
        status["properties"]["error"]["properties"]["time"]["format"],
        "date-time"
    );
}

#[test]
fn bucket_validations() {
    let c = crd("objectstorage.k8s.io_buckets.yaml");
    let spec = &schema(&c)["properties"]["spec"];
    let required: Vec<&str> = spec["required"]
        .as_sequence()
        .expect("required")
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    assert_eq!(required, ["bucketClaimRef", "deletionPolicy", "driverName"]);
    let driver = &spec["properties"]["driverName"];
    assert_eq!(
        driver["pattern"],
        r"^[a-zA-Z0-9]([a-zA-Z0-9\-\.]{0,61}[a-zA-Z0-9])?$"
    );
    assert!(has_message(driver, "driverName is immutable"));
    assert!(
        rules(&spec["properties"]["deletionPolicy"]).is_empty(),
        "deletionPolicy is mutable"
    );
    let id = &spec["properties"]["existingBucketID"];
    assert_eq!(id["pattern"], "^[a-zA-Z0-9/._-]+$");
    assert_eq!(id["maxLength"], 2048);
    let claim_ref = &spec["properties"]["bucketClaimRef"];
    assert!(has_message(
        claim_ref,
        "namespace cannot be removed once set"
    ));
    assert!(has_message(claim_ref, "uid cannot be removed once set"));
    assert_eq!(claim_ref["properties"]["uid"]["minLength"], 36);
    assert!(has_message(
        &claim_ref["properties"]["uid"],
        "uid is immutable once set"
    ));
    assert!(has_message(
        &claim_ref["properties"]["namespace"],
        "namespace must be a valid namespace name"
    ));
    for m in [
        "parameters map cannot be added or removed after creation",
        "protocols list cannot be added or removed after creation",
        "existingBucketID cannot be added or removed after creation",
    ] {
        assert!(has_message(spec, m), "spec lacks {m:?}");
    }
    assert_eq!(spec["properties"]["parameters"]["maxProperties"], 512);
    let status = &schema(&c)["properties"]["status"];
    assert!(
        has_message(
            &status["properties"]["bucketID"],
            "boundBucketName is immutable once set"
        ),
        "upstream's message, sic"
    );
    assert_eq!(status["properties"]["bucketInfo"]["maxProperties"], 128);
}

#[test]
fn access_validations() {
    let c = crd("objectstorage.k8s.io_bucketaccesses.yaml");
    let spec = &schema(&c)["properties"]["spec"];
    let claims = &spec["properties"]["bucketClaims"];
    assert_eq!(claims["x-kubernetes-list-type"], "map");
    assert_eq!(claims["x-kubernetes-list-map-keys"][0], "bucketClaimName");
    assert_eq!(claims["maxItems"], 128);
    assert!(has_message(claims, "bucketClaims list is immutable"));
    let item_required = claims["items"]["required"]
        .as_sequence()
        .expect("required")
        .len();
    assert_eq!(item_required, 3);
    assert!(has_message(
        &spec["properties"]["protocol"],
        "protocol is immutable"
    ));
    assert!(has_message(
        spec,
        "serviceAccountName cannot be added or removed after creation"
    ));
    let status = &schema(&c)["properties"]["status"];
    for f in [
        "accountID",
        "accessedBuckets",
        "driverName",
        "authenticationType",
        "parameters",
    ] {
        assert!(
            has_message(status, &format!("{f} cannot be removed once set")),
            "{f}"
        );
    }
    assert!(has_message(
        &status["properties"]["accountID"],
        "accountId is immutable once set"
    ));
    assert_eq!(
        status["properties"]["accessedBuckets"]["x-kubernetes-list-map-keys"][0],
        "bucketName"
    );

    let class = crd("objectstorage.k8s.io_bucketaccessclasses.yaml");
    let spec = &schema(&class)["properties"]["spec"];
    assert!(has_message(spec, "BucketAccessClass spec is immutable"));
    assert_eq!(
        spec["properties"]["disallowedBucketAccessModes"]["x-kubernetes-list-type"],
        "set"
    );
    assert_eq!(
        spec["properties"]["multiBucketAccess"]["enum"],
        serde_yaml::from_str::<Value>("[SingleBucket, MultipleBuckets]").expect("yaml")
    );
    let bucket_class = crd("objectstorage.k8s.io_bucketclasses.yaml");
    assert!(has_message(
        &schema(&bucket_class)["properties"]["spec"],
        "BucketClass spec is immutable"
    ));
}
