//! How the Responses dialect keeps a turn's provider items in halo-core's neutral
//! [`AssistantMessage`](halo_core::AssistantMessage), so a later request replays them
//! verbatim and in their order.
//!
//! A Responses turn is an ordered list of output items. The API wants the `reasoning` items
//! of a turn sent back with their `encrypted_content` when the caller keeps the state
//! (`store: false`), each followed by the item that followed it — the `message` by its
//! `msg_…` id, the `function_call` by its `fc_…` id — or it answers 400 `Item 'rs_…' of type
//! 'reasoning' was provided without its required following item.` So:
//! - a `reasoning` or `message` item is kept as a [`Reasoning`](halo_core::Reasoning) whose
//!   signature is [`ITEM_PREFIX`], the item's place in the output, its type, and the item's
//!   JSON exactly as the API sent it (`openai-responses-item:0:reasoning:{…}`); the text is
//!   the reasoning summary (empty for a message item, whose text is the turn's text);
//! - a `function_call` is a [`ToolCall`] whose `provider_data` holds `{"responses_item":
//!   {"id": "fc_…", "index": 1}}`; its name and arguments stay the call's own, so a
//!   repaired call is replayed repaired.
//!
//! Other dialects leave such reasoning out ([`is_responses_item`]): its signature means
//! nothing to them.

use halo_core::ToolCall;
use serde_json::{Value, json};

/// The signature prefix of a [`Reasoning`](halo_core::Reasoning) holding a Responses output
/// item: a reasoning or message item kept verbatim for replay (`openai-responses-item:{place}:{type}:{json}`).
pub const ITEM_PREFIX: &str = "openai-responses-item:";

/// The key of a [`ToolCall::provider_data`] object under which the Responses dialect keeps a
/// call's item id and place.
pub const CALL_KEY: &str = "responses_item";

/// The signature of an output item: its place in the output, its type, its JSON as sent.
pub(crate) fn opaque(index: usize, kind: &str, raw: &str) -> String {
    format!("{ITEM_PREFIX}{index}:{kind}:{raw}")
}

/// The place, type and JSON of a signature [`opaque`] wrote; `None` for any other.
pub(crate) fn opaque_item(signature: &str) -> Option<(usize, &str, &str)> {
    let rest = signature.strip_prefix(ITEM_PREFIX)?;
    let (index, rest) = rest.split_once(':')?;
    let (kind, raw) = rest.split_once(':')?;
    Some((index.parse().ok()?, kind, raw))
}

/// Whether a reasoning signature holds a Responses item, which only the Responses dialect
/// can replay.
pub fn is_responses_item(signature: &str) -> bool {
    signature.starts_with(ITEM_PREFIX)
}

/// The `provider_data` of a call: its item id (when sent) and place in the output.
pub(crate) fn call_data(id: Option<&str>, index: usize) -> Value {
    json!({ CALL_KEY: { "id": id, "index": index } })
}

/// A call's item id and place in its output, when the Responses dialect read it.
pub(crate) fn call_item(call: &ToolCall) -> (Option<&str>, Option<usize>) {
    let Some(item) = call.provider_data.as_ref().and_then(|d| d.get(CALL_KEY)) else {
        return (None, None);
    };
    (
        item.get("id").and_then(Value::as_str),
        item.get("index")
            .and_then(Value::as_u64)
            .and_then(|i| usize::try_from(i).ok()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_item_signature_round_trips_its_place_type_and_bytes() {
        let raw = r#"{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"e:1"}"#;
        let sig = opaque(3, "reasoning", raw);
        assert!(is_responses_item(&sig));
        assert_eq!(opaque_item(&sig), Some((3, "reasoning", raw)));
        assert_eq!(opaque_item("redacted_thinking:abc"), None);
        let mut call = ToolCall::new("call_1", "ls", "{}");
        call.provider_data = Some(call_data(Some("fc_1"), 2));
        assert_eq!(call_item(&call), (Some("fc_1"), Some(2)));
        assert_eq!(call_item(&ToolCall::new("c", "ls", "")), (None, None));
    }
}
