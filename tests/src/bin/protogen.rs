//! Writes lib-provisioner's COSI gRPC code generated from its .proto.
//!
//! `cargo run -p obc-tests --bin protogen` (needs protoc).

fn main() -> anyhow::Result<()> {
    let path = obc_tests::protogen::generated_path();
    std::fs::write(&path, obc_tests::protogen::generate()?)?;
    println!("wrote {}", path.display());
    Ok(())
}
