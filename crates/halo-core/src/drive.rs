//! The drivers: thin loops over the run engine ([`crate::engine`]) that do its IO — model
//! calls, tool calls, guardrails, the session journal — and report [`AgentEvent`]s.
//!
//! One loop ([`HaloAgent::run`]) serves every mode: `streaming` picks the model's streaming
//! call, and `manual` hands every tool call to the caller instead of running it.
//! [`generate_text`](HaloAgent::generate_text) and [`resume`](HaloAgent::resume) drive it to
//! its `Finish` event; [`stream_text`](HaloAgent::stream_text) hands its events out;
//! [`send`](HaloAgent::send) and [`submit_tool_result`](HaloAgent::submit_tool_result) run it
//! in manual mode.

use std::borrow::Cow;

use futures::stream::FuturesUnordered;
use futures::{Stream, StreamExt as _};
use tracing::Instrument as _;
use tracing::field::Empty;

use crate::agent::HaloAgent;
use crate::engine::Next;
use crate::error::HaloError;
use crate::guardrail::{LoopContext, LoopVerdict, OutputVerdict, StepContext, StepSettings};
use crate::message::{Message, ToolResult};
use crate::model::{FinishReason, GenerationOptions, ModelError, ModelRequest, ModelStreamEvent};
use crate::output::{NOT_RUN_AFTER_OUTPUT, OUTPUT_ACCEPTED, ObjectRun};
use crate::run::{AgentEvent, GenerateTextResult, StepResult, Turn};
use crate::telemetry;
use crate::tool::ToolOutput;

impl HaloAgent {
    /// Runs the tool loop on a new user message until the model answers without tool calls.
    ///
    /// Each step calls [`ModelAdapter::generate`](crate::ModelAdapter::generate) (not the
    /// streaming endpoint); [`stream_text`](Self::stream_text) is the streaming twin and
    /// leaves the same log. Calls of client-side tools pause the run: the result then holds
    /// them in `pending_tool_calls` (see [`submit_tool_result`](Self::submit_tool_result)).
    ///
    /// # Errors
    /// - [`HaloError::Model`] when a model call fails; the log keeps the input and every
    ///   step completed before the failure ([`resume`](Self::resume) continues).
    /// - [`HaloError::ToolFatal`] when a tool ends the run; the failing step is not logged.
    /// - [`HaloError::Aborted`] when a tool hook aborts the run (a user quitting at an
    ///   approval prompt); the step is not logged.
    /// - [`HaloError::MaxStepsReached`] after `max_steps` calls that all asked for tools.
    /// - [`HaloError::InputRejected`], [`HaloError::OutputRejected`] from guardrails.
    /// - [`HaloError::Session`] when the session store fails.
    ///
    /// Unknown tools, bad arguments and failing tools are not errors: they become tool
    /// results with `is_error: true` that the model reads.
    ///
    /// # Cancel safety
    /// Dropping the future between steps loses nothing; dropped mid-step, the step's
    /// assistant turn and results are not logged (the log stays complete), and
    /// [`resume`](Self::resume) continues the step.
    pub async fn generate_text(
        &mut self,
        input: impl Into<String>,
    ) -> Result<GenerateTextResult, HaloError> {
        self.manual = false;
        drive(self.run(Some(Message::user(input)), false, false, None)).await
    }

    /// Continues the tool loop from where things stand, without a new user message.
    ///
    /// After a run failed with a retryable [`HaloError::Model`] (a rate limit, a cut stream),
    /// stopped at [`HaloError::MaxStepsReached`], or was dropped mid-step, `resume` picks up
    /// from there: a planned model call is made again with a byte-identical request (so it
    /// reads the same prompt-cache entry), and tool calls left without a result run again
    /// when their tool is read-only or idempotent
    /// ([`ToolAnnotations`](crate::tool::ToolAnnotations)) or are closed with an error result
    /// saying they were interrupted. Calling `generate_text` again with the same input
    /// instead would put the question in the log twice.
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
    /// [`HaloError::NothingToResume`] when no step is in flight and the log is empty or
    /// ends with an answer; otherwise those of [`generate_text`](Self::generate_text).
    pub async fn resume(&mut self) -> Result<GenerateTextResult, HaloError> {
        self.manual = false;
        drive(self.run(None, false, false, None)).await
    }

    /// The streaming twin of [`resume`](Self::resume): continues the tool loop from where
    /// things stand, as [`stream_text`](Self::stream_text) would.
    pub fn resume_stream(
        &mut self,
    ) -> impl Stream<Item = Result<AgentEvent, HaloError>> + Send + '_ {
        self.manual = false;
        self.run(None, true, false, None)
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
        self.manual = false;
        self.run(Some(Message::user(input)), true, false, None)
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
        self.manual = true;
        let result = drive(self.run(Some(Message::user(input)), false, true, None)).await?;
        Ok(turn(result))
    }

    /// The manual mode's second half (and how a run paused for client-side tools goes on):
    /// records the result of the tool call `call_id` of the step in flight. Once every call
    /// of the step has its result, the step is logged and the run continues, in the mode it
    /// was started in; the next [`Turn`] is returned. Until then, `Ok(None)`.
    ///
    /// # Errors
    /// [`HaloError::UnknownToolCall`], [`HaloError::DuplicateToolResult`], and once the run
    /// continues, those of [`generate_text`](Self::generate_text).
    pub async fn submit_tool_result(
        &mut self,
        call_id: &str,
        output: impl Into<ToolOutput>,
    ) -> Result<Option<Turn>, HaloError> {
        let Some(call) = self.state.pending().and_then(|p| {
            p.response
                .message
                .tool_calls
                .iter()
                .find(|c| c.id == call_id)
                .cloned()
        }) else {
            return Err(HaloError::UnknownToolCall {
                call_id: call_id.to_string(),
            });
        };
        let output = output.into();
        let result = ToolResult {
            is_error: output.is_error,
            discardable: output.discardable,
            ..ToolResult::ok(&call, output.content)
        };
        let now = self.clock.now_ms();
        let complete = self.state.tool_result(result, now)?;
        self.flush_journal().await?;
        if !complete {
            return Ok(None);
        }
        let manual = self.manual;
        let result = drive(self.run(None, false, manual, None)).await?;
        Ok(Some(turn(result)))
    }

    /// Runs one tool call through the hooks and the registered tool, as the agent does in
    /// `generate_text`: for manual-mode callers that run some calls with the agent's tools.
    ///
    /// # Errors
    /// [`HaloError::ToolFatal`], [`HaloError::Aborted`].
    pub async fn run_tool_call(
        &self,
        call: &crate::message::ToolCall,
    ) -> Result<ToolResult, HaloError> {
        let parent = self
            .tools
            .calls_agents(std::slice::from_ref(call))
            .then(|| std::sync::Arc::new(self.parent(None)));
        Ok(self.tools.run_in_step(call, None, parent.as_ref()).await?.0)
    }

    /// The one run loop. `input` starts a run (`None` resumes); `streaming` picks the
    /// model's streaming call; `manual` hands every tool call to the caller; `object` makes
    /// it an object run (`output.rs`): its options, its prefix in tool mode, and the review
    /// of every answer against the schema.
    pub(crate) fn run<'a>(
        &'a mut self,
        input: Option<Message>,
        streaming: bool,
        manual: bool,
        object: Option<&'a ObjectRun>,
    ) -> impl Stream<Item = Result<AgentEvent, HaloError>> + Send + 'a {
        let span = tracing::info_span!(
            "invoke_agent",
            "gen_ai.operation.name" = "invoke_agent",
            "gen_ai.system" = self.model.provider(),
            "gen_ai.request.model" = self.model.model_name(),
            "halo.prefix.fingerprint" = %self.prefix.fingerprint(),
            "gen_ai.usage.input_tokens" = Empty,
            "gen_ai.usage.output_tokens" = Empty,
            "gen_ai.usage.cache_read.input_tokens" = Empty,
            "halo.steps" = Empty,
        );
        let cancel = self.cancel.clone();
        cancel.reset();
        let events = async_stream::try_stream! {
            self.restore_session().await?;
            let now = self.clock.now_ms();
            match input {
                Some(message) => {
                    for guard in self.guards.input.clone() {
                        if let Err(reason) = guard.check(&message).await {
                            Err(HaloError::InputRejected {
                                guardrail: guard.name().to_string(),
                                reason,
                            })?;
                        }
                    }
                    let message = match object {
                        Some(o) => o.instruct(message),
                        None => message,
                    };
                    self.state.start(message, now);
                }
                None => {
                    let tools = &self.tools;
                    self.state.resume(|name| tools.rerun_safe(name), now)?;
                }
            }
            self.flush_journal().await?;
            let mut seen = 0;
            // The active tools of the step in flight (from `prepare_step`), and its span.
            let mut active: Option<Vec<String>> = None;
            let mut step_span = tracing::Span::none();
            // The run's result, yielded after the last StepFinish.
            let mut finish: Option<GenerateTextResult> = None;
            // Object runs: the answers checked so far.
            let mut attempts = 0;
            // The loop guard: steps checked, nudges given.
            let (mut loop_checked, mut nudges) = (0, 0);
            // Whether the last model call was over the window and recovered from (once).
            let mut overflowed = false;
            loop {
                // Each step the engine committed since the last pass: StepFinish, after the
                // `on_step_finish` hooks.
                while self.state.steps().len() > seen {
                    let step: StepResult = self.state.steps()[seen].clone();
                    seen += 1;
                    for hook in self.guards.step.clone() {
                        hook.on_step_finish(&step).await;
                    }
                    yield AgentEvent::StepFinish(Box::new(step));
                }
                telemetry::record_run(&self.state.run_stats());
                if let Some(result) = finish.take() {
                    yield AgentEvent::Finish(Box::new(result));
                    break;
                }
                let now = self.clock.now_ms();
                // The loop guard, once per new step at a boundary (`guardrail.rs`).
                let nudge = if self.state.steps().len() > loop_checked
                    && self.state.in_flight()
                    && self.state.pending().is_none()
                {
                    loop_checked = self.state.steps().len();
                    self.check_loops(&mut nudges, now)
                } else {
                    None
                };
                let mut queued = self.steering.drain();
                queued.extend(nudge);
                let mut left = queued.clone();
                let next = self.state.next(self.max_steps, &mut left, now);
                let injected = if left.is_empty() { queued } else {
                    self.steering.requeue(left);
                    Vec::new()
                };
                self.flush_journal().await?;
                match next {
                    Next::CallModel { step } => {
                        yield AgentEvent::StepStart { step };
                        for text in injected {
                            yield AgentEvent::Injected(text);
                        }
                        // Tool sources whose tools changed: swapped in here, between
                        // steps, so the prefix of a request never changes mid-step.
                        if object.is_none() {
                            self.tools.refresh_sources(&mut self.prefix);
                        }
                        let settings = self.prepare_step(step).await;
                        if let Some(context) = &self.context {
                            let prefix = object.and_then(ObjectRun::prefix).unwrap_or(&self.prefix);
                            self.state.prepare_context(prefix, context, now);
                            // A compaction: the summary request, between steps, with the
                            // session's options unchanged: a different tool_choice would
                            // miss the history's cache on Anthropic (it invalidates message
                            // blocks) and Gemini; the instruction asks for no tool call.
                            // At most three requests: whole, or its two halves.
                            for _ in 0..3 {
                                let Some(history) = self.state.compaction_request() else {
                                    break;
                                };
                                let options = self.options.clone();
                                let mut request = ModelRequest::new(prefix, &history, &options);
                                request.session_id = self.session_id.as_deref();
                                let answer = match &self.compactor {
                                    Some(compactor) => compactor.summarize(request).await,
                                    None => self.model.generate(request).await,
                                };
                                match answer {
                                    Ok(response) => self.state.finish_compaction(prefix, &history, response, now),
                                    Err(e) => self.state.fail_compaction(
                                        &e.to_string(),
                                        e.is_context_window_exceeded(),
                                        now,
                                    ),
                                }
                            }
                        }
                        self.state.plan_model_call(
                            object.and_then(ObjectRun::prefix).unwrap_or(&self.prefix),
                            now,
                        );
                        self.flush_journal().await?;
                        let prefix = object.and_then(ObjectRun::prefix).unwrap_or(&self.prefix);
                        let options = step_options(&self.options, &settings);
                        let options = match object {
                            Some(o) => o.options(options, &settings),
                            None => options,
                        };
                        active = options.active_tools.clone();
                        step_span = tracing::info_span!("step", "halo.step" = step);
                        let chat_span = telemetry::chat_span(&*self.model, &step_span);
                        let history = self.state.history();
                        let mut request = ModelRequest::new(prefix, &history, &options)
                            .with_history_key(self.state.history_key(&history));
                        request.session_id = self.session_id.as_deref();
                        let response = if streaming {
                            let mut model_events = self.model.stream(request);
                            let mut ids: Vec<String> = Vec::new();
                            let mut finished = None;
                            let mut failed = None;
                            while let Some(event) = model_events.next().instrument(chat_span.clone()).await {
                                match event {
                                    Err(e) => {
                                        failed = Some(e);
                                        break;
                                    }
                                    Ok(ModelStreamEvent::TextDelta(delta)) => yield AgentEvent::TextDelta(delta),
                                    Ok(ModelStreamEvent::ReasoningDelta(delta)) => yield AgentEvent::ReasoningDelta(delta),
                                    Ok(ModelStreamEvent::ToolCallStart { index, id, name }) => {
                                        if ids.len() <= index {
                                            ids.resize(index + 1, String::new());
                                        }
                                        ids[index] = id.clone();
                                        yield AgentEvent::ToolCallStart { id, name };
                                    }
                                    Ok(ModelStreamEvent::ToolCallDelta { index, arguments }) => {
                                        let id = ids.get(index).cloned().unwrap_or_default();
                                        yield AgentEvent::ToolCallDelta { id, arguments };
                                    }
                                    Ok(ModelStreamEvent::Finish(response)) => {
                                        finished = Some(response);
                                        break;
                                    }
                                }
                            }
                            match (finished, failed) {
                                (Some(response), _) => Ok(response),
                                (None, Some(e)) => Err(e),
                                (None, None) => Err(ModelError::Truncated(
                                    "the model's stream ended before its final event".into(),
                                )),
                            }
                        } else {
                            self.model
                                .generate(request)
                                .instrument(chat_span.clone())
                                .await
                        };
                        drop(history);
                        let now = self.clock.now_ms();
                        match response {
                            Err(e) => {
                                telemetry::warn_failed(&chat_span, &e);
                                // Over the window: one reactive rewrite (or compaction), then
                                // the same step again; a second overflow in a row fails.
                                let recovered = e.is_context_window_exceeded()
                                    && !overflowed
                                    && match &self.context {
                                        Some(context) => {
                                            let prefix = object.and_then(ObjectRun::prefix).unwrap_or(&self.prefix);
                                            self.state.context_overflowed(prefix, context, now)
                                        }
                                        None => false,
                                    };
                                if recovered {
                                    overflowed = true;
                                    tracing::warn!("the request was over the model's context window: the history was rewritten, and the step is made again");
                                } else {
                                    self.state.model_failed(e.into(), now);
                                }
                            }
                            Ok(mut response) => {
                                overflowed = false;
                                telemetry::record_response(&chat_span, &response);
                                drop(chat_span);
                                // The repaired turn is the one logged (`repair.rs`).
                                let repaired = match object {
                                    None => self.repair_turn(&mut response.message),
                                    Some(_) => None,
                                };
                                let review = !self.guards.output.is_empty() || object.is_some();
                                let cache = self.state.model_response(response, review, now);
                                if cache.is_bust() {
                                    yield AgentEvent::CacheBust(Box::new(cache));
                                }
                                if let Some(pending) = self.state.pending() {
                                    for call in pending.response.message.tool_calls.clone() {
                                        yield AgentEvent::ToolCall(call);
                                    }
                                }
                                for result in repaired.map(|o| self.settle_repair(o, now)).unwrap_or_default() {
                                    yield AgentEvent::ToolResult(result);
                                }
                            }
                        }
                        self.flush_journal().await?;
                    }
                    Next::RunTools(mut calls) => {
                        // Tool mode: the output tool's call is the answer, checked here.
                        if let Some(o) = object
                            && let Some(tool) = o.output_tool()
                            && let Some(at) = calls.iter().position(|c| c.name == tool)
                        {
                            let call = calls.remove(at);
                            attempts += 1;
                            let verdict = match o.check_call(&call) {
                                Ok(_) => match self.review_output(&call.raw_arguments).await {
                                    (OutputVerdict::Accept, _) => Ok(()),
                                    (OutputVerdict::Retry(feedback), _) => Err(Ok(feedback)),
                                    (OutputVerdict::Reject(reason), by) => Err(Err(HaloError::OutputRejected {
                                        guardrail: by,
                                        reason,
                                        answer: call.raw_arguments.clone(),
                                    })),
                                },
                                Err(problem) if attempts > o.retries() => Err(Err(HaloError::InvalidObject {
                                    attempts,
                                    message: problem,
                                    raw: call.raw_arguments.clone(),
                                })),
                                Err(problem) => Err(Ok(o.call_feedback(&problem))),
                            };
                            let now = self.clock.now_ms();
                            match verdict {
                                Ok(()) => {
                                    let mut results = vec![ToolResult::ok(&call, OUTPUT_ACCEPTED)];
                                    results.extend(calls.iter().map(|c| ToolResult::error(c, NOT_RUN_AFTER_OUTPUT)));
                                    for result in &results {
                                        yield AgentEvent::ToolResult(result.clone());
                                    }
                                    self.state.finish_with_results(results, now);
                                    self.flush_journal().await?;
                                    continue;
                                }
                                Err(Err(e)) => {
                                    self.state.abort_step(e, now);
                                    self.flush_journal().await?;
                                    continue;
                                }
                                Err(Ok(feedback)) => {
                                    let result = ToolResult::error(&call, feedback);
                                    yield AgentEvent::ToolResult(result.clone());
                                    self.state.tool_result(result, now)?;
                                    self.flush_journal().await?;
                                    if calls.is_empty() {
                                        continue;
                                    }
                                }
                            }
                        }
                        // An object run does not pause: a client-side tool's call gets the
                        // registry's error result.
                        let client: Vec<_> = if manual {
                            calls.clone()
                        } else if object.is_some() {
                            Vec::new()
                        } else {
                            calls.iter().filter(|c| self.tools.is_client_side(&c.name)).cloned().collect()
                        };
                        let server: Vec<_> = calls
                            .into_iter()
                            .filter(|c| !client.iter().any(|k| k.id == c.id))
                            .collect();
                        let mut fatal = None;
                        // Agent tools run with a snapshot of this agent (`delegate.rs`).
                        let parent = self
                            .tools
                            .calls_agents(&server)
                            .then(|| std::sync::Arc::new(self.parent(active.clone())));
                        for batch in self.tools.batches(server) {
                            let tools = &self.tools;
                            let active = active.as_deref();
                            let parent = parent.as_ref();
                            let mut running: FuturesUnordered<_> = batch
                                .iter()
                                .map(|call| tools.run_in_step(call, active, parent).instrument(step_span.clone()))
                                .collect();
                            let mut done = Vec::with_capacity(batch.len());
                            let mut delegated = Vec::new();
                            while let Some(result) = running.next().await {
                                match result {
                                    Ok((result, stats)) => {
                                        yield AgentEvent::ToolResult(result.clone());
                                        done.push(result);
                                        delegated.extend(stats);
                                    }
                                    Err(e) => {
                                        fatal = Some(e);
                                        break;
                                    }
                                }
                            }
                            drop(running);
                            for stats in &delegated {
                                self.state.record_delegated(stats);
                            }
                            if fatal.is_some() {
                                break;
                            }
                            let now = self.clock.now_ms();
                            for result in done {
                                self.state.tool_result(result, now)?;
                            }
                            self.flush_journal().await?;
                        }
                        if let Some(e) = fatal {
                            self.state.abort_step(e, self.clock.now_ms());
                            self.flush_journal().await?;
                        } else if !client.is_empty() {
                            finish = Some(self.state.result(client));
                        }
                        step_span = tracing::Span::none();
                    }
                    Next::Review { text } => {
                        if let Some(o) = object {
                            attempts += 1;
                            // A refusal is not retried: the same question gets the same answer.
                            let refused = self
                                .state
                                .pending()
                                .is_some_and(|p| p.response.finish_reason == FinishReason::ContentFilter);
                            if let Err(problem) = o.check_text(&text) {
                                let now = self.clock.now_ms();
                                if refused || attempts > o.retries() {
                                    let message = if refused {
                                        format!("the model refused to answer or its answer was filtered ({problem})")
                                    } else {
                                        problem
                                    };
                                    self.state.abort_step(
                                        HaloError::InvalidObject { attempts, message, raw: text },
                                        now,
                                    );
                                } else {
                                    self.state.reject_answer(o.feedback(&problem), now);
                                }
                                self.flush_journal().await?;
                                continue;
                            }
                        }
                        let (verdict, by) = self.review_output(&text).await;
                        let now = self.clock.now_ms();
                        match verdict {
                            OutputVerdict::Accept => self.state.accept_answer(now),
                            OutputVerdict::Retry(feedback) => self.state.reject_answer(feedback, now),
                            OutputVerdict::Reject(reason) => self.state.abort_step(
                                HaloError::OutputRejected { guardrail: by, reason, answer: text },
                                now,
                            ),
                        }
                        self.flush_journal().await?;
                    }
                    Next::Done(outcome) => finish = Some(outcome?),
                }
            }
        };
        let events = crate::cancel::cancellable(events, cancel);
        telemetry::instrument_stream(events, span)
    }

    /// The output guardrails' verdict on an answer, and the name of the guardrail that gave
    /// it (empty when all accepted).
    async fn review_output(&self, answer: &str) -> (OutputVerdict, String) {
        for guard in self.guards.output.clone() {
            let verdict = guard.check(answer).await;
            if verdict != OutputVerdict::Accept {
                return (verdict, guard.name().to_string());
            }
        }
        (OutputVerdict::Accept, String::new())
    }

    /// The loop guard's verdict at a step boundary: the nudge to inject, if any; a stop ends
    /// the run with [`HaloError::LoopDetected`].
    fn check_loops(&mut self, nudges: &mut usize, at_ms: u64) -> Option<String> {
        let guard = self.guards.loops.clone()?;
        let verdict = guard.check(LoopContext {
            steps: self.state.steps(),
            nudges: *nudges,
        });
        match verdict {
            LoopVerdict::Continue => None,
            LoopVerdict::Nudge(text) => {
                *nudges += 1;
                tracing::info!(
                    "halo.loop.nudges" = *nudges,
                    "a loop guard nudged the model"
                );
                Some(text)
            }
            LoopVerdict::Stop { kind, message } => {
                tracing::warn!("halo.loop.kind" = %kind, "a loop guard stopped the run: {message}");
                let partial = Box::new(self.state.result(Vec::new()));
                self.state.abort_step(
                    HaloError::LoopDetected {
                        kind,
                        message,
                        partial,
                    },
                    at_ms,
                );
                None
            }
        }
    }

    /// The settings of the step hooks for step `step` (later hooks win).
    async fn prepare_step(&mut self, step: usize) -> StepSettings {
        let mut settings = StepSettings::default();
        if self.guards.step.is_empty() {
            return settings;
        }
        let hooks = self.guards.step.clone();
        let history = self.state.log().to_vec();
        for hook in hooks {
            let s = hook
                .prepare_step(StepContext {
                    step,
                    steps: self.state.steps(),
                    history: &history,
                })
                .await;
            if s.tool_choice.is_some() {
                settings.tool_choice = s.tool_choice;
            }
            if s.active_tools.is_some() {
                settings.active_tools = s.active_tools;
            }
        }
        settings
    }
}

/// The options of one step: the agent's, with the step's `tool_choice` and active tools.
fn step_options<'a>(
    base: &'a GenerationOptions,
    step: &StepSettings,
) -> Cow<'a, GenerationOptions> {
    if step.tool_choice.is_none() && step.active_tools.is_none() {
        return Cow::Borrowed(base);
    }
    let mut options = base.clone();
    if let Some(choice) = &step.tool_choice {
        options.tool_choice = choice.clone();
    }
    if let Some(active) = &step.active_tools {
        options.active_tools = Some(active.clone());
    }
    Cow::Owned(options)
}

fn turn(result: GenerateTextResult) -> Turn {
    if result.pending_tool_calls.is_empty() {
        Turn::Answer(Box::new(result))
    } else {
        Turn::ToolCalls(result.pending_tool_calls)
    }
}

/// Drives a run to its `Finish` event.
pub(crate) async fn drive(
    run: impl Stream<Item = Result<AgentEvent, HaloError>> + Send,
) -> Result<GenerateTextResult, HaloError> {
    let mut run = std::pin::pin!(run);
    while let Some(event) = run.next().await {
        if let AgentEvent::Finish(result) = event? {
            return Ok(*result);
        }
    }
    unreachable!("the run loop ends with a Finish event or an error")
}
