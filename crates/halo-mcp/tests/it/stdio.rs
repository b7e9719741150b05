//! Real child processes.
