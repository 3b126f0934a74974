//! Secrets in logs: with debug logging everywhere, no credential reaches
//! any provisioner log.

use anyhow::{Result, ensure};
use obc_tests::reliability::{
    Summary, converge, register_claim_secrets, wait_all_bound, wait_all_gone,
};

use super::{MIXED, Suite, T, create_mixed, delete_claim, logs, still_running};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_credential_reaches_any_provisioner_log() {
    Suite::run("credentials in logs", &["secrets"], secrets_in_logs).await;
}

async fn secrets_in_logs(suite: &Suite, summary: &mut Summary) -> Result<()> {
    let client = &suite.admin;
    let env = &suite.env;
    let ns = "secrets";
    let classes = suite.namespace(ns).await?;
    // Debug logging everywhere, as an operator chasing a problem would set it.
    let mut launch = suite.launch("secrets-debug");
    launch.log_level = "debug".into();
    let mut proc = launch.start(logs())?;
    let names: Vec<String> = (0..MIXED.len()).map(|i| format!("k{i}")).collect();
    let kinds = create_mixed(client, ns, &classes, &names, "secrets").await?;
    wait_all_bound(client, ns, &names, T).await?;
    let registered = register_claim_secrets(client, &[ns]).await?;
    ensure!(
        registered == names.len(),
        "{registered} claim Secrets hold a secret key"
    );
    // A crash and a restart mid-way through deletion, with everything logged.
    proc.kill().await;
    summary.counts.crashes += 1;
    let mut x = suite.expect(&[ns]);
    for (name, kind) in names.iter().zip(kinds.iter()) {
        x.deleted.push(delete_claim(client, ns, name, kind).await?);
    }
    let mut proc = launch.start(logs())?;
    wait_all_gone(client, ns, &names, T).await?;
    let a = converge(env, client, &x, T).await?;
    summary.check("after deletion", &a)?;
    still_running(&mut proc)?;
    ensure!(
        proc.log().lines().count() > 50,
        "debug logging produced almost nothing; the scan proves little"
    );
    ensure!(
        obc_tests::reliability::registered_secrets() >= 2,
        "nothing to look for: the S3 secret key and the admin token are not registered"
    );
    summary.counts.scenarios = 1;
    summary.note(
        "credentials registered (whole suite so far)",
        obc_tests::reliability::registered_secrets(),
    );
    Ok(())
}
