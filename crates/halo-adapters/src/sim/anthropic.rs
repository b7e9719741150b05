//! Placeholder: the anthropic simulator (being written).
