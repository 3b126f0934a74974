//! Creating claims and seeing them bound or gone, through one watch.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use lib_provisioner::api::{ClaimPhase, ObjectBucketClaim, ObjectBucketClaimSpec};
use tokio::sync::watch;

/// The StorageClass every benchmark claim names.
pub const CLASS: &str = "bench";

#[derive(Default)]
struct State {
    /// `ns/name` -> when the watch first showed it Bound.
    bound: HashMap<String, Instant>,
    /// namespace -> the instants at which its claims became Bound, in order.
    bound_in: HashMap<String, Vec<Instant>>,
    /// `ns/name` -> when the watch showed it deleted.
    gone: HashMap<String, Instant>,
    gone_in: HashMap<String, Vec<Instant>>,
}

/// Watches every claim; records when each became Bound and when it went.
pub struct Tracker {
    state: Mutex<State>,
    changed: watch::Sender<u64>,
    /// The watch task, stopped before the control plane is: otherwise it
    /// logs the apiserver's shutdown as a watch failure.
    task: std::sync::OnceLock<tokio::task::AbortHandle>,
}

pub fn key(ns: &str, name: &str) -> String {
    format!("{ns}/{name}")
}

impl Tracker {
    /// Starts the watch; returns once its initial list is done.
    pub async fn spawn(client: Client) -> Result<Arc<Self>> {
        let (tx, _) = watch::channel(0u64);
        let tracker = Arc::new(Self {
            state: Mutex::new(State::default()),
            changed: tx,
            task: std::sync::OnceLock::new(),
        });
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let t = tracker.clone();
        let task = tokio::spawn(async move {
            let api: Api<ObjectBucketClaim> = Api::all(client);
            let mut events = watcher(api, watcher::Config::default())
                .default_backoff()
                .boxed();
            let mut ready = Some(ready_tx);
            while let Some(event) = events.next().await {
                let now = Instant::now();
                match event {
                    Ok(watcher::Event::Apply(c)) | Ok(watcher::Event::InitApply(c)) => {
                        t.saw(&c, now, false)
                    }
                    Ok(watcher::Event::Delete(c)) => t.saw(&c, now, true),
                    Ok(watcher::Event::InitDone) => {
                        if let Some(r) = ready.take() {
                            let _ = r.send(());
                        }
                    }
                    Ok(watcher::Event::Init) => {}
                    Err(e) => tracing::warn!(error = %e, "claim watch failed; retrying"),
                }
                t.changed.send_modify(|n| *n += 1);
            }
        });
        let _ = tracker.task.set(task.abort_handle());
        tokio::time::timeout(Duration::from_secs(30), ready_rx)
            .await
            .context("the claim watch did not list in 30 s")?
            .context("the claim watch stopped")?;
        Ok(tracker)
    }

    /// Stops the watch.
    pub fn stop(&self) {
        if let Some(task) = self.task.get() {
            task.abort();
        }
    }

    fn saw(&self, c: &ObjectBucketClaim, now: Instant, deleted: bool) {
        let ns = c.namespace().unwrap_or_default();
        let k = key(&ns, &c.name_any());
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if deleted {
            if s.gone.insert(k, now).is_none() {
                s.gone_in.entry(ns).or_default().push(now);
            }
            return;
        }
        if c.status.as_ref().and_then(|s| s.phase) == Some(ClaimPhase::Bound)
            && !s.bound.contains_key(&k)
        {
            s.bound.insert(k, now);
            s.bound_in.entry(ns).or_default().push(now);
        }
    }

    /// Waits until `check` returns a value, re-checking after every event.
    async fn wait<T>(
        &self,
        timeout: Duration,
        what: &str,
        check: impl Fn(&State) -> Option<T>,
    ) -> Result<T> {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut rx = self.changed.subscribe();
        loop {
            rx.borrow_and_update();
            if let Some(v) = check(&self.state.lock().unwrap_or_else(|p| p.into_inner())) {
                return Ok(v);
            }
            match tokio::time::timeout_at(deadline, rx.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => bail!("the claim watch stopped while waiting for {what}"),
                Err(_) => bail!("timed out after {timeout:?} waiting for {what}"),
            }
        }
    }

    /// When `ns/name` became Bound.
    pub async fn bound(&self, ns: &str, name: &str, timeout: Duration) -> Result<Instant> {
        let k = key(ns, name);
        self.wait(timeout, &format!("{k} to be Bound"), |s| {
            s.bound.get(&k).copied()
        })
        .await
    }

    /// When `ns/name` was deleted.
    pub async fn gone(&self, ns: &str, name: &str, timeout: Duration) -> Result<Instant> {
        let k = key(ns, name);
        self.wait(timeout, &format!("{k} to be deleted"), |s| {
            s.gone.get(&k).copied()
        })
        .await
    }

    /// How many claims of `ns` have become Bound.
    pub fn bound_count(&self, ns: &str) -> usize {
        let s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.bound_in.get(ns).map_or(0, Vec::len)
    }

    /// When the `n`th claim of `ns` became Bound; prints progress every 10 s.
    pub async fn nth_bound(&self, ns: &str, n: usize, timeout: Duration) -> Result<Instant> {
        let started = Instant::now();
        let mut next_report = Duration::from_secs(10);
        let deadline = started + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let step = left.min(next_report.saturating_sub(started.elapsed()));
            match self
                .wait(step, &format!("{n} claims of {ns} to be Bound"), |s| {
                    s.bound_in
                        .get(ns)
                        .filter(|v| v.len() >= n)
                        .map(|v| v[n - 1])
                })
                .await
            {
                Ok(at) => return Ok(at),
                Err(e) if Instant::now() >= deadline => return Err(e),
                Err(_) => {
                    println!(
                        "    ... {}/{n} Bound after {:.0} s",
                        self.bound_count(ns),
                        started.elapsed().as_secs_f64()
                    );
                    next_report += Duration::from_secs(10);
                }
            }
        }
    }
}

pub fn claim(name: &str) -> ObjectBucketClaim {
    ObjectBucketClaim::new(
        name,
        ObjectBucketClaimSpec {
            storage_class_name: CLASS.into(),
            generate_bucket_name: Some("bench".into()),
            ..Default::default()
        },
    )
}

pub fn name(i: usize) -> String {
    format!("c-{i:05}")
}

/// Creates claims `from..to` in `ns`, `parallel` at a time.
pub async fn create_many(
    client: &Client,
    ns: &str,
    from: usize,
    to: usize,
    parallel: usize,
) -> Result<()> {
    let api: Api<ObjectBucketClaim> = Api::namespaced(client.clone(), ns);
    futures::stream::iter(from..to)
        .map(|i| {
            let api = api.clone();
            async move {
                api.create(&PostParams::default(), &claim(&name(i)))
                    .await
                    .with_context(|| format!("creating claim {ns}/{}", name(i)))
            }
        })
        .buffer_unordered(parallel)
        .try_for_each(|_| async { Ok(()) })
        .await
}

pub async fn create(client: &Client, ns: &str, name: &str) -> Result<()> {
    Api::<ObjectBucketClaim>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &claim(name))
        .await
        .with_context(|| format!("creating claim {ns}/{name}"))?;
    Ok(())
}

pub async fn delete(client: &Client, ns: &str, name: &str) -> Result<()> {
    Api::<ObjectBucketClaim>::namespaced(client.clone(), ns)
        .delete(name, &DeleteParams::default())
        .await
        .with_context(|| format!("deleting claim {ns}/{name}"))?;
    Ok(())
}
