//! The harness through the CLI: against the loopback fake, the coder's first request already
//! carries the rules and the skill catalog, the model loads a skill and records a lesson, and
//! the task lands in the memory file and the lesson in the experience file, both of which the
//! next session's prefix shows (and this session's does not).

use halo_adapters::sim::SimReply;
use halo_adapters::sim::openai::OpenAiSim;
use serde_json::{Value, json};

use super::{coder_text, describe, run};

const SKILL: &str = "---\nname: release-notes\ndescription: Write release notes from the git log. Use when asked for a changelog.\n---\n# Release notes\nGroup commits by kind; see references/STYLE.md.\n";

fn system_text(request: &Value) -> String {
    let system = &request["messages"][0];
    assert_eq!(system["role"], "system", "{request}");
    match &system["content"] {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_request_carries_the_rules_and_the_catalog_and_the_model_loads_a_skill() {
    let project = tempfile::tempdir().unwrap();
    let dir = project.path();
    std::fs::write(dir.join("AGENTS.md"), "Always answer in one sentence.\n").unwrap();
    std::fs::create_dir_all(dir.join(".agents/skills/release-notes/references")).unwrap();
    std::fs::write(dir.join(".agents/skills/release-notes/SKILL.md"), SKILL).unwrap();
    std::fs::write(
        dir.join(".agents/skills/release-notes/references/STYLE.md"),
        "Be terse.",
    )
    .unwrap();
    std::fs::create_dir_all(dir.join(".claude/skills/Broken")).unwrap();
    std::fs::write(dir.join(".claude/skills/Broken/SKILL.md"), "no frontmatter").unwrap();

    let sim = OpenAiSim::openai().await.unwrap();
    sim.set_reply_script([
        SimReply::tool_call("load_skill", json!({"name": "release-notes"})),
        SimReply::tool_call(
            "record_experience",
            json!({"title": "notes need the style guide", "lesson": "Read references/STYLE.md of the release-notes skill first."}),
        ),
        SimReply::text("Notes written."),
    ]);
    let out = run(coder_text(&sim, dir, &["Write the release notes."])).await;
    assert!(out.status.success(), "{}", describe(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    for line in [
        "rules: AGENTS.md\n",
        "memory: none yet (.agent/memory.md)\n",
        "experience: none yet (.agent/experience.md)\n",
        "skills: 1 (release-notes), catalog ",
        "skipped .claude/skills/Broken/SKILL.md: it does not start with YAML frontmatter",
    ] {
        assert!(stdout.contains(line), "{line:?} in\n{}", describe(&out));
    }

    let requests = sim.requests();
    assert_eq!(requests.len(), 3, "{}", describe(&out));
    let first = system_text(&requests[0]);
    assert!(
        first.contains("## AGENTS.md (file `AGENTS.md`)\nAlways answer in one sentence."),
        "{first}"
    );
    assert!(first.contains("<name>release-notes</name>"), "{first}");
    assert!(first.contains("<location>.agents/skills/release-notes/SKILL.md</location>"));
    assert!(first.contains("Today's date: "));
    let tools: Vec<&str> = requests[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    for name in [
        "load_skill",
        "read_skill_file",
        "skill_run",
        "record_experience",
        "bash",
        "read",
    ] {
        assert!(tools.contains(&name), "{name} in {tools:?}");
    }
    // The skill body arrives as a tool result, the lesson goes to the experience file; the
    // prefix does not change.
    assert_eq!(system_text(&requests[1]), first);
    assert_eq!(system_text(&requests[2]), first);
    let lessons = std::fs::read_to_string(dir.join(".agent/experience.md")).unwrap();
    assert!(
        lessons.contains(": notes need the style guide\nRead references/STYLE.md of the release-notes skill first.\n"),
        "{lessons}"
    );
    let loaded = requests[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .expect("the load_skill result")["content"]
        .to_string();
    assert!(loaded.contains("Group commits by kind"), "{loaded}");
    assert!(loaded.contains("references/STYLE.md"), "{loaded}");

    // The task and its answer are remembered, and the next session's prefix shows them.
    let memory = std::fs::read_to_string(dir.join(".agent/memory.md")).unwrap();
    assert_eq!(memory.lines().count(), 1, "{memory}");
    assert!(
        memory.contains("task: Write the release notes. | result: Notes written."),
        "{memory}"
    );
    sim.set_reply_script([SimReply::text("Nothing to do.")]);
    let again = run(coder_text(&sim, dir, &["Anything left?"])).await;
    assert!(again.status.success(), "{}", describe(&again));
    let again_out = String::from_utf8_lossy(&again.stdout);
    assert!(again_out.contains("memory: 1 line from .agent/memory.md"));
    assert!(again_out.contains("experience: 1 card from .agent/experience.md"));
    let third = system_text(sim.requests().last().unwrap());
    assert!(
        third.contains("(file `.agent/experience.md`)\n## ")
            && third.contains(": notes need the style guide\n"),
        "{third}"
    );
    assert!(third.contains("(file `.agent/memory.md`)\n- "), "{third}");
    assert!(third.contains("task: Write the release notes."), "{third}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skill_run_goes_through_the_denylist_and_runs_in_the_os_sandbox() {
    let project = tempfile::tempdir().unwrap();
    let dir = project.path();
    std::fs::create_dir_all(dir.join(".agents/skills/release-notes")).unwrap();
    std::fs::write(dir.join(".agents/skills/release-notes/SKILL.md"), SKILL).unwrap();
    let outside = tempfile::tempdir().unwrap();
    let sim = OpenAiSim::openai().await.unwrap();
    sim.set_reply_script([
        SimReply::tool_call(
            "skill_run",
            json!({"name": "release-notes", "command": "rm -rf /", "output_files": []}),
        ),
        SimReply::tool_call(
            "skill_run",
            json!({"name": "release-notes", "command": format!("echo notes > \"$OUTPUT_DIR/n.md\"; echo x > {}/escape.txt; ls \"$SKILLS_DIR\"", outside.path().display()), "output_files": ["*.md"]}),
        ),
        SimReply::text("Done."),
    ]);
    let out = run(coder_text(&sim, dir, &["--yes", "Write the notes."])).await;
    assert!(out.status.success(), "{}", describe(&out));
    let last = sim.requests().pop().unwrap();
    let results: Vec<String> = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(results.len(), 2, "{}", describe(&out));
    assert!(
        results[0].contains("denylist") || results[0].contains("denied"),
        "{}",
        results[0]
    );
    assert!(results[1].starts_with("exit code: "), "{}", results[1]);
    assert!(
        results[1].contains("<stdout>\nSKILL.md\n</stdout>"),
        "{}",
        results[1]
    );
    assert!(
        results[1].contains("<output_file path=\"n.md\" bytes=\"6\">\nnotes\n</output_file>"),
        "{}",
        results[1]
    );
    assert!(
        !outside.path().join("escape.txt").exists(),
        "the OS sandbox keeps writes in the root"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_task_that_cannot_be_resumed_is_remembered_as_stopped() {
    let project = tempfile::tempdir().unwrap();
    let dir = project.path();
    std::fs::write(dir.join("a.txt"), "a\n").unwrap();
    let sim = OpenAiSim::openai().await.unwrap();
    sim.set_reply_script([
        SimReply::tool_call("read", json!({"path": "a.txt"})),
        SimReply::tool_call("read", json!({"path": "a.txt"})),
    ]);
    let out = run(coder_text(
        &sim,
        dir,
        &["--max-steps", "1", "Read a.txt forever."],
    ))
    .await;
    assert!(out.status.success(), "{}", describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("stopped: "),
        "{}",
        describe(&out)
    );
    let memory = std::fs::read_to_string(dir.join(".agent/memory.md")).unwrap();
    assert_eq!(memory.lines().count(), 1, "{memory}");
    assert!(
        memory.contains("task: Read a.txt forever. | result: stopped before an answer"),
        "{memory}"
    );
}
