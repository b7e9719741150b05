//! [`WeatherScript`]: a deterministic model for the demo and its browser tests. It reads
//! the conversation like a model would and answers the last user message (a steering
//! message too) by what it asks:
//!
//! - "weather in CITY": a sentence, a `get_weather` call, then an answer quoting the result;
//! - "count to N": the numbers 1 to N, one word at a time (something long to refresh in the
//!   middle of);
//! - "run `COMMAND`": a `bash` call (with `--coding-tools`, it waits for approval), then
//!   "The command said: RESULT" — the denial's text when it was denied;
//! - anything else: "You said: TEXT."
//!
//! Word by word, a few milliseconds apart, so the page visibly streams. Usage is reported
//! as a provider would (input tokens by bytes / 4, the shared part of the request as cache
//! reads), so the page has cache figures to show.

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

/// Whether `text` asks for the weather: it says so, or names a city ("And in Lisbon?").
fn asks_weather(text: &str) -> bool {
    let names_city = text
        .split_whitespace()
        .collect::<Vec<_>>()
        .windows(2)
        .any(|w| {
            w[0].eq_ignore_ascii_case("in") && w[1].chars().next().is_some_and(char::is_uppercase)
        });
    text.to_lowercase().contains("weather") || names_city
}

/// N in "count to N" (at most 500).
fn count_to(text: &str) -> Option<usize> {
    let lower = text.to_lowercase();
    let rest = &lower[lower.find("count to ")? + "count to ".len()..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok().map(|n: usize| n.min(500))
}

/// The command in "run `COMMAND`".
fn command_in(text: &str) -> Option<String> {
    let start = text.to_lowercase().find("run `")? + "run `".len();
    let end = text[start..].find('`')?;
    Some(text[start..start + end].to_owned())
}

fn answer(text: String, tool_calls: Vec<ToolCall>) -> ModelResponse {
    let finish_reason = if tool_calls.is_empty() {
        FinishReason::Stop
    } else {
        FinishReason::ToolCalls
    };
    ModelResponse {
        id: None,
        message: AssistantMessage {
            text,
            tool_calls,
            ..AssistantMessage::default()
        },
        finish_reason,
        usage: Usage::default(),
        model: Some("weather-script".into()),
        provider: None,
    }
}

fn respond(history: &[Message]) -> ModelResponse {
    let last_user = history
        .iter()
        .rposition(|m| matches!(m, Message::User { .. }));
    let since_user = last_user.map_or(history, |i| &history[i + 1..]);
    let asked = last_user.map(|i| history[i].text()).unwrap_or_default();
    let result = since_user.iter().rev().find_map(|m| match m {
        Message::Tool(r) => Some(r),
        _ => None,
    });
    if let Some(result) = result {
        return match result.tool_name.as_str() {
            "bash" => answer(
                format!("The command said: {}", result.content.trim()),
                vec![],
            ),
            _ => {
                let city = since_user
                    .iter()
                    .flat_map(|m| m.tool_calls())
                    .find_map(|c| c.arguments().ok()?.get("city")?.as_str().map(str::to_owned))
                    .unwrap_or_else(|| city_in(&asked));
                answer(
                    format!("The weather in {city}: {}.", result.content),
                    vec![],
                )
            }
        };
    }
    let id = format!("call_{}", history.len());
    if let Some(n) = count_to(&asked) {
        let numbers: Vec<String> = (1..=n).map(|i| i.to_string()).collect();
        return answer(format!("{}.", numbers.join(" ")), vec![]);
    }
    if let Some(command) = command_in(&asked) {
        let arguments = serde_json::json!({ "command": command }).to_string();
        return answer(
            format!("I will run `{command}`."),
            vec![ToolCall::new(id, "bash", arguments)],
        );
    }
    if asks_weather(&asked) {
        let city = city_in(&asked);
        let arguments = serde_json::json!({ "city": city }).to_string();
        return answer(
            format!("Let me check the weather in {city}."),
            vec![ToolCall::new(id, "get_weather", arguments)],
        );
    }
    answer(
        format!("You said: {}.", asked.trim_end_matches('.')),
        vec![],
    )
}

/// Usage as a provider with a prompt cache would report it: the request's size in tokens
/// (bytes / 4), of which the history before the newest message was read from the cache.
fn usage(request: &ModelRequest<'_>, response: &ModelResponse) -> Usage {
    let bytes = |messages: &[Message]| -> u64 {
        messages
            .iter()
            .map(|m| serde_json::to_string(m).map_or(0, |s| s.len() as u64))
            .sum()
    };
    let prefix = request.prefix.canonical_bytes().len() as u64;
    let history = request.history;
    let total = prefix + bytes(history);
    let cached = prefix + bytes(&history[..history.len().saturating_sub(1)]);
    Usage {
        input_tokens: Some(total / 4),
        cache_read_tokens: Some(cached / 4),
        output_tokens: Some(response.message.text.len() as u64 / 4 + 1),
        ..Usage::default()
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
            id: call.id.to_string(),
            name: call.name.to_string(),
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
        let mut response = respond(request.history);
        response.usage = usage(&request, &response);
        Ok(response)
    }

    fn stream<'a>(&'a self, request: ModelRequest<'a>) -> ModelEventStream<'a> {
        let mut response = respond(request.history);
        response.usage = usage(&request, &response);
        futures::stream::iter(events(response))
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

    fn texts(response: ModelResponse) -> String {
        events(response)
            .into_iter()
            .filter_map(|e| match e {
                ModelStreamEvent::TextDelta(d) => Some(d),
                _ => None,
            })
            .collect()
    }

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
        assert_eq!(texts(second), "The weather in Oslo: snow, -3 °C.");
    }

    #[test]
    fn counting_commands_and_steering_get_their_own_answers() {
        assert_eq!(texts(respond(&[Message::user("Count to 5")])), "1 2 3 4 5.");
        let run = respond(&[Message::user("Please run `ls -a` here")]);
        assert_eq!(run.message.tool_calls[0].name, "bash");
        assert_eq!(
            run.message.tool_calls[0].raw_arguments,
            r#"{"command":"ls -a"}"#
        );
        let history = vec![
            Message::user("Count to 3"),
            Message::assistant("1 2 3."),
            Message::user("Say hi too."),
        ];
        assert_eq!(texts(respond(&history)), "You said: Say hi too.");
        assert!(asks_weather("And in Lisbon?") && !asks_weather("Say hi in a minute"));
    }
}
