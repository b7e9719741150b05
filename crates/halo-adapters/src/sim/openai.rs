//! Placeholder: the openai simulator (being written).
