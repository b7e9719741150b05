//! The durable driver: one loop over the run engine's effects in which every effect is a
//! journaled Restate step, and its feedback is fed back at the time journaled with it.
//!
//! No decision is made here (see [`halo_core::driver`]); the loop only makes the effects
//! durable. On a replay the same feedback comes back from the journal in the same order,
//! so the engine asks for the same effects and the next live request is the one an
//! uninterrupted run would have sent.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use halo_core::driver::{Driver, Effect, Feedback, Pause, RunKind, ToolOutcome};
use halo_core::session::{CallStatus, JournalEvent};
use halo_core::{Clock, GenerateTextResult, HaloError, Message, RunState, ToolCall, request};
use restate_sdk::prelude::*;

use super::{
    Answer, Factory, PAUSED, PausedRun, RunInput, STATE, SteeringInboxClient, approval_signal,
    now_ms, result_signal, terminal,
};

/// The run's clock: the start time as journaled, so a date the prompt zones render is the
/// same when a replay builds the agent again.
#[derive(Debug)]
struct JournaledClock(u64);

impl Clock for JournaledClock {
    fn now_ms(&self) -> u64 {
        self.0
    }
}

/// One journaled effect's outcome: the feedback and the time it came, in milliseconds
/// since the Unix epoch.
type Fed = (Feedback, u64);

/// Runs one turn of the session keyed `ctx.key()`: see [`super::HaloSession`].
pub(super) async fn run(
    ctx: &ObjectContext<'_>,
    factory: &Factory,
    steering: bool,
    input: RunInput,
) -> Result<GenerateTextResult, HandlerError> {
    let saved: Option<Json<RunState>> = ctx.get(STATE).await?;
    // No run of the session waits now (this handler is exclusive): a paused run recorded
    // here was killed while it waited.
    ctx.clear(PAUSED);
    let started: u64 = ctx.run(|| async { Ok(now_ms()) }).name("start").await?;
    let mut builder = factory(ctx.key())
        .map_err(|e| terminal(500, format!("cannot build the session's agent: {e}")))?
        .clock(Arc::new(JournaledClock(started)));
    if let Some(Json(state)) = saved {
        builder = builder.run_state(state);
    }
    let mut agent = builder.build();
    let mut driver = agent.driver();
    driver
        .start(Message::user(input.text), RunKind::Text, started)
        .map_err(|e| match e {
            HaloError::OpenStep { .. } => terminal(409, e.to_string()),
            e => terminal(500, e.to_string()),
        })?;
    let mut now = started;
    if steering {
        take_steering(ctx, &mut driver).await?;
    }
    // Calls the engine journaled as started because running them twice is not safe.
    let mut guarded: HashSet<String> = HashSet::new();
    loop {
        let effect = driver.next(now);
        // The engine's journal and events are not needed here: the session lives in
        // Restate's journal and state.
        for event in driver.take_journal() {
            if let JournalEvent::Call {
                call_id,
                status: CallStatus::Started,
                ..
            } = event
            {
                guarded.insert(call_id);
            }
        }
        driver.take_events();
        let (feedback, at) = match effect {
            Effect::CheckInput { message } => {
                step(ctx, "input", || driver.check_input(&message)).await?
            }
            Effect::PrepareStep { step: n } => {
                step(ctx, &format!("prepare:{n}"), || driver.prepare_step(n)).await?
            }
            Effect::Summarize(call) => step(ctx, "summary", || driver.summarize(&call)).await?,
            Effect::CallModel(call) => {
                step(ctx, &format!("model:{}", call.step), || {
                    driver.call_model(&call)
                })
                .await?
            }
            Effect::RunTools { calls } => {
                // One call at a time, each its own step: after a crash only the call in
                // flight is repeated. The engine asks again for the rest of the batch.
                let Some(call) = calls.into_iter().next() else {
                    return Err(terminal(500, "the engine asked to run no tool calls"));
                };
                run_tool(ctx, &driver, &call, guarded.contains(call.id.as_str())).await?
            }
            Effect::Review { text } => step(ctx, "review", || driver.review(&text)).await?,
            Effect::Pause(pause) => {
                now = wait(ctx, &mut driver, pause, now).await?;
                driver
                    .resume(now)
                    .map_err(|e| terminal(500, e.to_string()))?;
                continue;
            }
            Effect::Done(outcome) => {
                driver.take_journal();
                driver.take_events();
                ctx.set(STATE, Json(driver.state().clone()));
                return outcome.map_err(|e| terminal(500, e.to_string()));
            }
            other => {
                return Err(terminal(
                    500,
                    format!("this driver does not know the effect {other:?}"),
                ));
            }
        };
        now = now.max(at);
        let tool = matches!(feedback, Feedback::Tool(_));
        driver
            .feed(feedback, now)
            .map_err(|e| terminal(500, e.to_string()))?;
        // The step's last result committed it: the next `next` crosses a step boundary,
        // where steering enters.
        if steering && tool && driver.state().in_flight() && driver.state().pending().is_none() {
            take_steering(ctx, &mut driver).await?;
        }
    }
}

/// One effect as a journaled step named `name`: performed once, replayed from the journal
/// after a crash.
async fn step<'a, F>(
    ctx: &ObjectContext<'_>,
    name: &str,
    effect: impl FnOnce() -> F + Send + 'a,
) -> Result<Fed, HandlerError>
where
    F: Future<Output = Feedback> + Send + 'a,
{
    let Json(fed) = ctx
        .run(|| async move {
            let feedback = effect().await;
            Ok(Json((feedback, now_ms())))
        })
        .name(name)
        .await?;
    Ok(fed)
}

/// One tool call as a journaled step. A call the engine guards (not safe to run twice) is
/// first journaled as started in a step of its own; when a replay finds it started but not
/// finished, the call is closed as "may have run" instead of running again.
async fn run_tool(
    ctx: &ObjectContext<'_>,
    driver: &Driver<'_>,
    call: &ToolCall,
    guarded: bool,
) -> Result<Fed, HandlerError> {
    // Whether this process journaled the start itself (false when it came from the
    // journal: a replay, after the worker that started the call died).
    let fresh = Arc::new(AtomicBool::new(!guarded));
    if guarded {
        let marked = fresh.clone();
        ctx.run(|| async move {
            marked.store(true, Ordering::SeqCst);
            Ok(())
        })
        .name(format!("started:{}", call.id))
        .await?;
    }
    let name = format!("tool:{}:{}", call.name, call.id);
    step(ctx, &name, || async move {
        if fresh.load(Ordering::SeqCst) {
            driver.run_tool(call).await
        } else {
            Feedback::Tool(ToolOutcome::Result {
                result: request::may_have_run(call),
                delegated: None,
            })
        }
    })
    .await
}

/// Moves the steering messages queued in the session's inbox into the run.
async fn take_steering(
    ctx: &ObjectContext<'_>,
    driver: &mut Driver<'_>,
) -> Result<(), HandlerError> {
    let Json(texts) = ctx
        .object_client::<SteeringInboxClient<'_>>(ctx.key())
        .take()
        .call()
        .await?;
    if !texts.is_empty() {
        driver.steer(texts);
    }
    Ok(())
}

/// Waits for every decision and result a paused run needs, feeding each as it comes (in
/// the order of the pause); returns the time of the last.
async fn wait(
    ctx: &ObjectContext<'_>,
    driver: &mut Driver<'_>,
    pause: Pause,
    mut now: u64,
) -> Result<u64, HandlerError> {
    if pause.approvals.is_empty() && pause.tool_calls.is_empty() {
        return Err(terminal(500, "the run paused for nothing"));
    }
    ctx.set(
        PAUSED,
        Json(PausedRun {
            invocation_id: ctx.invocation_id().to_string(),
            approvals: pause.approvals.clone(),
            tool_calls: pause.tool_calls.clone(),
        }),
    );
    let signals = pause
        .approvals
        .iter()
        .map(|a| approval_signal(&a.call.id))
        .chain(pause.tool_calls.iter().map(|c| result_signal(&c.id)));
    let ids = pause
        .approvals
        .iter()
        .map(|a| a.call.id.clone())
        .chain(pause.tool_calls.iter().map(|c| c.id.clone()));
    for (signal, call_id) in signals.zip(ids) {
        let Json(answer) = match ctx.signal::<Json<Answer>>(&signal).await {
            Ok(answer) => answer,
            Err(e) => {
                // Cancelled while it waited: the run is dropped, and the session keeps its
                // history as of its last finished run.
                ctx.clear(PAUSED);
                return Err(e.into());
            }
        };
        let (feedback, at) = match answer {
            Answer::Approve { at_ms } => (
                Feedback::Approve {
                    call_id: call_id.to_string(),
                },
                at_ms,
            ),
            Answer::Reject { reason, at_ms } => (
                Feedback::Reject {
                    call_id: call_id.to_string(),
                    reason,
                },
                at_ms,
            ),
            Answer::Submit { output, at_ms } => (
                Feedback::Submit {
                    call_id: call_id.to_string(),
                    output,
                },
                at_ms,
            ),
        };
        now = now.max(at);
        driver
            .feed(feedback, now)
            .map_err(|e| terminal(500, e.to_string()))?;
    }
    ctx.clear(PAUSED);
    Ok(now)
}
