//! Restate's own journal of the `run` invocations, read from its SQL introspection
//! (`sys_journal` joined with `sys_invocation`, through the admin API's `/query`).

use std::collections::HashMap;

use serde_json::Value;

use crate::harness::Restate;

/// One run's journal in Restate (`sys_journal`): its journaled steps (`ctx.run`), in order,
/// each with how many times it completed successfully, and whether it ends with the
/// invocation's output.
#[derive(Debug)]
pub struct RunJournal {
    pub steps: Vec<(String, usize)>,
    /// Completions of no journaled step.
    pub stray: usize,
    pub has_output: bool,
}

impl RunJournal {
    /// The steps' names.
    pub fn names(&self) -> Vec<&str> {
        self.steps.iter().map(|(name, _)| name.as_str()).collect()
    }

    /// Whether every step completed exactly once and nothing else completed.
    pub fn each_step_once(&self) -> bool {
        self.stray == 0 && self.steps.iter().all(|(_, n)| *n == 1)
    }
}

impl Restate {
    /// The journal of every invocation of `HaloSession/run`, by invocation id.
    pub async fn run_journals(&self) -> HashMap<String, RunJournal> {
        let rows = self
            .query(
                "SELECT j.id, j.index, j.entry_lite_json FROM sys_journal j \
                 JOIN sys_invocation i ON j.id = i.id WHERE i.target_handler_name = 'run' \
                 ORDER BY j.id, j.index",
            )
            .await;
        let mut entries: HashMap<String, Vec<Value>> = Default::default();
        for row in rows {
            let entry: Value =
                serde_json::from_str(row["entry_lite_json"].as_str().unwrap_or("null"))
                    .expect("a journal entry");
            entries
                .entry(row["id"].as_str().unwrap_or_default().to_string())
                .or_default()
                .push(entry);
        }
        entries
            .into_iter()
            .map(|(id, entries)| {
                let journal = RunJournal::of(&id, &entries);
                (id, journal)
            })
            .collect()
    }
}

impl RunJournal {
    /// Reads the entries of one invocation (`entry_lite_json`: a `Command::Run` names a step
    /// and its completion id; a `Notification` of a `Run` completion carries that id).
    fn of(id: &str, entries: &[Value]) -> RunJournal {
        let mut steps: Vec<(String, u64)> = Vec::new();
        let mut completed: HashMap<u64, usize> = Default::default();
        for entry in entries {
            if let Some(run) = entry.pointer("/Command/Run") {
                steps.push((
                    run["name"].as_str().unwrap_or_default().to_string(),
                    run["completion_id"].as_u64().unwrap_or(u64::MAX),
                ));
            }
            if entry.pointer("/Notification/ty/Completion") == Some(&Value::from("Run")) {
                assert_eq!(entry["Notification"]["result"], "Success", "{id}: {entry}");
                let n = entry
                    .pointer("/Notification/id/CompletionId")
                    .and_then(Value::as_u64)
                    .unwrap_or(u64::MAX);
                *completed.entry(n).or_default() += 1;
            }
        }
        let stray = completed
            .keys()
            .filter(|n| !steps.iter().any(|(_, s)| s == *n))
            .count();
        RunJournal {
            steps: steps
                .into_iter()
                .map(|(name, n)| (name, completed.get(&n).copied().unwrap_or(0)))
                .collect(),
            stray,
            has_output: entries
                .last()
                .and_then(|e| e.pointer("/Command/Output"))
                .is_some(),
        }
    }
}
