//! The safety policies of `halo_sandbox::policy`: the denylist on its own, then each policy
//! through the agent loop with a scripted model and a real `ContainerSandbox`.

mod approval;
mod denylist;
mod permission;
mod truncation;

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use halo_core::testing::ScriptedModel;
use halo_core::{HaloAgent, HaloAgentBuilder, Message, ToolHook, ToolResult};
use halo_sandbox::ContainerSandbox;
use halo_sandbox::policy::{ApprovalAnswer, ApprovalRequest, Approver};
use tempfile::TempDir;

/// A sandbox over a temporary folder holding a small project and a sentinel file.
pub struct Workspace {
    pub dir: TempDir,
    pub sandbox: ContainerSandbox,
}

pub const SENTINEL: &str = "SENTINEL.txt";

impl Workspace {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join("src")).expect("mkdir");
        std::fs::write(dir.path().join("src/main.rs"), "fn main() {}\n").expect("write");
        std::fs::write(dir.path().join(SENTINEL), "keep me\n").expect("write");
        let sandbox = ContainerSandbox::new(dir.path()).expect("sandbox");
        Workspace { dir, sandbox }
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    pub fn exists(&self, rel: &str) -> bool {
        self.path(rel).exists()
    }

    /// Every file under the root with its bytes.
    pub fn snapshot(&self) -> BTreeMap<PathBuf, Vec<u8>> {
        let mut files = BTreeMap::new();
        walk(self.dir.path(), self.dir.path(), &mut files);
        files
    }

    /// An agent with the sandbox's tools and `hooks`, in order.
    pub fn agent(&self, model: &ScriptedModel, hooks: Vec<Arc<dyn ToolHook>>) -> HaloAgent {
        self.builder(model, hooks).build()
    }

    pub fn builder(
        &self,
        model: &ScriptedModel,
        hooks: Vec<Arc<dyn ToolHook>>,
    ) -> HaloAgentBuilder {
        let mut b = HaloAgent::builder(model.clone())
            .system("You are a careful coding agent.")
            .tools(self.sandbox.tools())
            .expect("tools");
        for h in hooks {
            b = b.hook_shared(h);
        }
        b
    }
}

fn walk(root: &Path, dir: &Path, files: &mut BTreeMap<PathBuf, Vec<u8>>) {
    for entry in std::fs::read_dir(dir).expect("read_dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            walk(root, &path, files);
        } else {
            let rel = path.strip_prefix(root).expect("under root").to_path_buf();
            files.insert(rel, std::fs::read(&path).expect("read"));
        }
    }
}

/// An approver that gives scripted answers in order and records each request.
#[derive(Clone, Default)]
pub struct Answers {
    answers: Arc<Mutex<VecDeque<ApprovalAnswer>>>,
    pub asked: Arc<Mutex<Vec<ApprovalRequest>>>,
}

impl Answers {
    pub fn new(answers: impl IntoIterator<Item = ApprovalAnswer>) -> Self {
        Answers {
            answers: Arc::new(Mutex::new(answers.into_iter().collect())),
            asked: Arc::default(),
        }
    }

    /// The `(tool, summary)` of each request so far.
    pub fn asked(&self) -> Vec<(String, String)> {
        self.asked
            .lock()
            .unwrap()
            .iter()
            .map(|r| (r.tool.clone(), r.summary.clone()))
            .collect()
    }
}

#[async_trait]
impl Approver for Answers {
    async fn approve(&self, request: &ApprovalRequest) -> ApprovalAnswer {
        self.asked.lock().unwrap().push(request.clone());
        self.answers
            .lock()
            .unwrap()
            .pop_front()
            .expect("the approver was asked more often than scripted")
    }
}

/// The last tool result of a history (what the model read last).
pub fn last_result(history: &[Message]) -> &ToolResult {
    match history.last() {
        Some(Message::Tool(r)) => r,
        other => panic!("expected a tool result last, got {other:?}"),
    }
}

/// Every tool result of a run, in order: (tool, content, is_error).
pub fn results(out: &halo_core::GenerateTextResult) -> Vec<(String, String, bool)> {
    out.steps
        .iter()
        .flat_map(|s| &s.tool_results)
        .map(|r| (r.tool_name.to_string(), r.content.to_string(), r.is_error))
        .collect()
}
