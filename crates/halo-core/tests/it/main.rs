//! Integration tests of halo-core (one binary; modules by subject).

mod agent_loop;
mod delegate;
mod engine;
mod engine_props;
mod hooks;
mod output;
mod send_and_object_safety;
mod streaming;
mod tool_source;
mod toolbox;
mod tracing_spans;
mod zones;
