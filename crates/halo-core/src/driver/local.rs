//! The in-process driver: one loop over the engine's effects, a small function per effect,
//! and the medium of model calls — unary or streaming — behind one trait, [`TurnSource`].
//! No decision is made here: the loop performs what [`RunState::next`](crate::RunState)
//! asks, feeds back what came of it, writes the journal after each `next` and hands the
//! engine's events out.

use futures::future::{Either, select};
use futures::stream::FuturesUnordered;
use futures::{Stream, StreamExt as _};
use tracing::Instrument as _;

use super::{Effect, Feedback, ModelCall, Rejection, RunKind, SummaryCall};
use crate::agent::{Config, HaloAgent};
use crate::dispatch::CallEnv;
use crate::engine::{Recording, RunState};
use crate::error::HaloError;
use crate::guardrail::StepContext;
use crate::inner::EventSink;
use crate::message::Message;
use crate::model::{ModelAdapter, ModelError, ModelEventStream, ModelRequest, ModelStreamEvent};
use crate::run::{AgentEvent, GenerateTextResult};
use crate::telemetry;

/// How a model call is made: the medium of [`Effect::CallModel`]. The engine does not care;
/// a streaming medium's deltas become [`AgentEvent`]s. (rig's `TurnSource` separates them the
/// same way.)
pub trait TurnSource: Send + Sync {
    /// The model's turn for `request`, as events ending with
    /// [`ModelStreamEvent::Finish`].
    fn turn<'a>(
        &self,
        model: &'a dyn ModelAdapter,
        request: ModelRequest<'a>,
    ) -> ModelEventStream<'a>;

    /// Whether turns are streamed (`gen_ai.request.stream` on the `chat` span). Default:
    /// `false`.
    fn is_streaming(&self) -> bool {
        false
    }
}

/// One request, one response ([`ModelAdapter::generate`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct Unary;

impl TurnSource for Unary {
    fn turn<'a>(
        &self,
        model: &'a dyn ModelAdapter,
        request: ModelRequest<'a>,
    ) -> ModelEventStream<'a> {
        Box::pin(futures::stream::once(async move {
            model.generate(request).await.map(ModelStreamEvent::Finish)
        }))
    }
}

/// The provider's event stream ([`ModelAdapter::stream`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct Streaming;

impl TurnSource for Streaming {
    fn turn<'a>(
        &self,
        model: &'a dyn ModelAdapter,
        request: ModelRequest<'a>,
    ) -> ModelEventStream<'a> {
        model.stream(request)
    }

    fn is_streaming(&self) -> bool {
        true
    }
}

/// How a run begins: a new turn of some kind, or from where things stand (in the run's own
/// kind, or in `kind` when given).
#[derive(Debug)]
pub(crate) enum RunStart {
    New(Message, RunKind),
    Resume(Option<RunKind>),
}

/// The request of `call`: the prefix and options the engine chose, `history`.
pub(crate) fn request<'a>(
    config: &'a Config,
    state: &'a RunState,
    call: &'a ModelCall,
    history: &'a [Message],
) -> ModelRequest<'a> {
    let mut request = ModelRequest::new(
        prefix(config, state, call.object_prefix()),
        history,
        call.options(&config.options),
    )
    .with_history_key(state.history_key(history));
    request.session_id = config.session_id.as_deref();
    request
}

/// The request of a summary call.
pub(crate) fn summary_request<'a>(
    config: &'a Config,
    state: &'a RunState,
    call: &'a SummaryCall,
) -> ModelRequest<'a> {
    let mut request = ModelRequest::new(
        prefix(config, state, call.object_prefix),
        &call.history,
        &config.options,
    );
    request.session_id = config.session_id.as_deref();
    request
}

fn prefix<'a>(config: &'a Config, state: &'a RunState, object: bool) -> &'a crate::StablePrefix {
    match (object, state.object_prefix()) {
        (true, Some(own)) => own,
        _ => &config.prefix,
    }
}

/// [`Effect::Summarize`]: the compactor, or the model.
pub(crate) async fn summarize(config: &Config, request: ModelRequest<'_>) -> Feedback {
    Feedback::Summary(match &config.compactor {
        Some(compactor) => compactor.summarize(request).await,
        None => config.model.generate(request).await,
    })
}

/// [`Effect::CheckInput`]: the input guardrails, in order.
pub(crate) async fn check_input(config: &Config, message: &Message) -> Feedback {
    for guard in &config.guards.input {
        if let Err(reason) = guard.check(message).await {
            return Feedback::Input(Err(Rejection {
                guardrail: guard.name().to_string(),
                reason,
            }));
        }
    }
    Feedback::Input(Ok(()))
}

/// [`Effect::PrepareStep`]: the step hooks' settings.
pub(crate) async fn prepare_step(config: &Config, state: &RunState, step: usize) -> Feedback {
    let history = state.log().to_vec();
    let context = StepContext {
        step,
        steps: state.steps(),
        history: &history,
    };
    Feedback::StepSettings(super::merged_settings(&config.guards.step, context).await)
}

/// [`Effect::Review`]: the output guardrails.
pub(crate) async fn review(config: &Config, text: &str) -> Feedback {
    let (verdict, guardrail) = super::verdict_of(&config.guards.output, text).await;
    Feedback::Review { verdict, guardrail }
}

/// The one run loop: begins as `start` says, then performs effects until the run is done
/// or paused. Model calls go through `medium`. Ends with one [`AgentEvent::Finish`], or one
/// `Err`. With `watched` (a streamed run), the events of the agents the run's tools run
/// come out among the run's own ([`crate::inner`]); an agent that forwards its events to
/// a caller's run (it has a tap) is watched and streams its model calls.
pub(crate) fn run<'a>(
    agent: &'a mut HaloAgent,
    start: RunStart,
    medium: impl TurnSource + 'a,
    watched: bool,
) -> impl Stream<Item = Result<AgentEvent, HaloError>> + Send + 'a {
    let tap = agent.config().tap.clone();
    // What the run records besides its log: the journal when a store takes it, the events
    // when someone reads them (the caller of a streamed run, a watching run, step hooks).
    let recording = Recording {
        journal: agent.has_store(),
        events: watched || tap.is_some() || !agent.config().guards.step.is_empty(),
    };
    let (name, depth) = (agent.config().name.clone(), agent.config().depth);
    let stream_turns = tap.is_some();
    let (sink, mut inner) = if watched || tap.is_some() {
        let (sink, inner) = EventSink::channel();
        (Some(sink), Some(inner))
    } else {
        (None, None)
    };
    let model = agent.model().clone();
    let conversation = conversation_id(agent).map(str::to_string);
    let span = telemetry::agent_span(
        &*model,
        agent.name(),
        conversation.as_deref(),
        &agent.prefix().fingerprint(),
    );
    let run_span = span.clone();
    let cancel = agent.reset_cancel();
    let token = cancel.clone();
    let clock = agent.config().clock.clone();
    let events = async_stream::try_stream! {
        agent.restore_session().await?;
        agent.parts().0.set_recording(recording);
        {
            let now = clock.now_ms();
            let (state, config) = agent.parts();
            match start {
                RunStart::New(input, kind) => state.start(input, kind, now)?,
                RunStart::Resume(kind) => state.resume(config, kind, now)?,
            }
        }
        let mut step_span = tracing::Span::none();
        // The last model call's span and the ledger's last call number before it, until
        // the engine has judged the call.
        let mut judged: Option<(tracing::Span, Option<u64>)> = None;
        // The time of the last feedback, which is also that of the decision that follows
        // it at once when nothing is handed out between them (one clock read less per
        // effect).
        let mut fed_at: Option<u64> = None;
        loop {
            agent.take_steering();
            let effect = {
                let (state, config) = agent.parts();
                let now = fed_at.take().unwrap_or_else(|| clock.now_ms());
                state.next(config, now)
            };
            // The one place the journal is written: after the engine decided, before the
            // effect runs.
            agent.flush_journal().await?;
            for event in agent.parts().0.take_events() {
                if let AgentEvent::StepFinish(step) = &event {
                    for hook in &agent.config().guards.step {
                        hook.on_step_finish(step).await;
                    }
                }
                yield event;
            }
            if !run_span.is_disabled() {
                telemetry::record_run(&run_span, &agent.run_state().run_stats());
            }
            let feedback = match effect {
                Effect::CheckInput { message } => check_input(agent.config(), &message).await,
                Effect::PrepareStep { step } => {
                    prepare_step(agent.config(), agent.run_state(), step).await
                }
                Effect::Summarize(call) => {
                    let request = summary_request(agent.config(), agent.run_state(), &call);
                    summarize(agent.config(), request).await
                }
                Effect::Review { text } => review(agent.config(), &text).await,
                Effect::CallModel(call) => {
                    step_span = telemetry::step_span(call.step);
                    let chat_span = telemetry::chat_span(
                        &*model,
                        conversation.as_deref(),
                        &step_span,
                        medium.is_streaming(),
                    );
                    let config = agent.config();
                    let state = agent.run_state();
                    // Only a span that is recorded takes the time to the first chunk.
                    let asked_at = (!chat_span.is_disabled()).then(|| clock.now_ms());
                    let mut first = true;
                    let history = state.history();
                    let request = request(config, state, &call, &history);
                    let mut turn = if stream_turns {
                        Streaming.turn(&*config.model, request)
                    } else {
                        medium.turn(&*config.model, request)
                    };
                    // Tool-call ids by stream index, for the argument deltas.
                    let mut ids: Vec<String> = Vec::new();
                    let mut answer = Err(ModelError::Truncated(
                        "the model's stream ended before its final event".into(),
                    ));
                    while let Some(event) = turn.next().instrument(chat_span.clone()).await {
                        if std::mem::take(&mut first)
                            && !matches!(event, Ok(ModelStreamEvent::Finish(_)) | Err(_))
                            && let Some(asked_at) = asked_at
                        {
                            telemetry::record_first_chunk(&chat_span, clock.now_ms().saturating_sub(asked_at));
                        }
                        match event {
                            Err(e) => {
                                answer = Err(e);
                                break;
                            }
                            Ok(ModelStreamEvent::Finish(response)) => {
                                answer = Ok(response);
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
                        }
                    }
                    telemetry::record_answer(&chat_span, &answer);
                    judged = Some((chat_span, state.ledger().last().map(|c| c.call)));
                    Feedback::Model(answer)
                }
                Effect::RunTools { calls } => {
                    let catch_panics = agent.config().limits.catch_panics;
                    let active: Option<Vec<String>> = agent
                        .run_state()
                        .pending()
                        .and_then(|p| p.active().map(<[String]>::to_vec));
                    let parent = super::call_env(agent, &calls).parent;
                    let (state, config) = agent.split();
                    let env = |approved: bool| CallEnv {
                        active: active.as_deref(),
                        parent: parent.clone(),
                        events: sink.clone(),
                        depth: config.depth,
                        cancel: token.clone(),
                        approved,
                        catch_panics,
                    };
                    // A batch of one (the common case) is awaited on its own; a larger one
                    // runs its calls concurrently.
                    let running = match <[super::ToolCall; 1]>::try_from(calls) {
                        Ok([call]) => {
                            let approved = state.approved(&call.id);
                            Either::Left(futures::stream::once(
                                config
                                    .tools
                                    .run_call(call, env(approved))
                                    .instrument(step_span.clone()),
                            ))
                        }
                        Err(calls) => Either::Right(
                            calls
                                .into_iter()
                                .map(|call| {
                                    let approved = state.approved(&call.id);
                                    config
                                        .tools
                                        .run_call(call, env(approved))
                                        .instrument(step_span.clone())
                                })
                                .collect::<FuturesUnordered<_>>(),
                        ),
                    };
                    let mut running = std::pin::pin!(running);
                    // Each outcome is fed as it comes; a fatal one ends the step, and the
                    // rest of the batch is dropped. Inner agents' events are handed out as
                    // they come, and those a call sent before it finished come before its
                    // result.
                    loop {
                        let next = match inner.as_mut() {
                            None => Either::Left(running.next().await),
                            Some(events) => match select(running.next(), events.next()).await {
                                Either::Left((outcome, _)) => Either::Left(outcome),
                                Either::Right((event, _)) => Either::Right(event),
                            },
                        };
                        let outcome = match next {
                            Either::Left(Some(outcome)) => outcome,
                            Either::Left(None) => break,
                            Either::Right(Some(event)) => {
                                yield event;
                                continue;
                            }
                            Either::Right(None) => {
                                inner = None;
                                continue;
                            }
                        };
                        if let Some(events) = inner.as_mut() {
                            while let Some(event) = events.try_next() {
                                yield event;
                            }
                        }
                        let now = clock.now_ms();
                        state.feed(Feedback::Tool(outcome), config, now)?;
                        fed_at = (!recording.events).then_some(now);
                        for event in state.take_events() {
                            if let AgentEvent::StepFinish(step) = &event {
                                for hook in &config.guards.step {
                                    hook.on_step_finish(step).await;
                                }
                            }
                            yield event;
                        }
                        if !state.running_tools() {
                            break;
                        }
                    }
                    // The rest of the batch (after a fatal outcome) is dropped here, with
                    // this block.
                    continue;
                }
                Effect::Pause(pause) => {
                    let result = agent.run_state().result(pause.tool_calls, pause.approvals);
                    yield AgentEvent::Finish(Box::new(result));
                    break;
                }
                Effect::Done(outcome) => {
                    let result: GenerateTextResult = outcome?;
                    yield AgentEvent::Finish(Box::new(result));
                    break;
                }
            };
            // Steering sent while the effect ran counts for the engine's next decision (an
            // answer with a message waiting takes another step).
            agent.take_steering();
            let (state, config) = agent.parts();
            let now = clock.now_ms();
            state.feed(feedback, config, now)?;
            // Nothing is handed out before the next decision: it is taken at the same time.
            fed_at = Some(now);
            if let Some((chat_span, before)) = judged.take()
                && let Some(check) = state.ledger().last()
                && Some(check.call) != before
            {
                telemetry::record_cache(&chat_span, check);
            }
        }
    };
    // A tapped agent's events also go to the run that watches it, tagged.
    let events = events.inspect(move |event| {
        if let (Some(tap), Ok(event)) = (&tap, event) {
            tap.forward(name.as_deref(), depth, event);
        }
    });
    let events = crate::cancel::cancellable(events, cancel);
    telemetry::instrument_stream(events, span)
}

/// `gen_ai.conversation.id` of the agent's runs: its session id, when it has one.
pub(crate) fn conversation_id(agent: &HaloAgent) -> Option<&str> {
    agent.config().session_id.as_deref()
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
    Err(HaloError::Cancelled)
}
