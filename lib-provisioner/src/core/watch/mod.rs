//! What every family's watches and reconcilers are built from: the retry
//! policy of a failed watch ([`backoff`]), objects cached without their
//! label and annotation maps ([`compact`]), the plumbing of a watch's events
//! into a cache and a reconciler ([`feeds`]), the deletions a shared watch
//! does not hand its subscribers ([`gone`]), the lean keys every trigger
//! hands a scheduler ([`keys`]), the triggers metered into it a window at
//! a time ([`meter`]), the periodic look at every cached object
//! ([`resync`]), and the gates a trigger passes (leading, stopped:
//! [`triggers`]).

pub(crate) mod backoff;
pub(crate) mod compact;
pub(crate) mod feeds;
pub(crate) mod gone;
pub(crate) mod keys;
pub(crate) mod meter;
pub(crate) mod resync;
pub(crate) mod triggers;
