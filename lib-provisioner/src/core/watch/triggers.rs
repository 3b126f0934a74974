//! What passes a reconciler's trigger on: only while this replica leads,
//! and everything once when it starts leading.

use futures::stream::StreamExt;
use tokio::sync::watch;

/// Passes a reconciler's trigger on only while this replica leads. A
/// standby still polls it, so its caches stay warm: the reflector has
/// applied each event to the cache before the event gets here, and
/// [`took_over`] covers whatever was dropped.
pub(crate) fn while_leading<S>(
    trigger: S,
    leading: &watch::Receiver<bool>,
) -> impl futures::Stream<Item = S::Item> + Send + 'static
where
    S: futures::Stream + Send + 'static,
    S::Item: Send,
{
    let leading = leading.clone();
    trigger.filter(move |_| futures::future::ready(*leading.borrow()))
}

/// Fires once, when this replica starts leading: then every cached object
/// is reconciled.
pub(crate) fn took_over(
    mut leading: watch::Receiver<bool>,
) -> impl futures::Stream<Item = ()> + Send {
    futures::stream::once(async move { leading.wait_for(|l| *l).await.is_ok() })
        .filter(|led| futures::future::ready(*led))
        .map(|_| ())
}

/// Resolves once `rx` says stop.
pub(crate) async fn stopped(mut rx: watch::Receiver<bool>) {
    let _ = rx.wait_for(|s| *s).await;
}
