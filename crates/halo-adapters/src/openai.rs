//! OpenAI-compatible chat completions (work in progress).
