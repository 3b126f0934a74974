//! The pass every COSI reconcile runs: read the object, take one round
//! (observe, plan, one step), again, until done, halted or held
//! elsewhere; then say when to look again.

use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};

use crate::core::backoff::backoff_key;
use crate::core::error::Error;
use crate::cosi::answer::{self, Taken};
use crate::cosi::context::CosiContext;
use crate::cosi::plan::Next;
use crate::cosi::refusals::REFUSED_RETRY;
use crate::cosi::show::{self, Halt, Shown};
use crate::cosi::writes::{self, Object};

/// Steps one pass may take; more is a bug.
pub(crate) const MAX_STEPS: usize = 24;
/// How often a settled object is looked at again without any event.
pub(crate) const RESYNC: Duration = Duration::from_secs(600);

/// What one round of a pass did.
pub(crate) enum Progress {
    /// Took a step: plan again (on the step's answer, or a GET).
    Stepped,
    /// Nothing left to do.
    Done,
    /// Stopped on a wait or a refusal, shown on the object.
    Halted(Halt),
    /// Stopped on a wait not shown yet ([`Next::Pending`]): again after
    /// this long.
    Pending(Duration),
    /// Another role or process holds the object: wait for a change.
    Elsewhere,
}

/// One kind's pass, as [`run`] drives it; the value keeps what the pass
/// learnt between its rounds.
pub(crate) trait Pass<P>: Default {
    /// The kind.
    type Object: Object + Shown + Send + Sync;
    /// The action of the read that starts each round.
    const READ: &'static str;
    /// The action of the status write that shows a halt.
    const SHOW: &'static str;

    /// Where `obj` is read, written and its halts shown.
    fn api(ctx: &CosiContext<P>, obj: &Self::Object) -> Result<Api<Self::Object>, Error>;

    /// One round on the object as just read.
    fn round(
        &mut self,
        ctx: &CosiContext<P>,
        api: &Api<Self::Object>,
        current: &Self::Object,
    ) -> impl Future<Output = Result<Progress, Error>> + Send;

    /// Where a halt's Event goes, and its note: the object, by default.
    fn event(current: &Self::Object, halt: &Halt) -> (ObjectReference, String) {
        (show::reference(current), halt.message().to_owned())
    }
}

/// Reconciles `obj` with pass `T`, once the caches are ready. The first
/// round plans on `obj`, the cache's copy, where it shows this process's
/// writes; a round after a step that wrote the object on that write's
/// answer ([`crate::cosi::answer`]); a round after a step that did not
/// write it on the copy the step was planned on; any other round on a GET
/// ([`crate::cosi::fresh`]).
pub(crate) async fn run<P, T: Pass<P>>(
    obj: &T::Object,
    ctx: &CosiContext<P>,
) -> Result<Action, Error> {
    answer::scope(obj.uid(), rounds::<P, T>(obj, ctx)).await
}

/// [`run`]'s rounds.
async fn rounds<P, T: Pass<P>>(obj: &T::Object, ctx: &CosiContext<P>) -> Result<Action, Error> {
    ctx.runtime.caches_ready().await;
    let api = T::api(ctx, obj)?;
    let (name, key) = (obj.name_any(), backoff_key(obj));
    if let Err(wait) = ctx.pace.take(&key) {
        // Events come faster than this object's share: once, later, on
        // whatever it is then.
        return Ok(Action::requeue(wait));
    }
    let mut pass = T::default();
    let mut uid = None;
    let mut cached = ctx.own_writes.cache_shows(obj.meta()).then(|| obj.clone());
    // Whether the cache may not show the object as this pass leaves it.
    let mut doubt = cached.is_none();
    for _ in 0..MAX_STEPS {
        let current = match cached.take() {
            Some(current) => current,
            None => match writes::get(&api, &name, T::READ).await? {
                Some(current) => current,
                None => {
                    ctx.own_writes.forget(obj.meta());
                    return Ok(Action::await_change());
                }
            },
        };
        if replaced(&mut uid, current.meta()) {
            // Deleted and re-created under the same name: what this pass
            // learnt (a grant, a revocation) was the old object's.
            pass = T::default();
        }
        let progress = match pass.round(ctx, &api, &current).await {
            // Planned on an older copy (the cache's, or one another writer
            // changed since): plan again on a GET's.
            Err(Error::Conflict { .. }) => {
                let _older: Taken<T::Object> = answer::take();
                doubt = true;
                continue;
            }
            Err(e) => {
                settle(ctx, doubt, current.meta(), None);
                return Err(e);
            }
            Ok(progress) => progress,
        };
        match progress {
            Progress::Stepped => match answer::take() {
                Taken::Answer(answer) => {
                    doubt = true;
                    cached = Some(answer);
                }
                // A provisioner call, or a write of another object: the
                // copy just planned on is as current as it was, unless
                // the object is being deleted, when the other kinds'
                // passes write it too (a claim's releases its Bucket while
                // the Bucket's deletes the bucket): read again.
                Taken::Untouched if current.meta().deletion_timestamp.is_none() => {
                    cached = Some(current);
                }
                // Read again: the GET says it is gone, or how it is now.
                Taken::Gone | Taken::Untouched => doubt = true,
            },
            Progress::Done => {
                settle(ctx, doubt, current.meta(), current.resource_version());
                ctx.backoff.reset(&key);
                return Ok(Action::requeue(RESYNC));
            }
            Progress::Halted(halt) => {
                let event = T::event(&current, &halt);
                let shown = match show::show_halt(ctx, &api, &current, &halt, T::SHOW, event).await
                {
                    // Shown on a fresh copy by the next round.
                    Err(Error::Conflict { .. }) => {
                        doubt = true;
                        continue;
                    }
                    shown => shown?,
                };
                let version = current.resource_version().filter(|_| !shown);
                settle(ctx, doubt || shown, current.meta(), version);
                let after = retry_after(ctx, &key, current.meta(), &halt);
                return Ok(Action::requeue(after));
            }
            Progress::Pending(after) => {
                settle(ctx, doubt, current.meta(), current.resource_version());
                return Ok(Action::requeue(after));
            }
            Progress::Elsewhere => {
                settle(ctx, doubt, current.meta(), current.resource_version());
                return Ok(Action::await_change());
            }
        }
    }
    Err(Error::NoConvergence(MAX_STEPS))
}

/// At a pass's end: where the cache may not show the object as the pass
/// left it, the version it left (`None`: written after the last read), so
/// that the next pass reads it with a GET until the cache shows it.
fn settle<P>(ctx: &CosiContext<P>, doubt: bool, meta: &ObjectMeta, version: Option<String>) {
    if doubt {
        ctx.own_writes.record(meta, version);
    }
}

/// Whether the object read now is another than the one this pass read
/// before (by UID); remembers its UID.
fn replaced(seen: &mut Option<String>, meta: &ObjectMeta) -> bool {
    let other = seen.is_some() && *seen != meta.uid;
    seen.clone_from(&meta.uid);
    other
}

/// The end of a round: the step a plan picked, taken with `execute` while
/// this process leads (a failed provisioner call halts); or, without a
/// step, what the plan said.
pub(crate) async fn take<P, S, F>(
    ctx: &CosiContext<P>,
    next: Next<S>,
    execute: impl FnOnce(S) -> F,
) -> Result<Progress, Error>
where
    F: Future<Output = Result<Option<Halt>, Error>>,
{
    let step = match next {
        Next::Step(step) => step,
        Next::Done => return Ok(Progress::Done),
        Next::Wait(m) => return Ok(Progress::Halted(Halt::Wait(m))),
        Next::Pending(after) => return Ok(Progress::Pending(after)),
        Next::Refuse(m) => return Ok(Progress::Halted(Halt::Refuse(m))),
    };
    ctx.runtime.ensure_leading()?;
    Ok(match execute(step).await? {
        Some(halt) => Progress::Halted(halt),
        None => Progress::Stepped,
    })
}

/// A namespaced kind's API in `obj`'s namespace.
pub(crate) fn namespaced<P, K>(ctx: &CosiContext<P>, obj: &K) -> Result<Api<K>, Error>
where
    K: Object + kube::Resource<Scope = kube::core::NamespaceResourceScope>,
{
    let ns = obj.namespace().ok_or(Error::MissingField("namespace"))?;
    Ok(Api::namespaced(ctx.client.clone(), &ns))
}

/// When to look at a halted object again: a refusal when the provisioner's
/// refusal standing for it ends (slowly, unless hastened), or slowly;
/// waits with the object's backoff.
fn retry_after<P>(ctx: &CosiContext<P>, key: &str, meta: &ObjectMeta, halt: &Halt) -> Duration {
    if halt.is_refusal() {
        // Not sooner than a second: a refusal about to lapse is asked
        // again by the next pass, not by a burst of them.
        let standing = ctx.refusals.retry_in(meta);
        standing.map_or(REFUSED_RETRY, |d| d.max(Duration::from_secs(1)))
    } else {
        ctx.backoff.next(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 36, item 4: a pass's memory (the grant it got, the Secrets it
    /// wrote, its revocation) is the object's it was learnt on, by UID.
    #[test]
    fn a_replacement_under_the_same_name_starts_the_pass_afresh() {
        let meta = |uid: &str| ObjectMeta {
            name: Some("a".into()),
            uid: Some(uid.into()),
            ..Default::default()
        };
        let mut seen = None;
        assert!(!replaced(&mut seen, &meta("u1")), "the first read");
        assert!(!replaced(&mut seen, &meta("u1")), "the same object");
        assert!(replaced(&mut seen, &meta("u2")), "a replacement");
        assert!(!replaced(&mut seen, &meta("u2")));
    }
}
