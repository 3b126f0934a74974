//! The reconcilers: claims ([`claim`]) and ObjectBuckets ([`bucket`]), the
//! pure state machine they follow ([`plan`]), and status ([`status`]);
//! what they share ([`context`]) and remember across passes
//! ([`superseded`], [`in_flight`], [`api_errors`], [`drift`],
//! [`config_checks`]); what the caches keep of a claim's children
//! ([`child_meta`]) and the cache that keeps them ([`child_cache`]).

mod api_errors;
pub(crate) mod bucket;
pub(crate) mod bucket_names;
pub(crate) mod child_cache;
pub(crate) mod child_meta;
pub(crate) mod claim;
pub(crate) mod config_checks;
pub(crate) mod context;
pub(crate) mod drift;
mod in_flight;
pub(crate) mod plan;
mod read;
pub(crate) mod status;
mod steps;
mod superseded;

pub(crate) use context::{Context, error_policy};
