//! Integration tests of halo-core (one binary; modules by subject).

mod agent_loop;
mod hooks;
mod send_and_object_safety;
mod streaming;
mod tracing_spans;
