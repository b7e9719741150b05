//! [`WeatherScript`]: a deterministic model for the demo and its browser test. It reads the
//! conversation like a model would: after a user message it streams a sentence and calls
//! `get_weather` for the city named after "in"; after the tool's result it streams an answer
//! quoting that result. Word by word, a few milliseconds apart, so the page visibly streams.

use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt as _;
use halo_core::{
    AssistantMessage, FinishReason, Message, ModelAdapter, ModelError, ModelEventStream,
    ModelRequest, ModelResponse, ModelStreamEvent, ToolCall, Usage,
};

/// Pause between streamed pieces.
const PACE: Duration = Duration::from_millis(25);

/// See the module docs.
#[derive(Debug, Clone, Copy, Default)]
pub struct WeatherScript;

/// The city after the word "in" (`"Weather in oslo?"` → `Oslo`), else Paris.
fn city_in(text: &str) -> String {
    let words: Vec<&str> = text.split_whitespace().collect();
    let after_in = words
        .windows(2)
        .rev()
        .find(|w| w[0].eq_ignore_ascii_case("in"))
        .map(|w| w[1].trim_matches(|c: char| !c.is_alphanumeric()))
        .filter(|c| !c.is_empty());
    match after_in {
        Some(city) => {
            let mut chars = city.chars();
            chars
                .next()
                .map(|first| first.to_uppercase().chain(chars).collect())
                .unwrap_or_default()
        }
        None => "Paris".into(),
    }
}

fn respond(history: &[Message]) -> ModelResponse {
    let last_user = history
        .iter()
        .rposition(|m| matches!(m, Message::User { .. }));
    let since_user = last_user.map_or(history, |i| &history[i + 1..]);
    let result = since_user.iter().rev().find_map(|m| match m {
        Message::Tool(r) => Some(r),
        _ => None,
    });
    let city = since_user
        .iter()
        .flat_map(|m| m.tool_calls())
        .find_map(|c| c.arguments().ok()?.get("city")?.as_str().map(str::to_owned))
        .unwrap_or_else(|| {
            last_user.map_or_else(|| "Paris".into(), |i| city_in(&history[i].text()))
        });
    let usage = Usage::default();
    match result {
        Some(result) => ModelResponse {
            message: AssistantMessage {
                text: format!("The weather in {city}: {}.", result.content),
                ..AssistantMessage::default()
            },
            finish_reason: FinishReason::Stop,
            usage,
            model: Some("weather-script".into()),
        },
        None => {
            let arguments = serde_json::json!({ "city": city }).to_string();
            let id = format!("call_{}", history.len());
            ModelResponse {
                message: AssistantMessage {
                    text: format!("Let me check the weather in {city}."),
                    tool_calls: vec![ToolCall::new(id, "get_weather", arguments)],
                    ..AssistantMessage::default()
                },
                finish_reason: FinishReason::ToolCalls,
                usage,
                model: Some("weather-script".into()),
            }
        }
    }
}

/// The response as stream events: the text word by word, each tool call's arguments in two
/// pieces, then `Finish`.
fn events(response: ModelResponse) -> Vec<ModelStreamEvent> {
    let mut events = Vec::new();
    let mut rest = response.message.text.as_str();
    while !rest.is_empty() {
        let cut = rest[1..].find(' ').map_or(rest.len(), |i| i + 1);
        events.push(ModelStreamEvent::TextDelta(rest[..cut].to_owned()));
        rest = &rest[cut..];
    }
    for (index, call) in response.message.tool_calls.iter().enumerate() {
        events.push(ModelStreamEvent::ToolCallStart {
            index,
            id: call.id.clone(),
            name: call.name.clone(),
        });
        let raw = &call.raw_arguments;
        let half = (1..=raw.len() / 2)
            .rev()
            .find(|&i| raw.is_char_boundary(i))
            .unwrap_or(0);
        for piece in [&raw[..half], &raw[half..]] {
            events.push(ModelStreamEvent::ToolCallDelta {
                index,
                arguments: piece.to_owned(),
            });
        }
    }
    events.push(ModelStreamEvent::Finish(response));
    events
}

#[async_trait]
impl ModelAdapter for WeatherScript {
    fn provider(&self) -> &str {
        "scripted"
    }

    fn model_name(&self) -> &str {
        "weather-script"
    }

    async fn generate(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        Ok(respond(request.history))
    }

    fn stream<'a>(&'a self, request: ModelRequest<'a>) -> ModelEventStream<'a> {
        let events = events(respond(request.history));
        futures::stream::iter(events)
            .then(|event| async move {
                tokio::time::sleep(PACE).await;
                Ok(event)
            })
            .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_city_is_the_word_after_in() {
        assert_eq!(city_in("What is the weather in oslo?"), "Oslo");
        assert_eq!(city_in("Weather in Lisbon, please"), "Lisbon");
        assert_eq!(city_in("How is the weather"), "Paris");
    }

    #[test]
    fn a_call_then_an_answer_from_the_result() {
        let mut history = vec![Message::user("Weather in Oslo?")];
        let first = respond(&history);
        assert_eq!(first.finish_reason, FinishReason::ToolCalls);
        let call = first.message.tool_calls[0].clone();
        assert_eq!(call.raw_arguments, r#"{"city":"Oslo"}"#);
        history.push(Message::Assistant(first.message));
        history.push(Message::Tool(halo_core::ToolResult::ok(
            &call,
            "snow, -3 °C",
        )));
        let second = respond(&history);
        assert_eq!(second.message.text, "The weather in Oslo: snow, -3 °C.");
        let text: String = events(second)
            .into_iter()
            .filter_map(|e| match e {
                ModelStreamEvent::TextDelta(d) => Some(d),
                _ => None,
            })
            .collect();
        assert_eq!(text, "The weather in Oslo: snow, -3 °C.");
    }
}
