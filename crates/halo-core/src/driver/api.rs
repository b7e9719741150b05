//! The ways to run an agent in process: each is the one loop of `local.rs` with a start, a
//! kind of run and a medium.

use futures::Stream;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;

use super::local::{RunStart, drive, run};
use super::{Feedback, RunKind, Streaming, ToolOutcome, Unary};
use crate::agent::HaloAgent;
use crate::error::HaloError;
use crate::message::{Message, ToolCall, ToolResult};
use crate::output::{ObjectResult, ObjectSpec, Output};
use crate::request;
use crate::run::{AgentEvent, GenerateTextResult, PendingApproval, Turn};
use crate::tool::ToolOutput;

impl HaloAgent {
    /// Runs the tool loop on a new user message until the model answers without tool calls.
    ///
    /// Each step calls [`ModelAdapter::generate`](crate::ModelAdapter::generate) (not the
    /// streaming endpoint); [`stream_text`](Self::stream_text) is the streaming twin and
    /// leaves the same log. Calls of client-side tools, and calls that wait for approval
    /// ([`HaloAgentBuilder::pause_for_approvals`](crate::HaloAgentBuilder::pause_for_approvals)),
    /// pause the run: the result then holds them in `pending_tool_calls` and
    /// `pending_approvals` (see [`submit_tool_result`](Self::submit_tool_result),
    /// [`approve`](Self::approve)).
    ///
    /// # Errors
    /// - [`HaloError::Model`] when a model call fails; the log keeps the input and every
    ///   step completed before the failure ([`resume`](Self::resume) continues).
    /// - [`HaloError::ToolFatal`] when a tool ends the run; the failing step is not logged.
    /// - [`HaloError::Aborted`] when a tool hook aborts the run (a user quitting at an
    ///   approval prompt); the step is not logged.
    /// - [`HaloError::MaxStepsReached`] after `max_steps` calls that all asked for tools.
    /// - [`HaloError::InputRejected`], [`HaloError::OutputRejected`] from guardrails.
    /// - [`HaloError::OpenStep`] when a step is still open (a paused run, a run stopped
    ///   mid-step): finish it or [`discard_pending`](Self::discard_pending) first.
    /// - [`HaloError::Session`] when the session store fails.
    ///
    /// Unknown tools, bad arguments, failing and panicking tools are not errors: they become
    /// tool results with `is_error: true` that the model reads.
    ///
    /// # Cancel safety
    /// Dropping the future between steps loses nothing; dropped mid-step, the step's
    /// assistant turn and results are not logged (the log stays complete), and
    /// [`resume`](Self::resume) continues the step.
    pub async fn generate_text(
        &mut self,
        input: impl Into<String>,
    ) -> Result<GenerateTextResult, HaloError> {
        let start = RunStart::New(Message::user(input), RunKind::Text);
        drive(run(self, start, Unary, false)).await
    }

    /// Continues the tool loop from where things stand, without a new user message.
    ///
    /// After a run failed with a retryable [`HaloError::Model`] (a rate limit, a cut stream),
    /// stopped at [`HaloError::MaxStepsReached`], was dropped mid-step, or was restored from
    /// a session journal after a crash, `resume` picks up from there: a planned model call
    /// is made again with a byte-identical request (so it reads the same prompt-cache entry);
    /// tool calls that never started run; a call that started and has no result runs again
    /// when its tool is read-only or idempotent
    /// ([`ToolAnnotations`](crate::tool::ToolAnnotations)) and is closed otherwise with an
    /// error result saying it may have run
    /// ([`MAY_HAVE_RUN`](crate::request::MAY_HAVE_RUN)). Calling `generate_text` again with
    /// the same input instead would put the question in the log twice. The agent runs the
    /// tool calls itself, even after [`send`](Self::send).
    ///
    /// ```
    /// # use halo_core::{HaloAgent, HaloError, ModelError, testing::ScriptedModel};
    /// # futures::executor::block_on(async {
    /// let model = ScriptedModel::new()
    ///     .error(ModelError::RateLimited { retry_after: None, message: "slow down".into() })
    ///     .text("Hello!");
    /// let mut agent = HaloAgent::builder(model).build();
    /// let err = agent.generate_text("Hi").await.unwrap_err();
    /// assert!(matches!(&err, HaloError::Model(e) if e.is_retryable()));
    /// let out = agent.resume().await.unwrap();
    /// assert_eq!(out.text, "Hello!");
    /// assert_eq!(agent.log().len(), 2); // "Hi" once, then the answer
    /// # });
    /// ```
    ///
    /// # Errors
    /// [`HaloError::NothingToResume`] when no run is in flight and the log is empty or
    /// ends with an answer; otherwise those of [`generate_text`](Self::generate_text).
    pub async fn resume(&mut self) -> Result<GenerateTextResult, HaloError> {
        let kind = self.resume_kind();
        drive(run(self, RunStart::Resume(kind), Unary, false)).await
    }

    /// The streaming twin of [`resume`](Self::resume): continues the tool loop from where
    /// things stand, as [`stream_text`](Self::stream_text) would.
    pub fn resume_stream(
        &mut self,
    ) -> impl Stream<Item = Result<AgentEvent, HaloError>> + Send + '_ {
        let kind = self.resume_kind();
        run(self, RunStart::Resume(kind), Streaming, true)
    }

    /// The kind `resume` continues in: the run's own, but the agent runs the calls a manual
    /// run handed out.
    fn resume_kind(&self) -> Option<RunKind> {
        matches!(self.run_state().kind(), RunKind::Manual).then_some(RunKind::Text)
    }

    /// Runs the tool loop on a new user message, streaming: model calls go through
    /// [`ModelAdapter::stream`](crate::ModelAdapter::stream) and every delta, tool call,
    /// tool result and step is an [`AgentEvent`]. The stream ends after
    /// [`AgentEvent::Finish`], or with one `Err` item (the errors of
    /// [`generate_text`](Self::generate_text)).
    ///
    /// ```
    /// # use halo_core::{AgentEvent, HaloAgent, testing::ScriptedModel};
    /// # use futures::StreamExt;
    /// # futures::executor::block_on(async {
    /// let mut agent = HaloAgent::builder(ScriptedModel::new().text("Hello!")).build();
    /// let mut text = String::new();
    /// let mut events = std::pin::pin!(agent.stream_text("Hi"));
    /// while let Some(event) = events.next().await {
    ///     if let AgentEvent::TextDelta(delta) = event.unwrap() {
    ///         text.push_str(&delta);
    ///     }
    /// }
    /// assert_eq!(text, "Hello!");
    /// # });
    /// ```
    ///
    /// # Cancel safety
    /// Dropping the stream stops the run at once: the model call or running tool futures are
    /// dropped, and the log keeps only complete steps (an assistant turn enters it together
    /// with all its tool results, after the tools ran). To stop on a signal, end the stream
    /// with `futures::StreamExt::take_until(stream, signal)`.
    pub fn stream_text(
        &mut self,
        input: impl Into<String>,
    ) -> impl Stream<Item = Result<AgentEvent, HaloError>> + Send + '_ {
        run(
            self,
            RunStart::New(Message::user(input), RunKind::Text),
            Streaming,
            true,
        )
    }

    /// The manual mode's first half: starts a run on `input` and returns the tool calls the
    /// model asks for — every call, for the caller to run — or the final answer. Give each
    /// call its result with [`submit_tool_result`](Self::submit_tool_result).
    ///
    /// ```
    /// # use halo_core::{HaloAgent, Turn, testing::ScriptedModel};
    /// # use serde_json::json;
    /// # futures::executor::block_on(async {
    /// let model = ScriptedModel::new()
    ///     .tool_call("weather", json!({"city": "Oslo"}))
    ///     .text("Snow in Oslo.");
    /// let mut agent = HaloAgent::builder(model).build();
    /// let Turn::ToolCalls(calls) = agent.send("Weather in Oslo?").await.unwrap() else { panic!() };
    /// assert_eq!(calls[0].name, "weather");
    /// let next = agent.submit_tool_result(&calls[0].id, "snow, -3 °C").await.unwrap();
    /// let Some(Turn::Answer(answer)) = next else { panic!() };
    /// assert_eq!(answer.text, "Snow in Oslo.");
    /// # });
    /// ```
    ///
    /// # Errors
    /// Those of [`generate_text`](Self::generate_text).
    pub async fn send(&mut self, input: impl Into<String>) -> Result<Turn, HaloError> {
        let start = RunStart::New(Message::user(input), RunKind::Manual);
        Ok(Turn::of(drive(run(self, start, Unary, false)).await?))
    }

    /// How a paused run goes on (the manual mode's second half, a client-side tool's
    /// result): records the result of the tool call `call_id` of the step in flight — at
    /// once in the session journal, so a process that stops before the next one loses
    /// nothing, and a run restored from the journal still takes the remaining results. Once
    /// the step waits for nothing more from the caller, the run continues, in the kind it was
    /// started in, and the next [`Turn`] is returned; until then, `Ok(None)`.
    ///
    /// # Errors
    /// [`HaloError::UnknownToolCall`], [`HaloError::DuplicateToolResult`], and once the run
    /// continues, those of [`generate_text`](Self::generate_text).
    pub async fn submit_tool_result(
        &mut self,
        call_id: &str,
        output: impl Into<ToolOutput>,
    ) -> Result<Option<Turn>, HaloError> {
        let output = output.into();
        self.answer(Feedback::Submit {
            call_id: call_id.to_string(),
            output,
        })
        .await
    }

    /// Approves the call `call_id` of a run paused for approval
    /// ([`GenerateTextResult::pending_approvals`]): the decision is journaled at once, and
    /// the call runs when the run goes on — now, when no other call of the step waits for
    /// the caller. Works on an agent restored from the run state or the session journal,
    /// in another process. Returns the next [`Turn`], or `Ok(None)` while the step still
    /// waits.
    ///
    /// ```
    /// # use halo_core::{HaloAgent, NoArgs, Tool, ToolAnnotations, ToolError, ToolOutput, Turn, testing::ScriptedModel};
    /// # use serde_json::json;
    /// struct Deploy;
    /// impl Tool for Deploy {
    ///     type Args = NoArgs;
    ///     fn name(&self) -> &str { "deploy" }
    ///     fn description(&self) -> &str { "Deploys." }
    ///     fn annotations(&self) -> ToolAnnotations { ToolAnnotations::default().with_needs_approval(true) }
    ///     async fn call(&self, _: NoArgs) -> Result<ToolOutput, ToolError> { Ok("deployed".into()) }
    /// }
    /// # futures::executor::block_on(async {
    /// let model = ScriptedModel::new().tool_call("deploy", json!({})).text("Done.");
    /// let mut agent = HaloAgent::builder(model).tool(Deploy).unwrap().pause_for_approvals().build();
    /// let paused = agent.generate_text("Deploy it.").await.unwrap();
    /// let call = &paused.pending_approvals[0].call;
    /// let Some(Turn::Answer(answer)) = agent.approve(&call.id).await.unwrap() else { panic!() };
    /// assert_eq!(answer.text, "Done.");
    /// # });
    /// ```
    ///
    /// # Errors
    /// [`HaloError::NotAwaitingApproval`] when the call waits for no approval, and once the
    /// run continues, those of [`generate_text`](Self::generate_text).
    pub async fn approve(&mut self, call_id: &str) -> Result<Option<Turn>, HaloError> {
        self.answer(Feedback::Approve {
            call_id: call_id.to_string(),
        })
        .await
    }

    /// Rejects the call `call_id` of a run paused for approval: it never runs, and the model
    /// reads an error result saying the user rejected it, with `reason`. Otherwise as
    /// [`approve`](Self::approve).
    ///
    /// # Errors
    /// As [`approve`](Self::approve).
    pub async fn reject(
        &mut self,
        call_id: &str,
        reason: impl Into<String>,
    ) -> Result<Option<Turn>, HaloError> {
        self.answer(Feedback::Reject {
            call_id: call_id.to_string(),
            reason: reason.into(),
        })
        .await
    }

    /// The calls of a paused run waiting for approval (also after a restore).
    pub fn pending_approvals(&self) -> Vec<PendingApproval> {
        self.run_state().pending_approvals()
    }

    /// Drops the open step — the model's turn with its tool calls and the results given so
    /// far — so that a new turn can start; the log keeps every committed step. The drop is
    /// journaled with the next journal write. Returns whether a step was open.
    pub fn discard_pending(&mut self) -> bool {
        let now = self.config().clock.now_ms();
        self.parts().0.discard_pending(now)
    }

    /// Feeds the caller's answer to a paused run, then lets the run go on while it waits for
    /// nothing more from the caller.
    async fn answer(&mut self, feedback: Feedback) -> Result<Option<Turn>, HaloError> {
        self.restore_session().await?;
        let now = self.config().clock.now_ms();
        let opened = self.run_state().steps_opened();
        {
            let (state, config) = self.parts();
            state.feed(feedback, config, now)?;
        }
        let result = drive(run(self, RunStart::Resume(None), Unary, false)).await?;
        let paused = !result.pending_tool_calls.is_empty() || !result.pending_approvals.is_empty();
        if paused && self.run_state().steps_opened() == opened {
            return Ok(None);
        }
        Ok(Some(Turn::of(result)))
    }

    /// Runs one tool call through the hooks and the registered tool, as the agent does in
    /// `generate_text`: for manual-mode callers that run some calls with the agent's tools.
    /// A call that needs approval is denied (no one answers here).
    ///
    /// # Errors
    /// [`HaloError::ToolFatal`], [`HaloError::Aborted`].
    pub async fn run_tool_call(&self, call: &ToolCall) -> Result<ToolResult, HaloError> {
        let env = super::call_env(self, std::slice::from_ref(call));
        match self.config().tools.run_call(call.clone(), env).await {
            ToolOutcome::Result { result, .. } => Ok(result),
            ToolOutcome::NeedsApproval { reason, .. } => Ok(request::unapproved(call, &reason)),
            ToolOutcome::Fatal { tool, message, .. } => Err(HaloError::ToolFatal { tool, message }),
            ToolOutcome::Aborted { tool, reason, .. } => Err(HaloError::Aborted { tool, reason }),
        }
    }

    /// Asks for a typed JSON answer to `input`: `T`'s JSON Schema goes to the model in the
    /// mode [`OutputMode::Auto`](crate::OutputMode::Auto) picks for the adapter; tools are
    /// suppressed (they stay in the prefix, whose bytes do not change: `tool_choice: None`
    /// and no active tools, or only the output tool in tool mode). See the
    /// [module docs](crate::output) for the modes and their cache cost;
    /// [`generate_object_with`](Self::generate_object_with) chooses the mode and the retry
    /// budget.
    ///
    /// ```
    /// use halo_core::{HaloAgent, testing::ScriptedModel};
    /// use serde::Deserialize;
    ///
    /// /// A city's weather.
    /// #[derive(Deserialize, schemars::JsonSchema)]
    /// struct Weather {
    ///     city: String,
    ///     celsius: i32,
    /// }
    ///
    /// # futures::executor::block_on(async {
    /// let model = ScriptedModel::new()
    ///     .text("It is cold.") // not JSON: the error and the schema go back to the model
    ///     .text(r#"Here it is: {"city": "Oslo", "celsius": -3}"#);
    /// let mut agent = HaloAgent::builder(model).build();
    /// let out = agent.generate_object::<Weather>("Weather in Oslo?").await.unwrap();
    /// assert_eq!((out.object.city.as_str(), out.object.celsius, out.attempts), ("Oslo", -3, 2));
    /// # });
    /// ```
    ///
    /// # Errors
    /// - [`HaloError::InvalidObject`] when no answer fit within the retry budget (or the
    ///   model refused, or the schema does not compile): the last answer's raw text, what
    ///   was wrong with it, and the attempts made. The log keeps the rejected answers and
    ///   their feedback, not the last answer.
    /// - [`HaloError::Prefix`] in tool mode when the output tool's name is taken or invalid.
    /// - Those of [`generate_text`](Self::generate_text).
    ///
    /// An object run does not pause: a client-side tool's call gets an error result, a call
    /// that needs approval is denied. [`resume`](Self::resume) after a failed object run
    /// continues it as the object run it was.
    pub async fn generate_object<T: JsonSchema + DeserializeOwned>(
        &mut self,
        input: impl Into<String>,
    ) -> Result<ObjectResult<T>, HaloError> {
        self.generate_object_with(Output::new(), input).await
    }

    /// [`generate_object`](Self::generate_object) with an [`Output`] spec (mode, retries,
    /// output tool name).
    ///
    /// # Errors
    /// As [`generate_object`](Self::generate_object).
    pub async fn generate_object_with<T: DeserializeOwned>(
        &mut self,
        output: Output<T>,
        input: impl Into<String>,
    ) -> Result<ObjectResult<T>, HaloError> {
        self.object_run(output, true, input.into()).await
    }

    /// Runs the tool loop on `input` as [`generate_text`](Self::generate_text) does, with a
    /// typed final answer: the AI SDK's `generateText({ output: Output.object(...) })`,
    /// pydantic-ai's `output_type`. Tools stay available; in tool mode the model ends the
    /// run by calling the output tool (`tool_choice: Required`), in the other modes by
    /// answering with the JSON.
    ///
    /// # Errors
    /// As [`generate_object`](Self::generate_object).
    pub async fn generate_text_with_output<T: DeserializeOwned>(
        &mut self,
        output: Output<T>,
        input: impl Into<String>,
    ) -> Result<ObjectResult<T>, HaloError> {
        self.object_run(output, false, input.into()).await
    }

    async fn object_run<T: DeserializeOwned>(
        &mut self,
        output: Output<T>,
        suppress_tools: bool,
        input: String,
    ) -> Result<ObjectResult<T>, HaloError> {
        let spec = ObjectSpec::new(
            output,
            suppress_tools,
            self.model().capabilities(),
            self.prefix(),
        )?;
        let kind = RunKind::Object(Box::new(spec.clone()));
        let result = drive(run(
            self,
            RunStart::New(Message::user(input), kind),
            Unary,
            false,
        ))
        .await?;
        spec.decode(result)
    }
}
