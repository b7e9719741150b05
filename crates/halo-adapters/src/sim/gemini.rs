//! Placeholder: the gemini simulator (being written).
