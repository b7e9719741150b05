//! The team example's tests: the whole flow on the scripted model (`scripted`), and the
//! prompt cache of sub-agents on the OpenAI simulator (`cache`).

mod cache;
mod scripted;
