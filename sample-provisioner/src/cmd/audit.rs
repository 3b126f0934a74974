//! `sample-provisioner audit`: what the store sweep would do now, printed
//! (a table, or JSON with `--json`); removes nothing.

use lib_provisioner::ControllerBuilder;
use sample_provisioner::S3Provisioner;
use sample_provisioner::serve::with_cosi;

use super::cli::Cli;
use super::run::{cosi_served, sweep};

/// Lists classes, owners and each class's store, and prints the plan.
pub(crate) async fn audit(cli: Cli, json: bool) -> Result<(), String> {
    let client = kube::Client::try_default().await.map_err(|e| {
        format!("could not build a Kubernetes client from KUBECONFIG, ~/.kube/config or the in-cluster service account: {e}")
    })?;
    let provisioner = S3Provisioner::new(client.clone())
        .with_state_bucket(cli.state_bucket.clone())
        .with_intent_namespace(cli.lease_namespace.clone());
    let builder = ControllerBuilder::new(cli.provisioner_name.clone(), provisioner)
        .namespaces(cli.namespaces());
    let builder = sweep(builder, &cli);
    // As serving decides: with the gRPC driver, upstream serves COSI's
    // objects and what it made is not this process's to list.
    let cosi = cosi_served(&cli, &client).await?;
    let audit = with_cosi(builder, cosi)
        .audit(client)
        .await
        .map_err(|e| e.to_string())?;
    if json {
        let text = serde_json::to_string_pretty(&audit)
            .map_err(|e| format!("could not write the audit as JSON: {e}"))?;
        println!("{text}");
    } else {
        println!("{audit}");
    }
    Ok(())
}
