//! What the plan, sub-agent and team tests share: a scripted model whose usage says what a
//! provider's prompt cache would read, and small tools.

use std::sync::{Arc, Mutex};

use halo_core::model::{ModelError, ModelRequest, ModelResponse};
use halo_core::testing::ScriptedModel;
use halo_core::{ModelAdapter, Tool, ToolError, ToolOutput, async_trait};
use serde::Deserialize;

/// A [`ScriptedModel`] whose answers report usage as a provider's prompt cache would: the
/// request's tokens (bytes / 4) and, as cached, the longest run of leading parts (the prefix,
/// then whole messages) it shares with any earlier request.
#[derive(Clone)]
pub struct CachingModel {
    pub script: ScriptedModel,
    seen: Arc<Mutex<Vec<Vec<Vec<u8>>>>>,
}

impl CachingModel {
    pub fn new(script: ScriptedModel) -> Self {
        CachingModel {
            script,
            seen: Arc::default(),
        }
    }
}

#[async_trait]
impl ModelAdapter for CachingModel {
    fn provider(&self) -> &str {
        "caching-script"
    }

    fn model_name(&self) -> &str {
        "caching-script"
    }

    async fn generate(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        let mut parts = vec![request.prefix.canonical_bytes().to_vec()];
        parts.extend(
            request
                .history
                .iter()
                .map(|m| serde_json::to_vec(m).unwrap()),
        );
        let total: usize = parts.iter().map(Vec::len).sum();
        let shared = {
            let mut seen = self.seen.lock().unwrap();
            let shared = seen
                .iter()
                .map(|earlier| {
                    parts
                        .iter()
                        .zip(earlier)
                        .take_while(|(a, b)| a == b)
                        .map(|(a, _)| a.len())
                        .sum::<usize>()
                })
                .max()
                .unwrap_or(0);
            seen.push(parts);
            shared
        };
        let mut response = self.script.generate(request).await?;
        response.usage.input_tokens = Some((total / 4) as u64);
        response.usage.cache_read_tokens = Some((shared / 4) as u64);
        response.usage.output_tokens = Some(5);
        Ok(response)
    }
}

/// `note {"text"}`: answers `noted: <text>`.
pub struct Note;

#[derive(Deserialize, schemars::JsonSchema)]
pub struct NoteArgs {
    /// What to note.
    pub text: String,
}

impl Tool for Note {
    type Args = NoteArgs;
    fn name(&self) -> &str {
        "note"
    }
    fn description(&self) -> &str {
        "Notes a text."
    }
    async fn call(&self, args: NoteArgs) -> Result<ToolOutput, ToolError> {
        Ok(format!("noted: {}", args.text).into())
    }
}

/// `rendezvous {}`: waits until `n` calls are waiting at once, then answers `met`. Calls
/// made one after another never meet.
pub struct Rendezvous(pub Arc<tokio::sync::Barrier>);

#[derive(Deserialize, schemars::JsonSchema)]
pub struct NoArgs {}

impl Tool for Rendezvous {
    type Args = NoArgs;
    fn name(&self) -> &str {
        "rendezvous"
    }
    fn description(&self) -> &str {
        "Waits for the other agents."
    }
    async fn call(&self, _: NoArgs) -> Result<ToolOutput, ToolError> {
        self.0.wait().await;
        Ok("met".into())
    }
}
