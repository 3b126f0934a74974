//! One watch per COSI kind (and on Secrets): when each object first showed
//! ready (`status.readyToUse`, or simply existing for a Secret) and when it
//! went, so that latencies include the watch delivery to the benchmark, as
//! the OBC phases' do, and no GET of the benchmark's disturbs the request
//! counts.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use tokio::sync::watch;

/// What counts as ready for a kind.
#[derive(Clone, Copy)]
pub enum Ready {
    /// `status.readyToUse` is true.
    Status,
    /// The object exists.
    Exists,
}

#[derive(Default)]
struct State {
    /// `ns/name` -> when first seen ready.
    ready: HashMap<String, Instant>,
    /// `ns/name` -> when seen deleted.
    gone: HashMap<String, Instant>,
    /// `ns/name` of the objects that exist now.
    live: HashSet<String>,
}

/// Watches one kind in every namespace.
pub struct Track {
    what: String,
    state: Mutex<State>,
    changed: watch::Sender<u64>,
    task: std::sync::OnceLock<tokio::task::AbortHandle>,
}

fn key(ns: &str, name: &str) -> String {
    format!("{ns}/{name}")
}

impl Track {
    /// Starts the watch; returns once its initial list is done.
    pub async fn spawn(client: Client, ar: ApiResource, ready: Ready) -> Result<Arc<Self>> {
        let (tx, _) = watch::channel(0u64);
        let track = Arc::new(Self {
            what: ar.plural.clone(),
            state: Mutex::new(State::default()),
            changed: tx,
            task: std::sync::OnceLock::new(),
        });
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let t = track.clone();
        let task = tokio::spawn(async move {
            let api: Api<DynamicObject> = Api::all_with(client, &ar);
            let mut events = watcher(api, watcher::Config::default())
                .default_backoff()
                .boxed();
            let mut ready_tx = Some(ready_tx);
            while let Some(event) = events.next().await {
                let now = Instant::now();
                match event {
                    Ok(watcher::Event::Apply(o)) | Ok(watcher::Event::InitApply(o)) => {
                        t.saw(&o, now, ready, false)
                    }
                    Ok(watcher::Event::Delete(o)) => t.saw(&o, now, ready, true),
                    Ok(watcher::Event::InitDone) => {
                        if let Some(r) = ready_tx.take() {
                            let _ = r.send(());
                        }
                    }
                    Ok(watcher::Event::Init) => {}
                    Err(e) => tracing::warn!(error = %e, "COSI watch failed; retrying"),
                }
                t.changed.send_modify(|n| *n += 1);
            }
        });
        let _ = track.task.set(task.abort_handle());
        tokio::time::timeout(Duration::from_secs(30), ready_rx)
            .await
            .context("a COSI watch did not list in 30 s")?
            .context("a COSI watch stopped")?;
        Ok(track)
    }

    /// Stops the watch.
    pub fn stop(&self) {
        if let Some(task) = self.task.get() {
            task.abort();
        }
    }

    fn saw(&self, o: &DynamicObject, now: Instant, ready: Ready, deleted: bool) {
        let k = key(&o.namespace().unwrap_or_default(), &o.name_any());
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if deleted {
            s.live.remove(&k);
            s.gone.insert(k, now);
            return;
        }
        s.live.insert(k.clone());
        s.gone.remove(&k);
        let is_ready = match ready {
            Ready::Exists => true,
            Ready::Status => o.data["status"]["readyToUse"].as_bool() == Some(true),
        };
        if is_ready {
            s.ready.entry(k).or_insert(now);
        }
    }

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
                Ok(Err(_)) => bail!("the {} watch stopped while waiting for {what}", self.what),
                Err(_) => bail!("timed out after {timeout:?} waiting for {what}"),
            }
        }
    }

    /// When `ns/name` was first seen ready.
    pub async fn ready(&self, ns: &str, name: &str, timeout: Duration) -> Result<Instant> {
        let k = key(ns, name);
        let what = format!("{} {k} to be ready", self.what);
        self.wait(timeout, &what, |s| s.ready.get(&k).copied())
            .await
    }

    /// When `ns/name` was seen deleted.
    pub async fn gone(&self, ns: &str, name: &str, timeout: Duration) -> Result<Instant> {
        let k = key(ns, name);
        let what = format!("{} {k} to be deleted", self.what);
        self.wait(timeout, &what, |s| s.gone.get(&k).copied()).await
    }

    /// When the last of `names` in `ns` was first seen ready.
    pub async fn all_ready(
        &self,
        ns: &str,
        names: &[String],
        timeout: Duration,
    ) -> Result<Instant> {
        let keys: Vec<String> = names.iter().map(|n| key(ns, n)).collect();
        let what = format!("{} {} of {ns} to be ready", names.len(), self.what);
        self.wait(timeout, &what, |s| {
            keys.iter()
                .map(|k| s.ready.get(k).copied())
                .collect::<Option<Vec<_>>>()
                .and_then(|v| v.into_iter().max())
        })
        .await
    }

    /// When the last object of `ns` (and of `prefix`, for cluster-scoped
    /// kinds: `ns` empty) went; now if none is there.
    pub async fn none_left(&self, ns: &str, prefix: &str, timeout: Duration) -> Result<Instant> {
        let start = format!("{ns}/{prefix}");
        let what = format!("every {} under {start} to be deleted", self.what);
        let got = self
            .wait(timeout, &what, |s| {
                let left = s.live.iter().any(|k| k.starts_with(&start));
                (!left).then(|| {
                    s.gone
                        .iter()
                        .filter(|(k, _)| k.starts_with(&start))
                        .map(|(_, t)| *t)
                        .max()
                        .unwrap_or_else(Instant::now)
                })
            })
            .await;
        got.with_context(|| format!("left: {:?}", self.live(ns, prefix)))
    }

    /// The objects of `ns` (starting with `prefix`) that exist now.
    pub fn live(&self, ns: &str, prefix: &str) -> Vec<String> {
        let start = format!("{ns}/{prefix}");
        let s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let mut v: Vec<String> = s
            .live
            .iter()
            .filter(|k| k.starts_with(&start))
            .cloned()
            .collect();
        v.sort();
        v
    }
}
