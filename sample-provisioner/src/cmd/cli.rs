//! The command line: flags, their environment variables and help, and the
//! checks clap cannot make.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{ArgAction, Parser, ValueEnum};
use lib_provisioner::cosi::{CosiOptions, InvalidDriverName};
use lib_provisioner::names;
use sample_provisioner::serve::CosiMode;

#[derive(Parser, Debug)]
#[command(
    name = "sample-provisioner",
    version,
    about = "Object bucket provisioner for S3-compatible stores (objectbucket.io/v1alpha1, and COSI objectstorage.k8s.io/v1alpha2)",
    long_about = "Object bucket provisioner for S3-compatible stores.\n\n\
        Serves ObjectBucketClaims whose StorageClass names this provisioner: creates the \
        bucket on the store given by the class's `endpoint` parameter, and writes a Secret \
        (credentials) and a ConfigMap (endpoint) named after the claim. With COSI's CRDs \
        installed it also serves BucketClaims and BucketAccesses of the classes naming its \
        COSI driver (--cosi, --cosi-driver-name). Each flag can also be set through the \
        environment variable shown."
)]
pub(crate) struct Cli {
    /// Provisioner name: only StorageClasses whose `provisioner` field is exactly this are served.
    #[arg(
        long,
        env = "OBC_PROVISIONER_NAME",
        default_value = "objectbucket.io/sample-s3"
    )]
    pub(super) provisioner_name: String,

    /// Namespaces whose claims are served, comma-separated (team-a,team-b). Empty or unset: all namespaces.
    #[arg(
        long,
        env = "OBC_NAMESPACES",
        value_delimiter = ',',
        value_name = "NS[,NS...]"
    )]
    pub(super) namespaces: Vec<String>,

    /// Bucket the provisioner keeps its own bookkeeping in (the intents that make an interrupted bucket creation resumable), one on each object store, created there on first use. No claim is ever given a bucket of this name.
    #[arg(
        long,
        env = "OBC_STATE_BUCKET",
        default_value = sample_provisioner::store::DEFAULT_STATE_BUCKET,
        value_name = "BUCKET",
        value_parser = state_bucket_name
    )]
    pub(super) state_bucket: String,

    /// Claims reconciled at once (0: no limit).
    #[arg(long, env = "OBC_CONCURRENCY", default_value_t = 4)]
    pub(super) concurrency: u16,

    /// Which Events to send on the claims: `all` (every transition, such as Bound, and every problem) or `warnings` (problems only: one apiserver write fewer per provision and per deletion; the claims' status still says the same).
    #[arg(long, env = "OBC_EVENTS", value_enum, default_value_t = EventsArg::All, value_name = "LEVEL")]
    pub(super) events: EventsArg,

    /// Take part in leader election through a Lease, so that only one replica acts. Disable only when running a single replica.
    #[arg(
        long,
        env = "OBC_LEADER_ELECT",
        value_name = "BOOL",
        default_value_t = true,
        action = ArgAction::Set,
        num_args = 0..=1,
        default_missing_value = "true"
    )]
    pub(super) leader_elect: bool,

    /// Namespace of the leader-election Lease, of the Leases that hold greenfield bucket names, and of the creation-intent ConfigMaps (in a pod: set POD_NAMESPACE from the downward API).
    #[arg(long, env = "POD_NAMESPACE", default_value = "obc-system")]
    pub(super) lease_namespace: String,

    /// Name of the leader-election Lease. Default: the provisioner name with '/' replaced by '-' (objectbucket.io-sample-s3), so that provisioners of different names never share a Lease.
    #[arg(long, env = "OBC_LEASE_NAME")]
    pub(super) lease_name: Option<String>,

    /// This replica's identity in the Lease (in a pod: set POD_NAME from the downward API). Default: the host name, else a random name.
    #[arg(long, env = "POD_NAME")]
    pub(super) identity: Option<String>,

    /// How long the Lease stays valid without renewal (3 to 3600); the leader renews every third of it. A leader that cannot renew in time exits.
    #[arg(
        long,
        env = "OBC_LEASE_DURATION_SECONDS",
        default_value_t = 15,
        value_name = "SECONDS",
        value_parser = clap::value_parser!(u64).range(3..=3600)
    )]
    pub(super) lease_duration_seconds: u64,

    /// How long the watches may stay broken (the apiserver unreachable)
    /// before /healthz fails, so that the liveness probe restarts the Pod.
    #[arg(
        long,
        env = "OBC_DEAD_WATCH_LIMIT_SECONDS",
        default_value_t = lib_provisioner::WATCHES_DEAD_LIMIT.as_secs(),
        value_name = "SECONDS",
        value_parser = clap::value_parser!(u64).range(5..=86400)
    )]
    pub(super) dead_watch_limit_seconds: u64,

    /// Address of the HTTP server for /metrics (Prometheus), /healthz and /readyz.
    #[arg(
        long,
        env = "OBC_METRICS_ADDR",
        default_value = "0.0.0.0:8080",
        value_name = "ADDR:PORT"
    )]
    pub(super) metrics_addr: SocketAddr,

    /// Do not start the metrics and health server (the Deployment's probes then fail).
    #[arg(long, env = "OBC_NO_METRICS")]
    pub(super) no_metrics: bool,

    /// Also serve as a COSI (objectstorage.k8s.io/v1alpha2) gRPC driver on --cosi-endpoint, for the COSI sidecar: BucketClaims and BucketAccesses get buckets and per-access users on the same stores.
    #[arg(
        long,
        env = "OBC_COSI_DRIVER",
        value_name = "BOOL",
        default_value_t = false,
        action = ArgAction::Set,
        num_args = 0..=1,
        default_missing_value = "true"
    )]
    pub(super) cosi_driver: bool,

    /// Where the COSI driver listens: unix://<path>.sock (the socket the COSI sidecar shares).
    #[arg(
        long,
        env = lib_provisioner::cosi::grpc::ENDPOINT_ENV,
        default_value = lib_provisioner::cosi::grpc::DEFAULT_ENDPOINT,
        value_name = "unix://PATH.sock",
        value_parser = cosi_socket
    )]
    pub(super) cosi_endpoint: PathBuf,

    /// Log format: `text` for people, `json` (one object per line) for log collectors.
    #[arg(long, env = "OBC_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub(super) log_format: LogFormat,

    /// Serve COSI (objectstorage.k8s.io/v1alpha2: BucketClaims, BucketAccesses) in-process too: `auto` when the apiserver serves COSI's CRDs (crds/cosi/) and --cosi-driver is off (with it, upstream's controller and sidecar serve the Kubernetes side), `on` (fail without the CRDs), `off`.
    #[arg(long, env = "OBC_COSI", value_enum, default_value_t = CosiArg::Auto, value_name = "MODE")]
    pub(super) cosi: CosiArg,

    /// COSI driver name, which BucketClasses and BucketAccessClasses give as driverName: what --cosi serves in-process and what --cosi-driver reports over gRPC (dot-separated lower-case labels, at most 63 characters).
    #[arg(
        long,
        env = "OBC_COSI_DRIVER_NAME",
        default_value = sample_provisioner::serve::DEFAULT_DRIVER_NAME,
        value_name = "NAME"
    )]
    pub(super) cosi_driver_name: String,

    /// Run COSI's binding role too (BucketClaims get their Buckets, BucketAccesses are checked and handed to the driver). `false` where upstream's COSI controller runs, so that only it binds.
    #[arg(
        long,
        env = "OBC_COSI_BINDING",
        value_name = "BOOL",
        default_value_t = true,
        action = ArgAction::Set,
        num_args = 0..=1,
        default_missing_value = "true"
    )]
    pub(super) cosi_binding: bool,

    /// Seconds between two sweeps of the stores: each class's store is listed and every user, policy and bucket this provisioner made is matched against the live claims and accesses by UID (users and policies without one are removed after --orphan-grace-seconds; buckets are only reported). 0: no sweep.
    #[arg(
        long,
        env = "OBC_SWEEP_INTERVAL_SECONDS",
        default_value_t = 300,
        value_name = "SECONDS"
    )]
    pub(super) sweep_interval_seconds: u64,

    /// Seconds between two checks of a Bound claim's bucket settings (versioning, lifecycle, policy, object lock) against what its claim asks: what was changed on the store behind the claim is put back. Spread over the interval; 0: never.
    #[arg(
        long,
        env = "OBC_CONFIG_CHECK_INTERVAL_SECONDS",
        default_value_t = 3600,
        value_name = "SECONDS"
    )]
    pub(super) config_check_interval_seconds: u64,

    /// Seconds a store user or policy may be without a live owner (and seen so in two sweeps) before the sweep removes it.
    #[arg(
        long,
        env = "OBC_ORPHAN_GRACE_SECONDS",
        default_value_t = 600,
        value_name = "SECONDS"
    )]
    pub(super) orphan_grace_seconds: u64,

    /// What to do (default: serve).
    #[command(subcommand)]
    pub(crate) command: Option<Command>,

    /// Log filter, RUST_LOG syntax: a level (info, debug) or directives (info,sample_provisioner=debug,lib_provisioner=debug).
    #[arg(long, env = "RUST_LOG", default_value = "info", value_name = "FILTER")]
    pub(super) log_level: String,
}

/// A command other than serving.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::Subcommand)]
pub(crate) enum Command {
    /// Print what the store sweep would do now, removing nothing: every user, policy and tagged bucket this provisioner made in each class's store, with its owner's UID and whether that owner lives (read from the API: needs the controller's list permissions). Flags before `audit` configure it as they configure serving (--provisioner-name, --namespaces, --cosi, --cosi-driver-name, --orphan-grace-seconds). Exit code 0 whatever it finds.
    Audit {
        /// One JSON document instead of a table.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(super) enum CosiArg {
    /// When COSI's CRDs are installed.
    Auto,
    /// Always (COSI's CRDs must be installed).
    On,
    /// Never.
    Off,
}

impl From<CosiArg> for CosiMode {
    fn from(arg: CosiArg) -> Self {
        match arg {
            CosiArg::Auto => CosiMode::Auto,
            CosiArg::On => CosiMode::On,
            CosiArg::Off => CosiMode::Off,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(super) enum EventsArg {
    /// Every transition and every problem.
    All,
    /// Problems only.
    Warnings,
}

impl From<EventsArg> for lib_provisioner::EventLevel {
    fn from(arg: EventsArg) -> Self {
        match arg {
            EventsArg::All => Self::All,
            EventsArg::Warnings => Self::WarningsOnly,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(super) enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

impl Cli {
    pub(super) fn namespaces(&self) -> Vec<String> {
        self.namespaces
            .iter()
            .map(|n| n.trim())
            .filter(|n| !n.is_empty())
            .map(str::to_owned)
            .collect()
    }

    pub(super) fn lease_name(&self) -> String {
        self.lease_name
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| names::provisioner_label_value(&self.provisioner_name))
    }

    pub(super) fn identity(&self) -> String {
        self.identity
            .clone()
            .filter(|i| !i.is_empty())
            .or_else(|| {
                hostname::get()
                    .ok()
                    .and_then(|h| h.into_string().ok())
                    .filter(|h| !h.is_empty())
            })
            .unwrap_or_else(random_identity)
    }

    /// Checks what clap cannot.
    pub(crate) fn validate(&self) -> Result<(), String> {
        if self.provisioner_name.trim().is_empty() {
            return Err("--provisioner-name must not be empty".into());
        }
        self.cosi_options()
            .map_err(|e| format!("--cosi-driver-name (OBC_COSI_DRIVER_NAME): {e}"))?;
        if self.cosi == CosiArg::On && self.cosi_driver {
            return Err("--cosi=on and --cosi-driver both serve COSI's Buckets and BucketAccesses: with the gRPC driver (for upstream's sidecar) use --cosi=off or auto".into());
        }
        Ok(())
    }

    /// The COSI driver and roles, if COSI is served.
    pub(super) fn cosi_options(&self) -> Result<CosiOptions, InvalidDriverName> {
        let options = CosiOptions::new(self.cosi_driver_name.trim())?;
        Ok(if self.cosi_binding {
            options
        } else {
            options.without_binding()
        })
    }
}

/// Checks `--cosi-endpoint` as COSI does: unix:// and a path ending in .sock.
fn cosi_socket(raw: &str) -> Result<PathBuf, String> {
    lib_provisioner::cosi::grpc::socket_path(raw.trim()).map_err(|e| e.to_string())
}

/// Checks `--state-bucket` against the S3 bucket naming rules.
fn state_bucket_name(raw: &str) -> Result<String, String> {
    let name = raw.trim();
    names::validate_bucket_name(name)?;
    Ok(name.to_owned())
}

/// A Lease identity for when there is neither `--identity` nor a host name.
fn random_identity() -> String {
    use rand::Rng;
    use rand::distr::Alphanumeric;
    let suffix: String = rand::rng()
        .sample_iter(&Alphanumeric)
        .take(8)
        .map(|b| char::from(b).to_ascii_lowercase())
        .collect();
    format!("sample-provisioner-{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn parse(args: &[&str]) -> Cli {
        let mut argv = vec!["sample-provisioner"];
        argv.extend_from_slice(args);
        Cli::try_parse_from(argv).expect("parses")
    }

    #[test]
    fn command_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn defaults() {
        // The environment of the test process could set the env fallbacks;
        // only assert what no test environment sets.
        let cli = parse(&["--provisioner-name", "objectbucket.io/sample-s3"]);
        assert_eq!(cli.lease_name(), "objectbucket.io-sample-s3");
        assert_eq!(cli.concurrency, 4);
        assert_eq!(cli.events, EventsArg::All);
        assert!(cli.leader_elect);
        assert!(!cli.no_metrics);
        assert_eq!(cli.metrics_addr.to_string(), "0.0.0.0:8080");
        assert!(!cli.identity().is_empty());
    }

    #[test]
    fn state_bucket_is_a_checked_bucket_name() {
        let cli = parse(&["--state-bucket", "my-obc-state"]);
        assert_eq!(cli.state_bucket, "my-obc-state");
        assert_eq!(
            state_bucket_name(sample_provisioner::store::DEFAULT_STATE_BUCKET).as_deref(),
            Ok("obc-provisioner-state")
        );
        for bad in ["", "ab", "Upper-Case", "under_score", "-dash-first"] {
            let argv = ["sample-provisioner", "--state-bucket", bad];
            assert!(Cli::try_parse_from(argv).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn namespaces_are_a_comma_list_and_empty_means_all() {
        let cli = parse(&["--namespaces", "team-a, team-b,,"]);
        assert_eq!(cli.namespaces(), ["team-a", "team-b"]);
        let cli = parse(&["--namespaces", ""]);
        assert!(cli.namespaces().is_empty());
    }

    #[test]
    fn leader_elect_takes_a_bool() {
        assert!(!parse(&["--leader-elect=false"]).leader_elect);
        assert!(!parse(&["--leader-elect", "false"]).leader_elect);
        assert!(parse(&["--leader-elect"]).leader_elect);
    }

    #[test]
    fn bad_values_are_refused() {
        for args in [
            &["--lease-duration-seconds", "1"][..],
            &["--log-format", "xml"],
            &["--metrics-addr", "8080"],
            &["--concurrency", "-1"],
        ] {
            let mut argv = vec!["sample-provisioner"];
            argv.extend_from_slice(args);
            assert!(Cli::try_parse_from(argv).is_err(), "{args:?}");
        }
        assert!(parse(&["--provisioner-name", " "]).validate().is_err());
    }

    #[test]
    fn cosi_is_auto_with_the_default_driver_and_binding_on() {
        let cli = parse(&[]);
        assert_eq!(cli.cosi, CosiArg::Auto);
        let options = cli.cosi_options().expect("default driver");
        assert_eq!(options.driver_name(), "sample-s3.objectbucket.io");
        assert!(options.binding());
        let cli = parse(&[
            "--cosi=off",
            "--cosi-binding=false",
            "--cosi-driver-name",
            "s3.example.com",
        ]);
        assert_eq!(CosiMode::from(cli.cosi), CosiMode::Off);
        let options = cli.cosi_options().expect("driver");
        assert_eq!(options.driver_name(), "s3.example.com");
        assert!(!options.binding());
        assert!(parse(&["--cosi=on"]).cosi == CosiArg::On);
    }

    #[test]
    fn a_driver_name_cosi_refuses_is_a_usage_error() {
        let err = parse(&["--cosi-driver-name", "objectbucket.io/sample-s3"])
            .validate()
            .expect_err("a '/' in a driver name");
        assert!(err.contains("--cosi-driver-name"), "{err}");
        assert!(Cli::try_parse_from(["sample-provisioner", "--cosi", "maybe"]).is_err());
        let both = parse(&["--cosi=on", "--cosi-driver"]).validate();
        assert!(both.is_err_and(|e| e.contains("--cosi=off")));
        assert!(parse(&["--cosi-driver"]).validate().is_ok());
    }

    #[test]
    fn the_cosi_endpoint_is_a_unix_socket_ending_in_sock() {
        let cli = parse(&[
            "--cosi-driver",
            "--cosi-endpoint",
            "unix:///run/cosi/driver.sock",
        ]);
        assert!(cli.cosi_driver);
        assert_eq!(cli.cosi_endpoint, PathBuf::from("/run/cosi/driver.sock"));
        for bad in [
            "tcp://127.0.0.1:9000",
            "unix:///run/cosi/driver",
            "/run/x.sock",
        ] {
            let argv = ["sample-provisioner", "--cosi-endpoint", bad];
            assert!(Cli::try_parse_from(argv).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn explicit_lease_name_and_identity_win() {
        let cli = parse(&["--lease-name", "my-lease", "--identity", "pod-a"]);
        assert_eq!(cli.lease_name(), "my-lease");
        assert_eq!(cli.identity(), "pod-a");
    }

    #[test]
    fn random_identities_are_valid_names() {
        let id = random_identity();
        assert!(
            id.starts_with("sample-provisioner-") && id.len() == 27,
            "{id}"
        );
        assert!(
            id.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        );
    }
}
