//! OpenAI-compatible adapter over a loopback fake.
