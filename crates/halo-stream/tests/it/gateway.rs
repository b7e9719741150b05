//! The gateway (feature `gateway`) through real HTTP on loopback: runs apart from
//! connections, approvals, client-side tools, steering, login.

mod approvals;
mod auth;
mod harness;
mod runs;
#[cfg(feature = "postgres")]
mod shared;
