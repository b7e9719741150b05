//! Loop detection: runs that must trigger each tier, and normal work that must not.

use halo_core::{
    AssistantMessage, CacheCheck, CacheVerdict, Fingerprint, FinishReason, LoopContext, LoopGuard,
    LoopKind, LoopVerdict, StepResult, ToolCall, ToolResult, Usage,
};
use halo_strategies::LoopSuppression;

/// One step: calls of (tool, arguments, result, is_error).
fn step(calls: &[(&str, &str, &str, bool)]) -> StepResult {
    let tool_calls: Vec<ToolCall> = calls
        .iter()
        .enumerate()
        .map(|(i, (name, args, _, _))| ToolCall::new(format!("c{i}"), *name, *args))
        .collect();
    let tool_results = tool_calls
        .iter()
        .zip(calls)
        .map(|(c, (_, _, out, err))| ToolResult {
            is_error: *err,
            ..ToolResult::ok(c, *out)
        })
        .collect();
    StepResult {
        message: AssistantMessage {
            tool_calls,
            ..AssistantMessage::default()
        },
        finish_reason: FinishReason::ToolCalls,
        usage: Usage::default(),
        tool_results,
        prefix_fingerprint: Fingerprint([0; 32]),
        cache: CacheCheck {
            call: 1,
            prefix_fingerprint: Fingerprint([0; 32]),
            prefix_changed: false,
            history_messages: 0,
            reused_history_messages: 0,
            expected_cached_tokens: None,
            observed_cached_tokens: None,
            history_rewritten: false,
            input_tokens: None,
            provider: None,
            provider_changed: false,
            verdict: CacheVerdict::Unreported,
        },
        agent: None,
    }
}

fn call(name: &str, args: &str, out: &str) -> StepResult {
    step(&[(name, args, out, false)])
}

fn error(name: &str, args: &str, out: &str) -> StepResult {
    step(&[(name, args, out, true)])
}

fn text(t: &str) -> StepResult {
    let mut s = step(&[]);
    s.message.text = t.into();
    s.finish_reason = FinishReason::Stop;
    s
}

/// The kind found after each prefix of `steps` (what the guard sees at each boundary).
fn kinds(steps: &[StepResult]) -> Vec<Option<LoopKind>> {
    let guard = LoopSuppression::default();
    (1..=steps.len())
        .map(|n| guard.find(&steps[..n]).map(|f| f.kind))
        .collect()
}

#[test]
fn the_same_call_three_times_in_a_row_is_a_repeated_call() {
    let steps = vec![
        call("read", r#"{"path": "a.rs"}"#, "fn a() {}"),
        call("read", r#"{ "path":"a.rs" }"#, "fn a() {}"),
        call("read", r#"{"path":"a.rs"}"#, "fn a() {}"),
    ];
    assert_eq!(kinds(&steps), [None, None, Some(LoopKind::RepeatedCall)]);
    let f = LoopSuppression::default().find(&steps).unwrap();
    assert_eq!(
        f.message,
        "`read` was called with the same arguments 3 times in a row"
    );
    assert!(
        f.nudge
            .starts_with("You have called `read` with the same arguments 3 times in a row.")
    );
}

#[test]
fn parallel_calls_in_one_step_count_in_call_order() {
    let a = r#"{"path":"a"}"#;
    let steps = vec![step(&[
        ("read", a, "x", false),
        ("read", a, "x", false),
        ("read", a, "x", false),
    ])];
    assert_eq!(kinds(&steps), [Some(LoopKind::RepeatedCall)]);
}

#[test]
fn a_b_and_a_b_c_alternation_over_three_rounds() {
    let (a, b, c) = (r#"{"path":"a"}"#, r#"{"path":"b"}"#, r#"{"path":"c"}"#);
    let ab: Vec<_> = (0..6)
        .map(|i| {
            if i % 2 == 0 {
                call("read", a, "A")
            } else {
                call("write", b, "ok")
            }
        })
        .collect();
    assert_eq!(
        kinds(&ab),
        [None, None, None, None, None, Some(LoopKind::Alternation)]
    );
    let abc: Vec<_> = (0..9)
        .map(|i| match i % 3 {
            0 => call("read", a, "A"),
            1 => call("read", b, "B"),
            _ => call("read", c, "C"),
        })
        .collect();
    let found = kinds(&abc);
    assert_eq!(found[..8], [None; 8]);
    assert_eq!(found[8], Some(LoopKind::Alternation));
    let f = LoopSuppression::default().find(&abc).unwrap();
    assert_eq!(
        f.message,
        "the calls cycled read → read → read with the same arguments 3 times"
    );
}

#[test]
fn the_same_error_three_times_in_six_results_is_a_repeated_error() {
    let err = "error: no such file: src/mian.rs";
    let steps = vec![
        error("read", r#"{"path":"src/mian.rs"}"#, err),
        call("ls", r#"{"path":"src"}"#, "main.rs lib.rs"),
        error("read", r#"{"path":"./src/mian.rs"}"#, err),
        call("ls", r#"{"path":"."}"#, "src Cargo.toml"),
        error("read", r#"{"path":"src//mian.rs"}"#, err),
    ];
    assert_eq!(
        kinds(&steps),
        [None, None, None, None, Some(LoopKind::RepeatedError)]
    );
    let f = LoopSuppression::default().find(&steps).unwrap();
    assert_eq!(
        f.message,
        format!("`read` failed 3 times with the same error: {err}")
    );
}

#[test]
fn steps_without_tool_calls_that_are_sent_back_are_a_monologue() {
    let steps = vec![
        text("Let me think."),
        text("Thinking more."),
        text("Still thinking."),
    ];
    assert_eq!(kinds(&steps), [None, None, Some(LoopKind::Monologue)]);
}

#[test]
fn reading_different_files_is_not_a_loop() {
    let steps: Vec<_> = (0..12)
        .map(|i| call("read", &format!(r#"{{"path":"src/f{i}.rs"}}"#), "fn f() {}"))
        .collect();
    assert_eq!(kinds(&steps), vec![None; 12]);
}

#[test]
fn an_edit_test_edit_cycle_with_changing_edits_is_not_a_loop() {
    // The same test command between different edits, failing with different output.
    let test = r#"{"command":"cargo test"}"#;
    let mut steps = Vec::new();
    for i in 0..6 {
        steps.push(call(
            "edit",
            &format!(r#"{{"path":"src/lib.rs","old":"v{i}","new":"v{}"}}"#, i + 1),
            "edited",
        ));
        steps.push(error(
            "bash",
            test,
            &format!("test failed: expected {}, got {i}", i + 1),
        ));
    }
    steps.push(call(
        "edit",
        r#"{"path":"src/lib.rs","old":"v6","new":"v7"}"#,
        "edited",
    ));
    steps.push(call("bash", test, "test result: ok"));
    assert_eq!(kinds(&steps), vec![None; steps.len()]);
}

#[test]
fn polling_twice_then_moving_on_is_not_a_loop() {
    let steps = vec![
        call("bash", r#"{"command":"cargo build"}"#, "error[E0425]"),
        call("edit", r#"{"path":"a.rs","old":"x","new":"y"}"#, "edited"),
        call("bash", r#"{"command":"cargo build"}"#, "Finished"),
        call("bash", r#"{"command":"cargo build"}"#, "Finished"),
        call("read", r#"{"path":"README.md"}"#, "# Halo"),
    ];
    assert_eq!(kinds(&steps), vec![None; 5]);
}

#[test]
fn an_old_loop_does_not_count_once_the_newest_step_moved_on() {
    let a = r#"{"path":"a"}"#;
    let steps = vec![
        call("read", a, "A"),
        call("read", a, "A"),
        call("read", a, "A"),
        call("ls", "{}", "a b"),
    ];
    assert_eq!(kinds(&steps)[3], None);
}

#[test]
fn the_first_loop_is_nudged_and_a_loop_after_the_nudge_stops() {
    let guard = LoopSuppression::default();
    let a = r#"{"path":"a"}"#;
    let steps = vec![
        call("read", a, "A"),
        call("read", a, "A"),
        call("read", a, "A"),
    ];
    let first = guard.check(LoopContext {
        steps: &steps,
        nudges: 0,
    });
    assert!(
        matches!(&first, LoopVerdict::Nudge(t) if t.contains("`read`")),
        "{first:?}"
    );
    let mut more = steps.clone();
    more.push(call("read", a, "A"));
    assert_eq!(
        guard.check(LoopContext {
            steps: &more,
            nudges: 1
        }),
        LoopVerdict::Stop {
            kind: LoopKind::RepeatedCall,
            message: "`read` was called with the same arguments 4 times in a row, after 1 nudge"
                .into()
        }
    );
}

#[test]
fn thresholds_are_configurable_and_zero_turns_a_tier_off() {
    let a = r#"{"path":"a"}"#;
    let steps = vec![call("read", a, "A"), call("read", a, "A")];
    let eager = LoopSuppression {
        repeated_call: 2,
        nudges: 0,
        ..LoopSuppression::default()
    };
    assert!(matches!(
        eager.check(LoopContext {
            steps: &steps,
            nudges: 0
        }),
        LoopVerdict::Stop {
            kind: LoopKind::RepeatedCall,
            ..
        }
    ));
    let off = LoopSuppression {
        repeated_call: 0,
        alternation_cycles: 0,
        repeated_error: 0,
        monologue_steps: 0,
        ..LoopSuppression::default()
    };
    let many: Vec<_> = (0..10).map(|_| error("read", a, "boom")).collect();
    assert_eq!(off.find(&many), None);
}
