//! Durable Halo sessions on a real Restate server (npm `@restatedev/restate-server`, which
//! `cargo xtask ci` installs), black-box: the server, two `durable-worker` processes behind
//! a small TCP load balancer (one deployment address, as a Kubernetes Service gives), and a
//! loopback fake of the OpenAI chat-completions API. Each test runs in a network namespace
//! of its own that has only loopback (`unshare -rn`): the server looks up a public host when
//! it starts, and there it stays silent and healthy; the fixed ports of one test's server
//! meet no other test's.
//!
//! Without the server installed the tests print a SKIP line and pass, except in CI
//! (`CI=true`) or when `HALO_RESTATE_SERVER` names the binary (as `cargo xtask ci` does),
//! where they fail.

mod approval;
mod harness;
mod inflight;
mod journal;
mod model;
mod sessions;
mod steering;
mod workflow;
