//! The exact bytes of each scripted scenario, pinned in `tests/data/<name>.sse` (the files
//! the Node test feeds to the `ai` package). `UPDATE_EXPECT=1 cargo test -p halo-stream`
//! rewrites them; review the diff.

use std::path::PathBuf;

use crate::scenarios;

fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

#[test]
fn every_scenario_matches_its_pinned_transcript() {
    let update = std::env::var_os("UPDATE_EXPECT").is_some();
    let mut mismatches = Vec::new();
    for (name, agent, input, options) in scenarios::all() {
        let actual = scenarios::transcript(agent, input, options);
        let path = data_dir().join(format!("{name}.sse"));
        if update {
            std::fs::write(&path, &actual).expect("write the transcript");
            continue;
        }
        let expected = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e}; run with UPDATE_EXPECT=1", path.display()));
        if actual != expected {
            mismatches.push(format!(
                "{name}: differs from {}\n--- expected\n{expected}\n--- actual\n{actual}",
                path.display()
            ));
        }
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}

#[test]
fn tool_error_run_is_exactly_these_frames() {
    let actual = scenarios::transcript(
        scenarios::tool_error(),
        "Weather in Atlantis?",
        halo_stream::StreamOptions::new(),
    );
    let expected = concat!(
        "data: {\"type\":\"start\"}\n\n",
        "data: {\"type\":\"start-step\"}\n\n",
        "data: {\"type\":\"tool-input-start\",\"toolCallId\":\"call_1\",\"toolName\":\"get_weather\"}\n\n",
        "data: {\"type\":\"tool-input-delta\",\"toolCallId\":\"call_1\",\"inputTextDelta\":\"{\\\"city\\\":\\\"Atlantis\\\"}\"}\n\n",
        "data: {\"type\":\"tool-input-available\",\"toolCallId\":\"call_1\",\"toolName\":\"get_weather\",\"input\":{\"city\":\"Atlantis\"}}\n\n",
        "data: {\"type\":\"tool-output-error\",\"toolCallId\":\"call_1\",\"errorText\":\"unknown city `Atlantis`; try a real city such as Paris\"}\n\n",
        "data: {\"type\":\"finish-step\"}\n\n",
        "data: {\"type\":\"start-step\"}\n\n",
        "data: {\"type\":\"text-start\",\"id\":\"text-1\"}\n\n",
        "data: {\"type\":\"text-delta\",\"id\":\"text-1\",\"delta\":\"I could not find Atlantis.\"}\n\n",
        "data: {\"type\":\"text-end\",\"id\":\"text-1\"}\n\n",
        "data: {\"type\":\"finish-step\"}\n\n",
        "data: {\"type\":\"finish\",\"finishReason\":\"stop\"}\n\n",
        "data: [DONE]\n\n",
    );
    assert_eq!(actual, expected);
}

#[test]
fn model_error_mid_answer_closes_the_text_then_error_and_finish() {
    let actual = scenarios::transcript(
        scenarios::model_error(),
        "What is the answer?",
        halo_stream::StreamOptions::new(),
    );
    let expected = concat!(
        "data: {\"type\":\"start\"}\n\n",
        "data: {\"type\":\"start-step\"}\n\n",
        "data: {\"type\":\"text-start\",\"id\":\"text-1\"}\n\n",
        "data: {\"type\":\"text-delta\",\"id\":\"text-1\",\"delta\":\"The answer is\"}\n\n",
        "data: {\"type\":\"text-end\",\"id\":\"text-1\"}\n\n",
        // The default error text hides the provider's message from the browser.
        "data: {\"type\":\"error\",\"errorText\":\"An error occurred.\"}\n\n",
        "data: {\"type\":\"finish-step\"}\n\n",
        "data: {\"type\":\"finish\",\"finishReason\":\"error\"}\n\n",
        "data: [DONE]\n\n",
    );
    assert_eq!(actual, expected);
}
