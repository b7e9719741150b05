//! Integration tests of halo-sandbox: every tool on a real temporary root, confinement,
//! command execution, spec stability, and the tools driven by a `HaloAgent`.

mod agent;
mod bash;
mod common;
mod confinement;
mod conformance;
mod escape;
mod escape_bash;
mod escape_host;
mod exec_limits;
mod files;
mod harness;
mod limits;
mod os_sandbox;
mod policy;
mod search;
mod specs;
