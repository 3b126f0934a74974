//! The checked-in CRDs must be exactly what the types generate, and must
//! keep every field the library writes.

use std::path::PathBuf;

fn crds_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../crds")
}

#[test]
fn checked_in_crds_match_the_types() {
    for (name, generated) in lib_provisioner::api::crd_files() {
        let path = crds_dir().join(name);
        let on_disk = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "{}: {e}; run `cargo run -p obc-tests --bin crdgen`",
                path.display()
            )
        });
        assert!(
            on_disk == generated,
            "{} drifted from lib-provisioner/src/obc/api.rs; run `cargo run -p obc-tests --bin crdgen`",
            path.display()
        );
    }
}

#[test]
fn schemas_keep_every_field_the_library_writes() {
    let files = lib_provisioner::api::crd_files();
    let claim: serde_yaml::Value = serde_yaml::from_str(&files[0].1).expect("yaml");
    let schema = &claim["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"];
    for field in [
        "storageClassName",
        "bucketName",
        "generateBucketName",
        "objectBucketName",
        "additionalConfig",
    ] {
        assert!(
            !schema["spec"]["properties"][field].is_null(),
            "claim spec lacks {field}"
        );
    }
    for field in ["phase", "message", "conditions", "observedGeneration"] {
        assert!(
            !schema["status"]["properties"][field].is_null(),
            "claim status lacks {field}"
        );
    }
    assert_eq!(
        claim["spec"]["versions"][0]["subresources"]["status"],
        serde_yaml::Value::Mapping(Default::default())
    );
    assert_eq!(claim["spec"]["names"]["shortNames"][0], "obc");

    let bucket: serde_yaml::Value = serde_yaml::from_str(&files[1].1).expect("yaml");
    assert_eq!(bucket["spec"]["scope"], "Cluster");
    let schema = &bucket["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
        ["properties"];
    for field in [
        "storageClassName",
        "reclaimPolicy",
        "claimRef",
        "endpoint",
        "additionalState",
    ] {
        assert!(!schema[field].is_null(), "bucket spec lacks {field}");
    }
    for field in [
        "bucketHost",
        "bucketPort",
        "bucketName",
        "region",
        "subRegion",
        "additionalConfig",
    ] {
        assert!(
            !schema["endpoint"]["properties"][field].is_null(),
            "endpoint lacks {field}"
        );
    }
}
