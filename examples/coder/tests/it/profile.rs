//! `coder profile` and `--profile`: the user's config file changed in place (comments and
//! order kept), a run on a profile's provider, model and base URL, and the session's own
//! record of its profile (the user's file untouched).

use halo_adapters::sim::SimReply;
use halo_adapters::sim::openai::OpenAiSim;
use halo_core::session::JournalEvent;

use super::{coder_text, describe, journal, run};

const FILE: &str =
    "# my profiles\nactive = \"work\" # the usual\n\n[profiles.work]\nprovider = \"anthropic\"\n";

fn profile_cmd(config: &std::path::Path, args: &[&str]) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_coder"));
    cmd.arg("profile")
        .args(args)
        .env("HALO_CONFIG", config)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    cmd
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn profile_use_set_and_list_keep_the_files_comments_and_order() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(&config, FILE).unwrap();
    for args in [
        &["set", "model", "qwen2.5-7b", "--profile", "home"][..],
        &["set", "provider", "openai", "--profile", "home"],
        &["set", "context_window", "32000"],
        &["use", "home"],
    ] {
        let out = run(profile_cmd(&config, args)).await;
        assert!(out.status.success(), "{args:?}: {}", describe(&out));
    }
    assert_eq!(
        std::fs::read_to_string(&config).unwrap(),
        "# my profiles\nactive = \"home\" # the usual\n\n[profiles.work]\nprovider = \"anthropic\"\ncontext_window = 32000\n\n[profiles.home]\nmodel = \"qwen2.5-7b\"\nprovider = \"openai\"\n"
    );
    let out = run(profile_cmd(&config, &["list"])).await;
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "  work  provider=anthropic context_window=32000\n* home  provider=openai model=qwen2.5-7b\n"
    );
    let out = run(profile_cmd(&config, &["use", "nope"])).await;
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("there is no profile `nope`; the profiles are: work, home"),
        "{}",
        describe(&out)
    );
    let out = run(profile_cmd(&config, &["set", "temperature", "1"])).await;
    assert!(!out.status.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_uses_the_profiles_model_and_url_and_the_session_keeps_its_choice() {
    let sim = OpenAiSim::openai().await.unwrap();
    sim.set_reply_script([SimReply::text("one"), SimReply::text("two")]);
    let project = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    let text = format!(
        "# profiles\n[profiles.sim]\nprovider = \"openai\"\nbase_url = \"{}\"\nmodel = \"profile-model\"\n",
        sim.base_url()
    );
    std::fs::write(&config, &text).unwrap();
    let session = dir.path().join("s.jsonl");
    let session = session.to_str().unwrap();

    // The environment points elsewhere: the profile's URL and model win.
    let mut cmd = coder_text(
        &sim,
        project.path(),
        &["--profile", "sim", "--session", session, "hi"],
    );
    cmd.env("HALO_CONFIG", &config)
        .env("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
        .env("OPENAI_MODEL", "env-model");
    let out = run(cmd).await;
    assert!(out.status.success(), "{}", describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("profile: sim"),
        "{}",
        describe(&out)
    );
    assert_eq!(sim.requests()[0]["model"], "profile-model");

    // The session recorded its profile; the user's file is untouched.
    assert_eq!(std::fs::read_to_string(&config).unwrap(), text);
    let recorded: Vec<serde_json::Value> = journal(std::path::Path::new(session))
        .await
        .into_iter()
        .filter_map(|e| match e {
            JournalEvent::Custom { kind, data, .. } if kind == "coder.settings" => Some(data),
            _ => None,
        })
        .collect();
    assert_eq!(recorded.len(), 1);
    assert_eq!(recorded[0]["profile"], "sim");
    assert_eq!(recorded[0]["sandbox"], "workspace-write");

    // The next turn of the session, without --profile, runs on the session's profile.
    let mut cmd = coder_text(&sim, project.path(), &["--session", session, "again"]);
    cmd.env("HALO_CONFIG", &config)
        .env("OPENAI_BASE_URL", "http://127.0.0.1:9/v1");
    let out = run(cmd).await;
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(sim.requests()[1]["model"], "profile-model");
}
