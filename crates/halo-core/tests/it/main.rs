//! Integration tests of halo-core (one binary; modules by subject).

mod agent_loop;
mod delegate;
mod driver_props;
mod engine;
mod engine_props;
mod factory;
mod handoff;
mod hooks;
mod inner_events;
mod named;
mod never_stuck;
mod output;
mod pauses;
mod send_and_object_safety;
mod session;
mod streaming;
mod tool_source;
mod toolbox;
mod tracing_spans;
mod workflow;
mod zones;
