//! The run as a real OTLP/HTTP receiver decoded it: `cargo xtask interop` runs the example
//! against `tests/receiver/receiver.py` (PyPI `opentelemetry-proto`) and names the spans it
//! wrote in `HALO_OTLP_SPANS`. Without the variable the test has nothing to read and says so.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::expect::{self, Attr, SpanView};

/// A value as the receiver wrote it: `{"type": <AnyValue's oneof field>, "value": ...}`.
fn value(v: &Value) -> Attr {
    let inner = &v["value"];
    match v["type"].as_str().unwrap_or_default() {
        // Protobuf's JSON would write an int64 as a string; the receiver writes the Python
        // int it decoded, and its type name says which field it came in.
        "int_value" => Attr::Int(inner.as_i64().expect("an int_value holds an integer")),
        "double_value" => Attr::Double(inner.as_f64().expect("a double_value holds a number")),
        "bool_value" => Attr::Bool(inner.as_bool().expect("a bool_value holds a boolean")),
        "string_value" => Attr::Str(inner.as_str().unwrap_or_default().to_string()),
        "array_value" => {
            let items = inner.as_array().cloned().unwrap_or_default();
            let strings: Option<Vec<String>> = items
                .iter()
                .map(|item| match value(item) {
                    Attr::Str(s) => Some(s),
                    _ => None,
                })
                .collect();
            strings.map_or_else(|| Attr::Other(format!("array {inner}")), Attr::StrArray)
        }
        other => Attr::Other(other.to_string()),
    }
}

fn attributes(map: &Value) -> BTreeMap<String, Attr> {
    map.as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.clone(), value(v)))
        .collect()
}

fn text(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_string()
}

#[test]
fn received_over_otlp_http_the_run_is_what_the_conventions_name() {
    let Some(path) = std::env::var_os("HALO_OTLP_SPANS") else {
        eprintln!("skip: HALO_OTLP_SPANS is not set (cargo xtask interop sets it)");
        return;
    };
    let lines = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("HALO_OTLP_SPANS={}: {e}", path.to_string_lossy()));
    let received: Vec<Value> = lines
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line per span"))
        .collect();
    assert!(
        !received.is_empty(),
        "the receiver got no spans: did the exporter reach it?"
    );
    let spans: Vec<SpanView> = received
        .iter()
        .map(|s| SpanView {
            name: text(&s["name"]),
            kind: text(&s["kind"]),
            status: text(&s["status"]),
            trace_id: text(&s["trace_id"]),
            span_id: text(&s["span_id"]),
            parent_span_id: text(&s["parent_span_id"]),
            attributes: attributes(&s["attributes"]),
        })
        .collect();
    expect::weather_run(&spans);
    for span in &received {
        assert_eq!(
            span["resource"]["service.name"]["value"],
            otel::SERVICE_NAME,
            "the resource's service.name"
        );
        assert_eq!(span["scope"], "halo", "the instrumentation scope");
    }
}
