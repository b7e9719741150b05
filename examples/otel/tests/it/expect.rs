//! What a backend must see of one [`otel::weather_run`]: the GenAI conventions' span names
//! and kinds, the run → step → chat / execute_tool tree, and every token count an integer.
//! The spans come in a neutral shape, so that the in-memory exporter's spans and the OTLP
//! receiver's are checked by the same code.

use std::collections::BTreeMap;

/// An attribute value, typed as it left the process.
#[derive(Debug, Clone, PartialEq)]
pub enum Attr {
    Int(i64),
    Double(f64),
    Bool(bool),
    Str(String),
    StrArray(Vec<String>),
    /// Any other type, by its name.
    Other(String),
}

/// One exported span.
#[derive(Debug, Clone)]
pub struct SpanView {
    pub name: String,
    /// The OTLP enum's name: `SPAN_KIND_CLIENT`, `SPAN_KIND_INTERNAL`, ...
    pub kind: String,
    /// The OTLP enum's name: `STATUS_CODE_UNSET`, `STATUS_CODE_ERROR`, ...
    pub status: String,
    pub trace_id: String,
    pub span_id: String,
    /// Empty for a root span.
    pub parent_span_id: String,
    pub attributes: BTreeMap<String, Attr>,
}

impl SpanView {
    fn attr(&self, key: &str) -> &Attr {
        self.attributes
            .get(key)
            .unwrap_or_else(|| panic!("{}: no {key} in {:?}", self.name, self.attributes))
    }

    fn int(&self, key: &str) -> i64 {
        match self.attr(key) {
            Attr::Int(n) => *n,
            other => panic!("{}: {key} is {other:?}, not an integer", self.name),
        }
    }

    fn str(&self, key: &str) -> &str {
        match self.attr(key) {
            Attr::Str(s) => s,
            other => panic!("{}: {key} is {other:?}, not a string", self.name),
        }
    }
}

/// Halo's own counts (the token counts are every key with `tokens` in it).
const HALO_COUNTS: &[&str] = &[
    "halo.step",
    "halo.steps",
    "halo.cache.busts",
    "halo.prefix.changes",
    "halo.history.rewrites",
];

/// Checks the spans of one `weather_run` (a tool call, then the answer) and returns the
/// run's root span.
pub fn weather_run(spans: &[SpanView]) -> &SpanView {
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    let named =
        |name: &str| -> Vec<&SpanView> { spans.iter().filter(|s| s.name == name).collect() };
    let roots: Vec<&SpanView> = spans
        .iter()
        .filter(|s| s.parent_span_id.is_empty())
        .collect();
    assert_eq!(roots.len(), 1, "one root span among {names:?}");
    let run = roots[0];
    assert_eq!(run.name, format!("invoke_agent {}", otel::AGENT_NAME));
    assert_eq!(spans.len(), 6, "run, 2 steps, 2 chats, 1 tool: {names:?}");
    for span in spans {
        assert_eq!(span.trace_id, run.trace_id, "{}: one trace", span.name);
        assert!(
            !span.attributes.contains_key("gen_ai.system"),
            "{}: the deprecated gen_ai.system",
            span.name
        );
        for (key, value) in &span.attributes {
            if key.contains("tokens") || HALO_COUNTS.contains(&key.as_str()) {
                assert!(
                    matches!(value, Attr::Int(_)),
                    "{}: {key} left as {value:?}, not an integer",
                    span.name
                );
            }
        }
    }
    let children_of = |parent: &SpanView| -> Vec<&SpanView> {
        spans
            .iter()
            .filter(|s| s.parent_span_id == parent.span_id)
            .collect()
    };

    // The run: invoke_agent, internal, with the run's totals.
    assert_eq!(run.kind, "SPAN_KIND_INTERNAL");
    assert_eq!(run.str("gen_ai.operation.name"), "invoke_agent");
    assert_eq!(run.str("gen_ai.provider.name"), "deepseek");
    assert_eq!(run.str("gen_ai.request.model"), otel::MODEL);
    assert_eq!(run.str("gen_ai.agent.name"), otel::AGENT_NAME);
    assert_eq!(run.str("gen_ai.conversation.id"), otel::SESSION_ID);
    assert_eq!(run.int("halo.steps"), 2);
    assert_eq!(run.int("halo.cache.busts"), 0);

    // Two steps under the run, a chat under each, the tool under the first.
    let steps = children_of(run);
    assert_eq!(
        steps.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
        ["step", "step"],
        "the run's children"
    );
    assert_eq!(named("step").len(), 2);
    let mut chats = Vec::new();
    let mut tools = Vec::new();
    for step in &steps {
        assert_eq!(step.kind, "SPAN_KIND_INTERNAL");
        for child in children_of(step) {
            if child.name.starts_with("chat ") {
                chats.push((step.int("halo.step"), child));
            } else {
                tools.push((step.int("halo.step"), child));
            }
        }
    }
    chats.sort_by_key(|(step, _)| *step);
    assert_eq!(
        chats.iter().map(|(step, _)| *step).collect::<Vec<_>>(),
        [1, 2],
        "one chat under each step"
    );
    let [(_, first), (_, second)] = [chats[0], chats[1]];
    assert_eq!(tools.len(), 1, "one tool call");
    let (tool_step, tool) = tools[0];
    assert_eq!(
        tool_step, 1,
        "the tool runs in the step whose model call asked for it"
    );

    for chat in [first, second] {
        assert_eq!(chat.name, format!("chat {}", otel::MODEL));
        assert_eq!(chat.kind, "SPAN_KIND_CLIENT");
        assert_eq!(chat.status, "STATUS_CODE_UNSET");
        assert_eq!(chat.str("gen_ai.operation.name"), "chat");
        assert_eq!(chat.str("gen_ai.provider.name"), "deepseek");
        assert_eq!(chat.str("gen_ai.request.model"), otel::MODEL);
        assert_eq!(chat.str("gen_ai.conversation.id"), otel::SESSION_ID);
        assert!(chat.str("gen_ai.response.id").starts_with("chatcmpl-"));
        assert_eq!(chat.attr("gen_ai.request.stream"), &Attr::Bool(true));
        assert!(matches!(
            chat.attr("gen_ai.response.time_to_first_chunk"),
            Attr::Double(s) if *s >= 0.0
        ));
        assert!(chat.int("gen_ai.usage.input_tokens") > 0);
        assert!(chat.int("gen_ai.usage.output_tokens") > 0);
    }
    assert_eq!(
        first.attr("gen_ai.response.finish_reasons"),
        &Attr::StrArray(vec!["tool_calls".into()])
    );
    assert_eq!(
        second.attr("gen_ai.response.finish_reasons"),
        &Attr::StrArray(vec!["stop".into()])
    );
    // The second request starts with the first: DeepSeek's cache serves that part, and
    // the ledger expected it.
    assert_eq!(first.int("gen_ai.usage.cache_read.input_tokens"), 0);
    assert_eq!(first.str("halo.cache.verdict"), "cold");
    let read = second.int("gen_ai.usage.cache_read.input_tokens");
    assert!(read > 0, "the second call read nothing from the cache");
    assert!(
        read <= second.int("gen_ai.usage.input_tokens"),
        "input tokens include cached ones"
    );
    assert_eq!(second.str("halo.cache.verdict"), "hit");
    assert!(second.int("halo.cache.expected_read_tokens") > 0);

    assert_eq!(tool.name, "execute_tool weather");
    assert_eq!(tool.kind, "SPAN_KIND_INTERNAL");
    assert_eq!(tool.str("gen_ai.operation.name"), "execute_tool");
    assert_eq!(tool.str("gen_ai.tool.name"), "weather");
    assert_eq!(tool.str("gen_ai.tool.type"), "function");
    assert!(!tool.str("gen_ai.tool.call.id").is_empty());
    assert_eq!(tool.attr("halo.tool.is_error"), &Attr::Bool(false));

    // The run's totals are the sums of its calls'.
    for key in [
        "gen_ai.usage.input_tokens",
        "gen_ai.usage.output_tokens",
        "gen_ai.usage.cache_read.input_tokens",
    ] {
        assert_eq!(run.int(key), first.int(key) + second.int(key), "{key}");
    }
    run
}
