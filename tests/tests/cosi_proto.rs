//! lib-provisioner's checked-in COSI gRPC code must be exactly what its
//! .proto generates (so users of the crate need no protoc, and the wire
//! format never drifts from the file).

use obc_tests::protogen::{generate, generated_path};

#[test]
fn checked_in_grpc_code_matches_the_proto() {
    let generated = generate().expect("generates");
    let path = generated_path();
    let on_disk = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; run `cargo run -p obc-tests --bin protogen`",
            path.display()
        )
    });
    assert!(
        on_disk == generated,
        "{} drifted from lib-provisioner/proto/cosi.proto; run `cargo run -p obc-tests --bin protogen`",
        path.display()
    );
}

#[test]
fn secrets_have_no_derived_debug() {
    let code = generate().expect("generates");
    for message in [
        "S3CredentialInfo",
        "AzureCredentialInfo",
        "GcsCredentialInfo",
    ] {
        let start = code.find(&format!("pub struct {message} ")).expect(message);
        let derive = code[..start].rfind("#[derive(").expect("derive");
        assert!(
            !code[derive..start].contains("Debug"),
            "{message} derives Debug"
        );
    }
}
