//! Calling the provisioner as the library would: under a timeout, retrying
//! retryable errors with backoff, and noting each answer.

use std::future::Future;
use std::time::Duration;

use super::ctx::{Claim, Cleanup, Ctx, Log, Step, fail};
use super::drive::{Driven, drive};
use crate::core::provisioner::{
    BucketAccess, BucketRequest, ErrorKind, ProvisionError, Revocation, RotationRequest,
};
use crate::obc::api::ReclaimPolicy;

/// A successful answer, as the log shows it (never a secret).
pub(crate) trait Shown {
    fn shown(&self) -> String;
}

impl Shown for () {
    fn shown(&self) -> String {
        "Ok".to_owned()
    }
}

impl Shown for BucketAccess {
    fn shown(&self) -> String {
        format!(
            "Ok: access key {} at {}:{}",
            self.credentials.access_key_id, self.endpoint.bucket_host, self.endpoint.bucket_port
        )
    }
}

impl Shown for Revocation {
    fn shown(&self) -> String {
        format!("Ok: the previous key was {self}")
    }
}

/// An error as the log shows it.
pub(crate) fn error_shown(e: &ProvisionError) -> String {
    let kind = match e.kind() {
        ErrorKind::Permanent => "permanent",
        ErrorKind::Retryable => "retryable",
        ErrorKind::Unsupported => "unsupported",
    };
    format!("{kind} error: {}", e.message())
}

/// The backoff before attempt `attempt + 1`, at least what the error asked.
fn backoff(attempt: u32, e: &ProvisionError) -> Duration {
    let ours = Duration::from_millis(100 * 2u64.pow(attempt.min(5)));
    let asked = e
        .retry_after()
        .unwrap_or_default()
        .min(Duration::from_secs(5));
    ours.max(asked)
}

impl Ctx {
    /// Calls `f` until it answers other than retryable (at most
    /// `attempts` times), noting each answer under `what`.
    pub(crate) async fn call<T, F, Fut>(
        &self,
        log: &mut Log,
        what: &str,
        f: F,
    ) -> Result<T, ProvisionError>
    where
        T: Shown,
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, ProvisionError>>,
    {
        log.checking(format!(
            "{what} succeeds (retryable errors retried {} times, as the library would)",
            self.settings.attempts
        ));
        let s = &self.settings;
        let mut attempt = 1;
        loop {
            let last = attempt >= s.attempts;
            let answer = match drive(f(), None, s.settle, s.call_timeout).await {
                Driven::Done { output, .. } => output,
                Driven::TimedOut { .. } | Driven::Abandoned { .. } => {
                    Err(ProvisionError::retryable(format!(
                        "did not answer within {:?} (the call was dropped, as the library's timeout drops it)",
                        s.call_timeout
                    )))
                }
            };
            match answer {
                Ok(v) => {
                    log.note(format!("{what} → {}", v.shown()));
                    return Ok(v);
                }
                Err(e) if e.is_retryable() && !last => {
                    log.note(format!("{what} → {}; retrying", error_shown(&e)));
                    tokio::time::sleep(backoff(attempt, &e)).await;
                    attempt += 1;
                }
                Err(e) => {
                    log.note(format!("{what} → {}", error_shown(&e)));
                    return Err(e);
                }
            }
        }
    }

    /// [`call`](Self::call), which must succeed: otherwise the scenario
    /// fails saying `what` failed and how.
    pub(crate) async fn must<T, F, Fut>(&self, log: &mut Log, what: &str, f: F) -> Step<T>
    where
        T: Shown,
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, ProvisionError>>,
    {
        match self.call(log, what, f).await {
            Ok(v) => Ok(v),
            Err(e) if e.is_retryable() => fail(format!(
                "{what} still failed after {} attempts ({}): the claim would never get past it",
                self.settings.attempts,
                error_shown(&e)
            )),
            Err(e) => fail(format!("{what} failed with a {}", error_shown(&e))),
        }
    }

    /// The set-up most scenarios start from: a new claim (`tag`), its
    /// bucket provisioned under reclaim policy Delete, with its teardown
    /// and the credentials it got registered in `undo`.
    pub(crate) async fn provisioned(
        &self,
        tag: &str,
        undo: &mut Cleanup,
        log: &mut Log,
    ) -> Step<(Claim, BucketRequest, BucketAccess)> {
        self.provisioned_under(tag, ReclaimPolicy::Delete, undo, log)
            .await
    }

    /// As [`provisioned`](Self::provisioned), under reclaim policy Retain:
    /// the bucket outlives its teardown, so `undo` also removes it through
    /// the probe.
    pub(crate) async fn provisioned_retained(
        &self,
        tag: &str,
        undo: &mut Cleanup,
        log: &mut Log,
    ) -> Step<(Claim, BucketAccess)> {
        let (claim, _, access) = self
            .provisioned_under(tag, ReclaimPolicy::Retain, undo, log)
            .await?;
        Ok((claim, access))
    }

    async fn provisioned_under(
        &self,
        tag: &str,
        policy: ReclaimPolicy,
        undo: &mut Cleanup,
        log: &mut Log,
    ) -> Step<(Claim, BucketRequest, BucketAccess)> {
        let claim = self.claim(tag);
        let req = self.request(&claim, policy);
        let what = match policy {
            ReclaimPolicy::Retain => {
                undo.remove_bucket(&claim.bucket);
                format!("provision {} under Retain", claim.bucket)
            }
            ReclaimPolicy::Delete => format!("provision {}", claim.bucket),
        };
        undo.delete(self.teardown(&claim, None, ReclaimPolicy::Delete, true));
        let access = self
            .must(log, &what, || self.provisioner.provision(&req))
            .await?;
        undo.record(&claim.identity.uid, &access);
        Ok((claim, req, access))
    }

    /// `revoke_previous_key`, as the library calls it after a rotation
    /// (its default calls `revoke_previous`), which must succeed.
    pub(crate) async fn revoke_previous_key(
        &self,
        log: &mut Log,
        what: &str,
        rot: &RotationRequest,
    ) -> Step<Revocation> {
        let p = &self.provisioner;
        self.must(log, what, || p.revoke_previous_key(rot)).await
    }

    /// After `revocation` of `old`'s key: it reaches nothing on `bucket`,
    /// unless the provisioner said it kept it (which the library shows the
    /// user as `CredentialsRotated=False`, and the report as not verified).
    pub(crate) async fn expect_previous_revoked(
        &self,
        log: &mut Log,
        revocation: &Revocation,
        old: &BucketAccess,
        bucket: &str,
    ) -> Step<()> {
        if let Revocation::Kept(why) = revocation {
            log.not_verified(format!(
                "the previous key's revocation after a rotation: revoke_previous_key kept it ({why})"
            ));
            return Ok(());
        }
        self.expect_revoked(log, old, bucket, "the previous credentials")
            .await
    }

    /// This run's rotation of `req` away from `old`'s key.
    pub(crate) fn rotation(&self, req: &BucketRequest, old: &BucketAccess) -> RotationRequest {
        RotationRequest::new(
            req.clone(),
            format!("kit-{}", self.run),
            &old.credentials.access_key_id,
        )
        .with_state(old.additional_state.clone())
    }

    /// [`call`](Self::call), which must be refused with a permanent error:
    /// `Ok(Err(refusal))` when it was, `Ok(Ok(answer))` when it was not
    /// (the caller cleans it up and fails, saying what was handed out).
    pub(crate) async fn refused<T, F, Fut>(
        &self,
        log: &mut Log,
        what: &str,
        f: F,
    ) -> Step<Result<T, ProvisionError>>
    where
        T: Shown,
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, ProvisionError>>,
    {
        let answer = self.call(log, what, f).await;
        log.checking(format!("{what} is refused with a permanent error"));
        match answer {
            Ok(v) => Ok(Ok(v)),
            Err(e) if e.kind() == ErrorKind::Permanent => Ok(Err(e)),
            Err(e) if e.is_retryable() => fail(format!(
                "{what} answered a retryable error {} times ({}): the library would retry it forever and the claim would stay Pending; a request that cannot succeed as written is a permanent error",
                self.settings.attempts,
                e.message()
            )),
            Err(e) => fail(format!(
                "{what} answered an {}: a refusal is a permanent error, saying what the user can change",
                error_shown(&e)
            )),
        }
    }
}
