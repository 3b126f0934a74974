//! A leader cut off from the apiserver, not from its store (issue 25, item
//! 8): its connection to the apiserver hangs (a proxy that accepts bytes
//! and forwards nothing), so its lease renewals never answer, while a
//! provisioner call of its is in flight. Once its lease would run out it
//! must have stopped: the in-flight call abandoned at the deadline, no call
//! and no request after it; the standby takes over and binds what was
//! created meanwhile.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, ensure};
use async_trait::async_trait;
use lib_provisioner::api::{ClaimPhase, ObjectBucketClaimSpec};
use lib_provisioner::{
    BucketAccess, BucketRequest, ControllerBuilder, ProvisionError, Provisioner, RunError,
    TeardownRequest,
};
use obc_tests::TestEnv;
use obc_tests::lease::TestLease;
use obc_tests::recording::{
    PROVISIONER, Recorder, RunningController, create_claim, create_class, wait_phase,
};
use obc_tests::setup::start_with_crds;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const T: Duration = Duration::from_secs(30);
const SYSTEM: &str = "partition-system";
const LEASE_NAME: &str = "partition";
const LEASE: Duration = Duration::from_secs(6);
const RENEW: Duration = Duration::from_secs(2);
/// Scheduling slack on a loaded 2-core machine.
const SLACK: Duration = Duration::from_millis(700);

const LEASE_OF: TestLease = TestLease {
    namespace: SYSTEM,
    name: LEASE_NAME,
    duration: LEASE,
};

/// A TCP proxy to the apiserver that can be made to hang: accept every
/// byte from either side and forward none (a partition that leaves
/// connections open, as a dead NAT entry or a stuck load balancer does).
struct HangingProxy {
    addr: SocketAddr,
    hanging: Arc<AtomicBool>,
    /// What the leader sent while the proxy hung: when, and how many bytes.
    sent_while_hanging: Sent,
    task: tokio::task::JoinHandle<()>,
}

impl HangingProxy {
    async fn start(upstream: SocketAddr) -> Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let hanging = Arc::new(AtomicBool::new(false));
        let last = Sent::default();
        let (h, l) = (hanging.clone(), last.clone());
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let (h, l) = (h.clone(), l.clone());
                tokio::spawn(async move {
                    let Ok(server) = TcpStream::connect(upstream).await else {
                        return;
                    };
                    let (cr, cw) = client.into_split();
                    let (sr, sw) = server.into_split();
                    tokio::join!(pump(cr, sw, h.clone(), Some(l)), pump(sr, cw, h, None));
                });
            }
        });
        Ok(Self {
            addr,
            hanging,
            sent_while_hanging: last,
            task,
        })
    }

    fn hang(&self) {
        self.hanging.store(true, Ordering::SeqCst);
    }

    /// The chunks the leader sent after `t`, while the proxy hung.
    fn sent_after(&self, t: Instant) -> Vec<(Instant, usize)> {
        let sent = self
            .sent_while_hanging
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        sent.iter().copied().filter(|(at, _)| *at > t).collect()
    }
}

impl Drop for HangingProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

type Sent = Arc<Mutex<Vec<(Instant, usize)>>>;

/// Larger than a TLS record closing a connection (close_notify: 24 bytes
/// in TLS 1.3), smaller than any HTTP request.
const CLOSE_RECORD_MAX: usize = 64;

async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    hanging: Arc<AtomicBool>,
    sent: Option<Sent>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if hanging.load(Ordering::SeqCst) {
            if let Some(sent) = &sent {
                sent.lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push((Instant::now(), n));
            }
            continue;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

/// One provisioner call of the leader: when it started, and when it ended
/// (`completed`: answered, else abandoned by the library).
#[derive(Clone, Debug)]
struct CallSpan {
    bucket: String,
    started: Instant,
    ended: Option<(Instant, bool)>,
}

/// Wraps the recording provisioner and notes every call's span, abandoned
/// ones included (their future is dropped mid-way).
#[derive(Clone, Default)]
struct Spans {
    inner: Recorder,
    spans: Arc<Mutex<Vec<CallSpan>>>,
}

struct SpanGuard {
    spans: Arc<Mutex<Vec<CallSpan>>>,
    index: usize,
    completed: bool,
}

impl Drop for SpanGuard {
    fn drop(&mut self) {
        let mut spans = self.spans.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(span) = spans.get_mut(self.index) {
            span.ended = Some((Instant::now(), self.completed));
        }
    }
}

impl Spans {
    fn begin(&self, bucket: &str) -> SpanGuard {
        let mut spans = self.spans.lock().unwrap_or_else(|p| p.into_inner());
        spans.push(CallSpan {
            bucket: bucket.to_owned(),
            started: Instant::now(),
            ended: None,
        });
        SpanGuard {
            spans: self.spans.clone(),
            index: spans.len() - 1,
            completed: false,
        }
    }

    fn spans(&self) -> Vec<CallSpan> {
        self.spans.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

#[async_trait]
impl Provisioner for Spans {
    async fn provision(&self, req: &BucketRequest) -> Result<BucketAccess, ProvisionError> {
        let mut guard = self.begin(&req.bucket_name);
        let result = self.inner.provision(req).await;
        guard.completed = true;
        result
    }
    async fn grant(&self, req: &BucketRequest) -> Result<BucketAccess, ProvisionError> {
        let mut guard = self.begin(&req.bucket_name);
        let result = self.inner.grant(req).await;
        guard.completed = true;
        result
    }
    async fn delete(&self, req: &TeardownRequest) -> Result<(), ProvisionError> {
        let mut guard = self.begin(&req.bucket_name);
        let result = self.inner.delete(req).await;
        guard.completed = true;
        result
    }
    async fn revoke(&self, req: &TeardownRequest) -> Result<(), ProvisionError> {
        let mut guard = self.begin(&req.bucket_name);
        let result = self.inner.revoke(req).await;
        guard.completed = true;
        result
    }
}

fn spec(bucket: &str) -> ObjectBucketClaimSpec {
    ObjectBucketClaimSpec {
        storage_class_name: "delete-class".into(),
        bucket_name: Some(bucket.into()),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_whose_apiserver_connection_hangs_stops_acting_before_the_standby_leads() {
    let env = start_with_crds()
        .await
        .expect("test environment starts with the CRDs");
    partitioned_leader(&env)
        .await
        .expect("the partitioned leader stops in time and the standby takes over");
}

async fn partitioned_leader(env: &TestEnv) -> Result<()> {
    let client = &env.admin_client();
    env.ensure_namespace(SYSTEM).await?;
    env.ensure_namespace("apps").await?;
    create_class(client, "delete-class", "Delete", &[]).await?;
    let upstream: SocketAddr = env
        .apiserver_url()
        .trim_start_matches("https://")
        .parse()
        .context("the apiserver's address")?;
    let proxy = HangingProxy::start(upstream).await?;

    // a leads through the proxy; b stands by on a direct connection.
    let a_calls = Spans::default();
    let a_client = env.admin_client_via(proxy.addr, "leader-via-proxy").await?;
    let a = tokio::spawn(
        ControllerBuilder::new(PROVISIONER, a_calls.clone())
            .leader_election(LEASE_OF.election("a"))
            .backoff(Duration::from_millis(200), Duration::from_secs(1))
            .run(a_client, futures::future::pending()),
    );
    LEASE_OF.wait_holder(client, "a", T).await?;
    let b_calls = Recorder::default();
    let b = RunningController::start_with(
        client.clone(),
        ControllerBuilder::new(PROVISIONER, b_calls.clone())
            .leader_election(LEASE_OF.election("b")),
    );
    create_claim(client, "apps", "before", spec("before-bucket")).await?;
    wait_phase(client, "apps", "before", ClaimPhase::Bound, T).await?;

    // a's store hangs a call; while it is in flight, a's apiserver
    // connection hangs too (its store connection does not matter here:
    // the call is the store's, under a's control).
    a_calls.inner.hang();
    create_claim(client, "apps", "inflight", spec("inflight-bucket")).await?;
    obc_tests::wait_for(T, "a's provisioner call to be in flight", || async {
        Ok((a_calls.inner.hung() >= 1).then_some(()))
    })
    .await?;
    proxy.hang();
    let cut = Instant::now();
    create_claim(client, "apps", "meanwhile", spec("meanwhile-bucket")).await?;

    // a renewed at most once after `cut`'s last answer: its lease ends no
    // later than a lease (minus its margin) after the cut.
    let deadline = cut + LEASE - RENEW / 2;
    let exited = tokio::time::timeout(LEASE + RENEW, a).await;
    let exit_time = Instant::now();
    let outcome = match exited {
        Ok(joined) => joined.context("a's controller task")?,
        Err(_) => anyhow::bail!(
            "a did not stop within {:?} of its apiserver connection hanging (its lease ran out at most {:?} after it)",
            LEASE + RENEW,
            LEASE - RENEW / 2
        ),
    };
    ensure!(
        matches!(outcome, Err(RunError::LostLease(_))),
        "a stopped with {outcome:?}, not for its lost lease"
    );
    ensure!(
        exit_time <= deadline + SLACK,
        "a stopped {:?} after the cut, past its lease's end ({:?})",
        exit_time - cut,
        LEASE - RENEW / 2
    );

    // The standby takes over and binds both claims: the one a's call was
    // abandoned for, and the one created while a was cut off.
    LEASE_OF.wait_holder(client, "b", T).await?;
    wait_phase(client, "apps", "meanwhile", ClaimPhase::Bound, T).await?;
    wait_phase(client, "apps", "inflight", ClaimPhase::Bound, T).await?;
    let takeover = cut.elapsed();

    // a's in-flight call was abandoned at the deadline, not at the
    // provisioner timeout (60 s); a started no call after it.
    let spans = a_calls.spans();
    let inflight = spans
        .iter()
        .find(|s| s.bucket == "inflight-bucket")
        .context("a's call for inflight-bucket")?;
    let (ended, completed) = inflight
        .ended
        .context("a's in-flight call is still running after a stopped")?;
    ensure!(!completed, "a's in-flight call completed: {inflight:?}");
    ensure!(
        ended <= deadline + SLACK,
        "a's in-flight call was abandoned {:?} after the cut, past its lease's end ({:?})",
        ended - cut,
        LEASE - RENEW / 2
    );
    let late: Vec<&CallSpan> = spans.iter().filter(|s| s.started > deadline).collect();
    ensure!(
        late.is_empty(),
        "a called its provisioner after its lease ran out: {late:?}"
    );
    // Nothing but its connections' closing left a after it stopped: no
    // write, no renewal, no read.
    let stopped = exit_time.min(deadline);
    let after: Vec<(Duration, usize)> = proxy
        .sent_after(stopped)
        .into_iter()
        .map(|(at, n)| (at - stopped, n))
        .collect();
    ensure!(
        after.iter().all(|(_, n)| *n <= CLOSE_RECORD_MAX),
        "a sent requests to the apiserver after its lease ran out or it stopped (after, bytes): {after:?}"
    );
    ensure!(
        b_calls.count(
            |c| matches!(c, obc_tests::recording::Call::Provision(b) if b == "meanwhile-bucket")
        ) >= 1,
        "the standby did not provision the claim created meanwhile"
    );
    eprintln!(
        "a stopped {:.2} s after the cut (lease {:.0} s); its in-flight call was abandoned {:.2} s after the cut; b bound both claims {:.2} s after the cut",
        (exit_time - cut).as_secs_f64(),
        LEASE.as_secs_f64(),
        (ended - cut).as_secs_f64(),
        takeover.as_secs_f64()
    );
    b.stop().await?;
    Ok(())
}
