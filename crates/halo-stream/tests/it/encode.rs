//! The event → part mapping on edited event sequences: part ids and closing, dropped
//! deltas, options, and every way a run can end.

use futures::{StreamExt as _, stream};
use halo_core::testing::ScriptedModel;
use halo_core::{AgentEvent, FinishReason, HaloAgent, HaloError, ModelError};
use halo_stream::{
    CACHE_BUST_PART, DataPart, StreamOptions, UiFinishReason, UiMessageChunk, to_ui_message_chunks,
};
use serde_json::json;

use crate::scenarios;

/// The events of a real run, to edit and replay.
fn events_of(mut agent: HaloAgent, input: &str) -> Vec<AgentEvent> {
    futures::executor::block_on(async {
        agent
            .stream_text(input)
            .map(|e| e.expect("the scripted run succeeds"))
            .collect()
            .await
    })
}

fn chunks(
    events: Vec<Result<AgentEvent, HaloError>>,
    options: StreamOptions,
) -> Vec<UiMessageChunk> {
    futures::executor::block_on(to_ui_message_chunks(stream::iter(events), options).collect())
}

fn json_lines(chunks: &[UiMessageChunk]) -> Vec<String> {
    chunks.iter().map(UiMessageChunk::to_json).collect()
}

#[test]
fn reasoning_and_text_runs_become_separate_closed_parts_in_order() {
    let events = events_of(scenarios::tool_run(), "Weather?");
    let lines = json_lines(&chunks(
        events.into_iter().map(Ok).collect(),
        StreamOptions::new(),
    ));
    let expected_prefix = [
        r#"{"type":"start"}"#,
        r#"{"type":"start-step"}"#,
        r#"{"type":"reasoning-start","id":"reasoning-1"}"#,
        r#"{"type":"reasoning-delta","id":"reasoning-1","delta":"The user asks about Paris. "}"#,
        r#"{"type":"reasoning-delta","id":"reasoning-1","delta":"I should call get_weather."}"#,
        r#"{"type":"reasoning-end","id":"reasoning-1"}"#,
        r#"{"type":"text-start","id":"text-1"}"#,
        r#"{"type":"text-delta","id":"text-1","delta":"Let me check."}"#,
        r#"{"type":"text-end","id":"text-1"}"#,
        r#"{"type":"tool-input-start","toolCallId":"call_1","toolName":"get_weather"}"#,
    ];
    assert_eq!(lines[..expected_prefix.len()], expected_prefix);
    // The second step's text is a new part with the next id.
    assert!(lines.contains(&r#"{"type":"text-start","id":"text-2"}"#.to_string()));
    assert_eq!(
        lines.last().unwrap(),
        r#"{"type":"finish","finishReason":"stop"}"#
    );
}

#[test]
fn without_reasoning_no_reasoning_part_is_sent() {
    let events = events_of(scenarios::tool_run(), "Weather?");
    let lines = json_lines(&chunks(
        events.into_iter().map(Ok).collect(),
        StreamOptions::new().with_reasoning(false),
    ));
    assert!(lines.iter().all(|l| !l.contains("reasoning")), "{lines:#?}");
    assert_eq!(lines[2], r#"{"type":"text-start","id":"text-1"}"#);
}

#[test]
fn argument_deltas_of_unannounced_calls_and_empty_deltas_are_dropped() {
    // Trigger: an adapter that sends argument pieces before (or without) the call's start;
    // the client would reject a `tool-input-delta` for a call it does not know.
    let mut events = events_of(scenarios::tool_run(), "Weather?");
    events.retain(|e| !matches!(e, AgentEvent::ToolCallStart { .. }));
    events.insert(1, AgentEvent::TextDelta(String::new()));
    let chunks = chunks(events.into_iter().map(Ok).collect(), StreamOptions::new());
    assert!(
        !chunks.iter().any(|c| matches!(
            c,
            UiMessageChunk::ToolInputDelta { .. } | UiMessageChunk::ToolInputStart { .. }
        )),
        "{chunks:#?}"
    );
    assert!(chunks.iter().any(|c| matches!(c, UiMessageChunk::ToolInputAvailable { tool_call_id, .. } if tool_call_id == "call_1")));
    assert!(
        !chunks
            .iter()
            .any(|c| matches!(c, UiMessageChunk::TextDelta { delta, .. } if delta.is_empty()))
    );
}

#[test]
fn nothing_after_finish_is_read() {
    let mut events: Vec<_> = events_of(scenarios::tool_error(), "Atlantis?")
        .into_iter()
        .map(Ok)
        .collect();
    events.push(Ok(AgentEvent::TextDelta("late".into())));
    events.push(Err(HaloError::Model(ModelError::Other("late".into()))));
    let chunks = chunks(events, StreamOptions::new());
    assert_eq!(
        chunks.last(),
        Some(&UiMessageChunk::Finish {
            finish_reason: Some(UiFinishReason::Stop)
        })
    );
    assert!(!json_lines(&chunks).iter().any(|l| l.contains("late")));
}

#[test]
fn events_that_stop_before_finish_end_as_an_error() {
    let mut events = events_of(scenarios::tool_run(), "Weather?");
    // Cut inside the second step's text.
    let cut = events
        .iter()
        .rposition(|e| matches!(e, AgentEvent::TextDelta(_)))
        .unwrap();
    events.truncate(cut + 1);
    let chunks = chunks(events.into_iter().map(Ok).collect(), StreamOptions::new());
    let tail = json_lines(&chunks[chunks.len() - 4..]);
    assert_eq!(
        tail,
        [
            r#"{"type":"text-end","id":"text-2"}"#,
            r#"{"type":"error","errorText":"the agent's event stream ended before the run finished"}"#,
            r#"{"type":"finish-step"}"#,
            r#"{"type":"finish","finishReason":"error"}"#,
        ]
    );
}

#[test]
fn an_error_between_steps_sends_no_extra_finish_step() {
    // Trigger: max_steps is checked before a step starts, after the last step finished.
    let model = ScriptedModel::new().tool_call("get_weather", serde_json::json!({"city": "Paris"}));
    let agent = HaloAgent::builder(model)
        .tool(scenarios::GetWeather)
        .unwrap()
        .max_steps(1)
        .build();
    let text = scenarios::transcript(
        agent,
        "Weather?",
        StreamOptions::new().with_error_text(|e| e.to_string()),
    );
    assert!(
        text.ends_with(concat!(
            "data: {\"type\":\"finish-step\"}\n\n",
            "data: {\"type\":\"error\",\"errorText\":\"the run reached max_steps (1) before the model gave a final answer; raise max_steps or simplify the task\"}\n\n",
            "data: {\"type\":\"finish\",\"finishReason\":\"error\"}\n\n",
            "data: [DONE]\n\n",
        )),
        "{text}"
    );
    assert_eq!(text.matches("finish-step").count(), 1);
}

#[test]
fn finish_reasons_map_to_the_ai_sdk_names() {
    for (reason, expected) in [
        (
            FinishReason::Stop,
            r#"{"type":"finish","finishReason":"stop"}"#,
        ),
        (
            FinishReason::Length,
            r#"{"type":"finish","finishReason":"length"}"#,
        ),
        (
            FinishReason::ContentFilter,
            r#"{"type":"finish","finishReason":"content-filter"}"#,
        ),
        (
            FinishReason::ToolCalls,
            r#"{"type":"finish","finishReason":"tool-calls"}"#,
        ),
        (
            FinishReason::Other("recitation".into()),
            r#"{"type":"finish","finishReason":"other"}"#,
        ),
    ] {
        let chunk = UiMessageChunk::Finish {
            finish_reason: Some(UiFinishReason::from(&reason)),
        };
        assert_eq!(chunk.to_json(), expected);
    }
}

#[test]
fn message_id_is_sent_in_start_only_when_set() {
    let events = events_of(
        HaloAgent::builder(ScriptedModel::new().text("a")).build(),
        "q",
    );
    let with = chunks(
        events.iter().cloned().map(Ok).collect(),
        StreamOptions::new().with_message_id("m-7"),
    );
    let without = chunks(events.into_iter().map(Ok).collect(), StreamOptions::new());
    assert_eq!(with[0].to_json(), r#"{"type":"start","messageId":"m-7"}"#);
    assert_eq!(without[0].to_json(), r#"{"type":"start"}"#);
}

fn data_parts(chunks: &[UiMessageChunk]) -> Vec<&DataPart> {
    chunks
        .iter()
        .filter_map(|c| match c {
            UiMessageChunk::Data(part) => Some(part),
            _ => None,
        })
        .collect()
}

#[test]
fn a_cache_bust_is_one_transient_data_part_with_the_ledger_numbers() {
    let events = events_of(scenarios::cache_bust(), "Weather?");
    let chunks = chunks(events.into_iter().map(Ok).collect(), StreamOptions::new());
    let parts = data_parts(&chunks);
    assert_eq!(parts.len(), 1, "{chunks:#?}");
    let part = parts[0];
    assert_eq!(
        (part.name.as_str(), part.transient),
        (CACHE_BUST_PART, true)
    );
    assert_eq!(part.id, None);
    let cause = part.data["cause"].as_str().unwrap_or_default().to_owned();
    assert!(
        cause.starts_with("the provider read 0 of about 5000 cacheable tokens"),
        "{cause}"
    );
    assert_eq!(
        part.data,
        json!({
            "call": 2,
            "expectedCachedTokens": 5000,
            "observedCachedTokens": 0,
            "inputTokens": 5100,
            "cause": cause,
        })
    );
    // The model call's text is closed first; the step finishes after the part.
    let at = chunks
        .iter()
        .position(|c| matches!(c, UiMessageChunk::Data(_)))
        .unwrap();
    assert_eq!(
        chunks[at - 1].to_json(),
        r#"{"type":"text-end","id":"text-1"}"#
    );
    assert_eq!(chunks[at + 1], UiMessageChunk::FinishStep);
}

#[test]
fn a_run_whose_cache_reads_meet_the_expectation_sends_no_data_part() {
    let events = events_of(scenarios::tool_run(), "Weather?");
    let chunks = chunks(events.into_iter().map(Ok).collect(), StreamOptions::new());
    assert!(data_parts(&chunks).is_empty(), "{chunks:#?}");
}

#[test]
fn without_halo_data_the_cache_bust_part_is_dropped_and_nothing_else_changes() {
    let events = events_of(scenarios::cache_bust(), "Weather?");
    let with = chunks(
        events.iter().cloned().map(Ok).collect(),
        StreamOptions::new(),
    );
    let without = chunks(
        events.into_iter().map(Ok).collect(),
        StreamOptions::new().with_halo_data(false),
    );
    let mut expected = with.clone();
    expected.retain(|c| !matches!(c, UiMessageChunk::Data(_)));
    assert_eq!(expected.len(), with.len() - 1);
    assert_eq!(without, expected);
}

#[test]
fn counts_the_provider_did_not_report_are_left_out_of_the_cache_bust_data() {
    let mut events = events_of(scenarios::cache_bust(), "Weather?");
    for event in &mut events {
        if let AgentEvent::CacheBust(check) = event {
            check.input_tokens = None;
        }
    }
    let chunks = chunks(events.into_iter().map(Ok).collect(), StreamOptions::new());
    let data = &data_parts(&chunks)[0].data;
    assert_eq!(data.get("inputTokens"), None);
    assert_eq!(data["expectedCachedTokens"], 5000);
}

#[test]
fn a_data_part_sends_its_id_and_leaves_out_transient_when_false() {
    let part = DataPart::new("halo-note", json!([1, "two"])).with_id("n-1");
    assert_eq!(
        UiMessageChunk::Data(part).to_json(),
        r#"{"type":"data-halo-note","id":"n-1","data":[1,"two"]}"#
    );
}

#[test]
fn steering_denials_and_step_usage_have_parts_of_their_own() {
    let events = events_of(scenarios::tool_error(), "Weather in Atlantis?");
    // Halo's events edited: a steering message entered before the second step, and the
    // call's error result stands for a denial.
    let mut edited: Vec<Result<AgentEvent, HaloError>> = Vec::new();
    let mut steps = 0;
    for event in events {
        if matches!(event, AgentEvent::StepStart { .. }) {
            steps += 1;
            if steps == 2 {
                edited.push(Ok(AgentEvent::Injected("in Celsius".into())));
            }
        }
        edited.push(Ok(event));
    }
    let call_id = edited
        .iter()
        .find_map(|e| match e {
            Ok(AgentEvent::ToolCall(call)) => Some(call.id.clone()),
            _ => None,
        })
        .unwrap();
    let options = StreamOptions::new()
        .with_denied_calls([call_id.to_string()])
        .with_step_usage(true);
    let lines = json_lines(&chunks(edited, options));
    assert!(lines.contains(&format!(
        r#"{{"type":"tool-output-denied","toolCallId":"{call_id}"}}"#
    )));
    assert!(!lines.iter().any(|l| l.contains("tool-output-error")));
    assert!(lines.contains(
        &r#"{"type":"steering-message","id":"steering-1","parts":[{"type":"text","text":"in Celsius"}]}"#
            .to_string()
    ));
    let usage: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains("data-halo-step-usage"))
        .collect();
    assert_eq!(usage.len(), 2, "one per step: {lines:?}");
    assert!(usage[0].starts_with(r#"{"type":"data-halo-step-usage","id":"usage-1","data":{"#));
    assert!(usage[1].contains(r#""step":2"#));
    // Without the options, the same error result is an error and no usage is sent.
    let plain = json_lines(&chunks(
        events_of(scenarios::tool_error(), "Weather in Atlantis?")
            .into_iter()
            .map(Ok)
            .collect(),
        StreamOptions::new(),
    ));
    assert!(plain.iter().any(|l| l.contains("tool-output-error")));
    assert!(!plain.iter().any(|l| l.contains("data-halo-step-usage")));
}
