//! The team example's tests: the team's flow on the scripted model (`scripted`), the prompt
//! cache of sub-agents (`cache`) and of named agents and handoffs (`named`) on the OpenAI
//! simulator, and the workflow binary killed between two steps (`workflow`).

mod cache;
mod named;
mod scripted;
mod workflow;
