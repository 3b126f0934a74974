//! Prometheus metrics.
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `obc_reconciles_total` | counter | `result` (`ok`, or the error kind) |
//! | `obc_reconcile_duration_seconds` | histogram | |
//! | `obc_conflicts_total` | counter | (409s a pass absorbed by re-reading the claim) |
//! | `obc_provisioner_operations_total` | counter | `operation`, `result` |
//! | `obc_provisioner_operation_duration_seconds` | histogram | `operation` |
//! | `obc_claims` | gauge | `phase` (from the claim cache at scrape time; registered by the OBC family's controllers) |
//! | `obc_leader` | gauge | (1 while this replica leads, or runs without leader election; 0 while it stands by) |
//! | `obc_store_orphans` | gauge | `store`, `kind` (things without a live owner the last sweep found) |
//! | `obc_sweep_removals_total` | counter | `kind`, `result` (`removed`, `failed`) |
//! | `obc_sweep_class_swept` | gauge | `class` (1: its store was listed in the last sweep; 0: the provisioner could not list it) |
//!
//! ```
//! let metrics = lib_provisioner::metrics::Metrics::new();
//! assert!(metrics.render().contains("obc_leader 0"));
//! ```

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::core::error::Error;

type Labels = Vec<(&'static str, String)>;

/// The controller's metrics and their registry.
pub struct Metrics {
    registry: Registry,
    gauges: Arc<RwLock<Vec<Box<dyn CacheGauge>>>>,
    reconciles: Family<Labels, Counter>,
    bucket_reconciles: Family<Labels, Counter>,
    bucket_reconcile_duration: Histogram,
    reconcile_duration: Histogram,
    conflicts: Counter,
    operations: Family<Labels, Counter>,
    operation_duration: Family<Labels, Histogram>,
    leader: Gauge,
    store_orphans: Family<Labels, Gauge>,
    sweep_removals: Family<Labels, Counter>,
    class_swept: Family<Labels, Gauge>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

fn duration_histogram() -> Histogram {
    // 1 ms .. ~16 s
    Histogram::new(exponential_buckets(0.001, 2.0, 15))
}

impl Metrics {
    /// A fresh registry with every metric at zero.
    pub fn new() -> Self {
        let gauges = Arc::new(RwLock::new(Vec::new()));
        let mut registry = Registry::default();
        let reconciles = Family::<Labels, Counter>::default();
        let reconcile_duration = duration_histogram();
        let bucket_reconciles = Family::<Labels, Counter>::default();
        let bucket_reconcile_duration = duration_histogram();
        let conflicts = Counter::default();
        let operations = Family::<Labels, Counter>::default();
        let operation_duration = Family::<Labels, Histogram>::new_with_constructor(
            duration_histogram as fn() -> Histogram,
        );
        registry.register(
            "obc_reconciles",
            "Claim reconciles by result",
            reconciles.clone(),
        );
        registry.register(
            "obc_reconcile_duration_seconds",
            "Time a claim reconcile took",
            reconcile_duration.clone(),
        );
        registry.register(
            "obc_bucket_reconciles",
            "ObjectBucket reconciles (orphans, released buckets) by result",
            bucket_reconciles.clone(),
        );
        registry.register(
            "obc_bucket_reconcile_duration_seconds",
            "Time an ObjectBucket reconcile took",
            bucket_reconcile_duration.clone(),
        );
        registry.register(
            "obc_conflicts",
            "Conflicts (HTTP 409) a claim pass absorbed by re-reading the claim",
            conflicts.clone(),
        );
        registry.register(
            "obc_provisioner_operations",
            "Provisioner calls by operation and result",
            operations.clone(),
        );
        registry.register(
            "obc_provisioner_operation_duration_seconds",
            "Time provisioner calls took",
            operation_duration.clone(),
        );
        let leader = Gauge::default();
        registry.register(
            "obc_leader",
            "1 while this replica leads (or runs without leader election), 0 while it stands by",
            leader.clone(),
        );
        let store_orphans = Family::<Labels, Gauge>::default();
        registry.register(
            "obc_store_orphans",
            "Things in a store without a live owner, by store and kind, as the last sweep found them",
            store_orphans.clone(),
        );
        let sweep_removals = Family::<Labels, Counter>::default();
        registry.register(
            "obc_sweep_removals",
            "Orphans the sweep removed, or failed to remove, by kind",
            sweep_removals.clone(),
        );
        let class_swept = Family::<Labels, Gauge>::default();
        registry.register(
            "obc_sweep_class_swept",
            "1 if the last sweep listed the store of this class, 0 if its provisioner could not",
            class_swept.clone(),
        );
        registry.register_collector(Box::new(CacheGauges(gauges.clone())));
        Self {
            gauges,
            registry,
            reconciles,
            bucket_reconciles,
            bucket_reconcile_duration,
            reconcile_duration,
            conflicts,
            operations,
            operation_duration,
            leader,
            store_orphans,
            sweep_removals,
            class_swept,
        }
    }

    /// Adds a gauge read from a cache at scrape time (a family's objects
    /// by phase, say).
    pub(crate) fn add_gauge(&self, gauge: impl CacheGauge) {
        self.gauges
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .push(Box::new(gauge));
    }

    pub(crate) fn reconciled(&self, took: Duration, error: Option<&Error>) {
        let result = error.map_or("ok", Error::kind);
        self.reconciles
            .get_or_create(&vec![("result", result.to_owned())])
            .inc();
        self.reconcile_duration.observe(took.as_secs_f64());
    }

    pub(crate) fn bucket_reconciled(&self, took: Duration, error: Option<&Error>) {
        let result = error.map_or("ok", Error::kind);
        self.bucket_reconciles
            .get_or_create(&vec![("result", result.to_owned())])
            .inc();
        self.bucket_reconcile_duration.observe(took.as_secs_f64());
    }

    /// Sets `obc_leader`.
    pub(crate) fn leading(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }

    /// The gauges from one sweep's plan (stores and classes no longer
    /// listed disappear).
    pub(crate) fn swept(&self, plan: &crate::core::sweep::SweepPlan) {
        self.store_orphans.clear();
        for ((store, kind), count) in plan.orphans() {
            self.store_orphans
                .get_or_create(&vec![("store", store), ("kind", kind.to_string())])
                .set(count);
        }
        self.class_swept.clear();
        for class in &plan.swept {
            self.class_swept
                .get_or_create(&vec![("class", class.to_string())])
                .set(1);
        }
        for skipped in &plan.not_swept {
            self.class_swept
                .get_or_create(&vec![("class", skipped.class.to_string())])
                .set(0);
        }
    }

    /// One removal the sweep made or failed.
    pub(crate) fn sweep_removal(&self, kind: crate::core::provisioner::MadeKind, removed: bool) {
        let result = if removed { "removed" } else { "failed" };
        self.sweep_removals
            .get_or_create(&vec![
                ("kind", kind.to_string()),
                ("result", result.to_owned()),
            ])
            .inc();
    }

    pub(crate) fn conflict(&self) {
        self.conflicts.inc();
    }

    pub(crate) fn operation(&self, operation: &'static str, took: Duration, ok: bool) {
        let result = if ok { "ok" } else { "error" };
        self.operations
            .get_or_create(&vec![
                ("operation", operation.to_owned()),
                ("result", result.to_owned()),
            ])
            .inc();
        self.operation_duration
            .get_or_create(&vec![("operation", operation.to_owned())])
            .observe(took.as_secs_f64());
    }

    /// The metrics in the Prometheus text format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

/// A gauge family counted from a cache at scrape time, so it can never
/// drift from the cache.
pub(crate) trait CacheGauge: Send + Sync + 'static {
    /// The metric's name and help text.
    fn describe(&self) -> (&'static str, &'static str);
    /// The label's name, and each label value with its count.
    fn count(&self) -> (&'static str, BTreeMap<&'static str, i64>);
}

/// Every [`CacheGauge`] added, encoded at scrape time.
struct CacheGauges(Arc<RwLock<Vec<Box<dyn CacheGauge>>>>);

impl std::fmt::Debug for CacheGauges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CacheGauges").finish_non_exhaustive()
    }
}

impl Collector for CacheGauges {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let gauges = self.0.read().unwrap_or_else(|p| p.into_inner());
        for gauge in gauges.iter() {
            let (name, help) = gauge.describe();
            let (label, counts) = gauge.count();
            let mut metric = encoder.encode_descriptor(
                name,
                help,
                None,
                prometheus_client::metrics::MetricType::Gauge,
            )?;
            for (value, count) in counts {
                let labels = [(label, value)];
                let family = metric.encode_family(&labels)?;
                ConstGauge::new(count).encode(family)?;
            }
        }
        Ok(())
    }
}
