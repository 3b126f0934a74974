//! The parts of the binary, put together by `main.rs`: [`cli`] parses the
//! command line, [`logging`] sets up tracing, [`run`] wires and runs the
//! controllers, stopped by [`signals`]; [`audit`] prints what the store
//! sweep would do.

pub(crate) mod audit;
pub(crate) mod cli;
pub(crate) mod logging;
pub(crate) mod run;
mod signals;
