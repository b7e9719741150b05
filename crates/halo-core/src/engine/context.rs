//! Keeping the history inside the context window, between steps: the context strategy's plan
//! applied (or refused when it breaks a rule), a compaction's summary requests — each kept
//! inside the window, in smaller chunks when it must be — the newest round's results cut
//! when they alone cannot fit, and the reactive path after a context-window error. Every
//! rewrite is counted, journaled with what it did, told to the ledger (the one expected
//! miss) and reported as an [`AgentEvent::HistoryRewritten`].

use serde::{Deserialize, Serialize};

use crate::agent::Config;
use crate::context::{
    self, Compaction, ContextBudget, ContextConfig, ContextPlan, SUMMARY_HEADER, TokenEstimator,
};
use crate::driver::SummaryCall;
use crate::error::HaloError;
use crate::guardrail::StepSettings;
use crate::log::MessageLog;
use crate::message::{ContentPart, Message};
use crate::model::{ModelError, ModelResponse};
use crate::run::{AgentEvent, HistoryRewrite, RewriteKind};
use crate::session::JournalEvent;
use crate::text::cut_middle;

use super::{Phase, RunState, Stage};

/// A compaction waiting for its summary, and where the summary stands.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct PendingCompaction {
    compaction: Compaction,
    #[serde(default)]
    chunks: Chunks,
}

/// How the summary is made: from the whole history in one request (itself a prompt-cache
/// hit), or — when that request would not fit the window — from what is summarized in
/// chunks, each request carrying the summary of the chunks before.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "chunks", rename_all = "snake_case")]
enum Chunks {
    #[default]
    Whole,
    Parts {
        /// The first message of each chunk, then the compaction's `keep_from`.
        bounds: Vec<usize>,
        /// The chunk to summarize next.
        next: usize,
        /// The summary of the chunks before it.
        summary: Option<String>,
    },
}

/// Texts in a summary request longer than this (bytes) are cut before a request is split.
const SUMMARY_TEXT_FLOOR: usize = 512;

/// Tool results of the newest round are not cut below this (bytes) to fit the window.
const LIVE_RESULT_FLOOR: usize = 1024;

impl RunState {
    /// At a step boundary with a context strategy: its plan (once per boundary), then the
    /// summary request of a compaction, while one waits.
    pub(super) fn context_step(&mut self, config: &Config, at_ms: u64) -> Option<SummaryCall> {
        let context = config.context.as_ref()?;
        if let Phase::Boundary {
            stage: Stage::Ready { planned, .. },
        } = &mut self.phase
            && !*planned
        {
            *planned = true;
            self.prepare_context(config, context, at_ms);
        }
        self.summary_call(config, context, at_ms)
    }

    /// The prefix's tokens by `estimator`, and the local estimate of a request with `log`.
    fn estimate(&self, config: &Config, estimator: &dyn TokenEstimator) -> (u64, u64) {
        let (prefix, _) = self.prefix(config);
        let prefix_tokens = estimator.estimate(&String::from_utf8_lossy(prefix.canonical_bytes()));
        let history = log_tokens(&self.log, estimator);
        (prefix_tokens, prefix_tokens + history)
    }

    /// Asks `context`'s strategy for a plan and applies it (or, for a compaction, leaves it
    /// waiting for its summary requests); then cuts results of the newest round that do not
    /// fit the window. Returns whether the history was rewritten.
    ///
    /// A plan that breaks a rule of [`ContextPlan`] — touching the live tool round, a
    /// replacement of another role or call, an index past the end — is not applied (a
    /// warning is logged), and neither is a plan that changes nothing.
    fn prepare_context(&mut self, config: &Config, context: &ContextConfig, at_ms: u64) -> bool {
        let estimator = &*context.estimator;
        let (_, local) = self.estimate(config, estimator);
        let budget = ContextBudget {
            // The agent resolves the model's window when it is built.
            context_window: context.window_for(None),
            used_tokens: (local as f64 * self.calibration).ceil() as u64,
            calibration: self.calibration,
            estimator,
        };
        let (prefix, _) = self.prefix(config);
        let mut plan = context.strategy.plan(prefix, &self.log, &budget);
        if let Some(compaction) = plan.compact.take() {
            let live = context::live_round_start(&self.log);
            let boundary = context::units(&self.log)
                .iter()
                .any(|u| u.start == compaction.keep_from);
            let task_ok = compaction.task.is_none_or(|t| {
                t < compaction.keep_from
                    && matches!(self.log.messages().nth(t), Some(Message::User { .. }))
            });
            if compaction.keep_from == 0 || compaction.keep_from > live || !boundary || !task_ok {
                tracing::warn!(
                    "a compaction was not made: it keeps from message {}, not the start of a \
                     unit before the live round (from {live}), or its task is not a user \
                     message before that",
                    compaction.keep_from
                );
            } else {
                self.compaction = Some(PendingCompaction {
                    compaction,
                    chunks: Chunks::Whole,
                });
            }
            self.last_estimate = Some(local);
            return false;
        }
        let before = self.log.len();
        let rewritten = !plan.is_keep() && self.apply_context_plan(plan);
        if rewritten {
            self.rewritten(
                RewriteKind::Strategy,
                before,
                "the context strategy evicted or dropped history to stay inside the window"
                    .to_string(),
                at_ms,
            );
        }
        let shortened = self.fit_live_round(config, context, at_ms);
        let (_, local) = self.estimate(config, estimator);
        self.last_estimate = Some(local);
        rewritten || shortened
    }

    /// The provider refused the planned call as over its context window: the local
    /// estimate ran low. Raises the calibration so the estimate of this request is at least
    /// the window, plans again as if the request were at the window's edge, and applies
    /// it; when anything changed the step is planned again with `settings`. Returns whether
    /// anything changed.
    pub(super) fn context_overflowed(
        &mut self,
        config: &Config,
        context: &ContextConfig,
        settings: StepSettings,
        at_ms: u64,
    ) -> bool {
        let window = context.window_for(None);
        if let Some(estimate) = self.last_estimate.filter(|e| *e > 0) {
            self.calibration = self.calibration.max(window as f64 / estimate as f64 * 1.05);
        }
        let before = (self.log.generation(), self.log.len());
        let rewritten = self.prepare_context(config, context, at_ms);
        let changed = rewritten
            || self.compaction.is_some()
            || before != (self.log.generation(), self.log.len());
        if changed {
            self.phase = Phase::Boundary {
                stage: Stage::Ready {
                    settings,
                    planned: true,
                },
            };
        }
        changed
    }

    /// Cuts the largest tool results of the newest round (which no strategy may touch)
    /// until the request fits the window, each keeping its head and tail and saying so.
    /// Returns whether any was cut.
    fn fit_live_round(&mut self, config: &Config, context: &ContextConfig, at_ms: u64) -> bool {
        let estimator = &*context.estimator;
        let window = context.window_for(None);
        let calibrated = |tokens: u64| (tokens as f64 * self.calibration).ceil() as u64;
        let (_, mut local) = self.estimate(config, estimator);
        if calibrated(local) <= window {
            return false;
        }
        let before = self.log.len();
        let live = context::live_round_start(&self.log);
        let mut cut = 0;
        while calibrated(local) > window {
            let largest = self
                .log
                .messages()
                .enumerate()
                .skip(live)
                .filter_map(|(i, m)| match m {
                    Message::Tool(r) if r.content.len() > LIVE_RESULT_FLOOR => {
                        Some((i, r.content.len()))
                    }
                    _ => None,
                })
                .max_by_key(|&(_, len)| len);
            let Some((i, len)) = largest else {
                break;
            };
            let Some(Message::Tool(result)) = self.log.messages().nth(i).cloned() else {
                break;
            };
            let tokens = context::message_tokens(estimator, &Message::Tool(result.clone()));
            let over = calibrated(local) - window;
            // Bytes per token of this message, to turn the excess into bytes (a margin of
            // a tenth more).
            let per_token = len as f64 / tokens.max(1) as f64;
            let excess = ((over as f64 / self.calibration) * per_token * 1.1).ceil() as usize;
            let target = len
                .saturating_sub(excess)
                .min(len / 2)
                .max(LIVE_RESULT_FLOOR);
            let Some(text) = cut_middle(
                &result.content,
                target,
                "the result did not fit the model's context window",
            ) else {
                break;
            };
            let shorter = Message::Tool(crate::message::ToolResult {
                content: text.into(),
                ..result
            });
            local = local - tokens + context::message_tokens(estimator, &shorter);
            self.log.replace(i, shorter);
            cut += 1;
        }
        if cut == 0 {
            return false;
        }
        self.rewritten(
            RewriteKind::Shortened,
            before,
            format!(
                "{cut} tool result(s) of the newest round were cut so that the request fits the {window}-token context window"
            ),
            at_ms,
        );
        true
    }

    /// The summary request of the compaction waiting, in the window: the whole history, or
    /// its next chunk — split again, or dropped instead, when even that does not fit.
    fn summary_call(
        &mut self,
        config: &Config,
        context: &ContextConfig,
        at_ms: u64,
    ) -> Option<SummaryCall> {
        loop {
            self.compaction.as_ref()?;
            if let Some(history) = self.summary_history(config, context) {
                let (_, object_prefix) = self.prefix(config);
                return Some(SummaryCall::new(history, object_prefix));
            }
            if !self.split_compaction() {
                self.drop_compaction(
                    "its summary request would not fit the context window, even in small chunks",
                    at_ms,
                );
                self.fit_live_round(config, context, at_ms);
                return None;
            }
        }
    }

    /// The history of the summary request of the waiting compaction's stage, inside the
    /// window; `None` when it must be split first. The whole history goes as it is (a
    /// prompt-cache hit) or not at all; in a chunk, texts too long for the window — a
    /// huge tool result, long reasoning — are cut, the longest first, before the chunk is
    /// split, and a chunk of one unit is cut until it fits.
    fn summary_history(&self, config: &Config, context: &ContextConfig) -> Option<Vec<Message>> {
        let pending = self.compaction.as_ref()?;
        let compaction = &pending.compaction;
        let estimator = &*context.estimator;
        let (prefix_tokens, _) = self.estimate(config, estimator);
        let window = context.window_for(None);
        let calibration = self.calibration;
        let tokens = |h: &[Message]| {
            let local = prefix_tokens
                + h.iter()
                    .map(|m| context::message_tokens(estimator, m))
                    .sum::<u64>();
            (local as f64 * calibration).ceil() as u64
        };
        let instruction = Message::user(compaction.instruction.clone());
        let Chunks::Parts {
            bounds,
            next,
            summary,
        } = &pending.chunks
        else {
            let mut history = self.history().into_owned();
            history.push(instruction);
            return (tokens(&history) <= window).then_some(history);
        };
        let (from, to) = (bounds[*next], bounds[*next + 1]);
        let mut history: Vec<Message> = compaction
            .task
            .filter(|t| *t < from)
            .and_then(|t| self.log.messages().nth(t).cloned())
            .into_iter()
            .collect();
        if let Some(summary) = summary {
            history.push(Message::user(format!("{SUMMARY_HEADER}\n{summary}")));
        }
        history.extend(self.log.messages().skip(from).take(to - from).cloned());
        history.push(instruction);
        let splittable = context::units(&self.log)
            .iter()
            .any(|u| u.start > from && u.start < to);
        // A text above an eighth of the window is too long for any chunk.
        let too_long = window / 8;
        let last = history.len() - 1;
        loop {
            if tokens(&history) <= window {
                return Some(history);
            }
            let (i, part, len) = longest_text(&history[..last])?;
            let per_byte = tokens(&history) as f64 / history_bytes(&history).max(1) as f64;
            let text_tokens = (len as f64 * per_byte) as u64;
            if (splittable && text_tokens <= too_long) || len <= SUMMARY_TEXT_FLOOR {
                return None;
            }
            cut_text(&mut history[i], part, len / 2);
        }
    }

    /// Splits the summary request of the waiting compaction into smaller chunks (the whole
    /// into two halves, a chunk into two). Returns whether it could (a chunk of one unit
    /// cannot be split).
    fn split_compaction(&mut self) -> bool {
        let starts: Vec<usize> = context::units(&self.log).iter().map(|u| u.start).collect();
        let Some(pending) = self.compaction.as_mut() else {
            return false;
        };
        let after_task = pending.compaction.task.map_or(0, |t| t + 1);
        let keep_from = pending.compaction.keep_from;
        let middle = |from: usize, to: usize| {
            starts
                .iter()
                .copied()
                .filter(|&s| s > from.max(after_task) && s < to)
                .min_by_key(|&s| s.abs_diff((from.max(after_task) + to) / 2))
        };
        match &mut pending.chunks {
            Chunks::Whole => {
                let Some(mid) = middle(0, keep_from) else {
                    return false;
                };
                tracing::warn!(
                    "a summary request would not fit the context window: summarizing in chunks"
                );
                pending.chunks = Chunks::Parts {
                    bounds: vec![0, mid, keep_from],
                    next: 0,
                    summary: None,
                };
                true
            }
            Chunks::Parts { bounds, next, .. } => {
                let Some(mid) = middle(bounds[*next], bounds[*next + 1]) else {
                    return false;
                };
                bounds.insert(*next + 1, mid);
                true
            }
        }
    }

    /// The answer to the summary request of the waiting compaction.
    pub(super) fn summarized(
        &mut self,
        answer: Result<ModelResponse, ModelError>,
        config: &Config,
        at_ms: u64,
    ) -> Result<(), HaloError> {
        let Some(context) = &config.context else {
            return Err(self.unexpected("a summary"));
        };
        let Some(request) = self.summary_history(config, context) else {
            return Err(self.unexpected("a summary"));
        };
        match answer {
            Ok(response) => {
                self.stats.record(&response.usage);
                self.stats.compaction_input_tokens += response.usage.input_tokens.unwrap_or(0);
                self.stats.compaction_cache_read_tokens +=
                    response.usage.cache_read_tokens.unwrap_or(0);
                // A chunk's request is not the history grown by one message: a rewrite,
                // planned.
                let chunked = !matches!(
                    self.compaction.as_ref().map(|p| &p.chunks),
                    Some(Chunks::Whole)
                );
                let (prefix, _) = self.prefix(config);
                let planned = self.ledger.plan(prefix, &request, None, chunked);
                self.ledger.record(planned, &response.usage, at_ms);
                let summary = response.message.text.trim().to_string();
                if summary.is_empty() {
                    self.drop_compaction("the model's summary was empty", at_ms);
                } else if let Some(PendingCompaction {
                    chunks:
                        Chunks::Parts {
                            bounds,
                            next,
                            summary: so_far,
                        },
                    ..
                }) = &mut self.compaction
                    && *next + 2 < bounds.len()
                {
                    *next += 1;
                    *so_far = Some(summary);
                    return Ok(());
                } else {
                    self.apply_compaction(&summary, at_ms);
                }
            }
            Err(error) if error.is_context_window_exceeded() => {
                // The local estimate ran low: count more, and make the request smaller.
                self.calibration *= 1.25;
                if !self.split_compaction() && self.summary_history(config, context).is_some() {
                    self.drop_compaction(&error.to_string(), at_ms);
                }
                if self.compaction.is_some() {
                    return Ok(());
                }
            }
            Err(error) => self.drop_compaction(&error.to_string(), at_ms),
        }
        self.fit_live_round(config, context, at_ms);
        Ok(())
    }

    /// Replaces the messages the waiting compaction summarizes by `summary`.
    fn apply_compaction(&mut self, summary: &str, at_ms: u64) {
        let Some(pending) = self.compaction.take() else {
            return;
        };
        self.stats.compactions += 1;
        let (task, keep_from) = (pending.compaction.task, pending.compaction.keep_from);
        let before = self.log.len();
        self.log.retain(|i, _, _| i >= keep_from || Some(i) == task);
        let at = usize::from(task.is_some());
        self.log
            .insert(at, Message::user(format!("{SUMMARY_HEADER}\n{summary}")));
        let summarized = keep_from - usize::from(task.is_some());
        self.rewritten(
            RewriteKind::Compaction,
            before,
            format!("a compaction replaced {summarized} messages by the model's summary"),
            at_ms,
        );
    }

    /// The waiting compaction failed (`why`): the messages it would have summarized are
    /// dropped instead (its task message kept), as truncation would, so the next request
    /// still fits — and the run says so.
    fn drop_compaction(&mut self, why: &str, at_ms: u64) {
        let Some(pending) = self.compaction.take() else {
            return;
        };
        let (task, keep_from) = (pending.compaction.task, pending.compaction.keep_from);
        tracing::warn!(
            "the compaction failed ({why}); dropping the messages it would have summarized"
        );
        let before = self.log.len();
        self.log.retain(|i, _, _| i >= keep_from || Some(i) == task);
        let dropped = before - self.log.len();
        self.rewritten(
            RewriteKind::Dropped,
            before,
            format!(
                "a compaction failed ({why}), so the {dropped} messages before message {keep_from} it would have summarized were dropped instead"
            ),
            at_ms,
        );
    }

    /// Counts, journals, reports and tells the ledger of a rewrite just made. Cutting the
    /// newest round's results changes nothing an earlier request carried: no cache miss, so
    /// it is journaled and reported but not counted.
    fn rewritten(&mut self, kind: RewriteKind, before: usize, description: String, at_ms: u64) {
        if kind != RewriteKind::Shortened {
            self.rewrite_planned = true;
            self.stats.history_rewrites += 1;
        }
        self.last_estimate = None;
        self.push_journal(JournalEvent::CompactBoundary {
            history: self.log.to_vec(),
            injected: self.log.injected_indices(),
            discardable: self.log.discardable_indices(),
            reason: Some(description.clone()),
            at_ms,
        });
        tracing::info!(
            "halo.context.messages" = self.log.len(),
            "{description}: expect one prompt-cache miss"
        );
        self.push_event(AgentEvent::HistoryRewritten(Box::new(HistoryRewrite {
            kind,
            messages_before: before,
            messages_after: self.log.len(),
            description,
        })));
    }

    /// Applies a plan whole, or not at all when it breaks a rule; returns whether it did.
    fn apply_context_plan(&mut self, plan: ContextPlan) -> bool {
        let live = context::live_round_start(&self.log);
        let messages: Vec<&Message> = self.log.messages().collect();
        let refuse = |why: String| {
            tracing::warn!("a context plan was not applied: {why}");
            false
        };
        if let Some(&i) = plan.drop.iter().find(|&&i| i >= live) {
            return refuse(format!(
                "it drops message {i}, in the live tool round (from {live})"
            ));
        }
        for (i, replacement) in &plan.replace {
            if *i >= live {
                return refuse(format!(
                    "it replaces message {i}, in the live tool round (from {live})"
                ));
            }
            let same_slot = match (messages[*i], replacement) {
                (Message::Tool(a), Message::Tool(b)) => a.tool_call_id == b.tool_call_id,
                (Message::Assistant(a), Message::Assistant(b)) => a
                    .tool_calls
                    .iter()
                    .map(|c| &c.id)
                    .eq(b.tool_calls.iter().map(|c| &c.id)),
                (Message::User { .. }, Message::User { .. })
                | (Message::System { .. }, Message::System { .. }) => true,
                _ => false,
            };
            if !same_slot {
                return refuse(format!(
                    "its replacement of message {i} changes the role or the tool calls"
                ));
            }
        }
        if let Some((at, summary)) = &plan.insert {
            if *at > live {
                return refuse(format!("it inserts at {at}, inside the live tool round"));
            }
            if !summary.tool_calls().is_empty() || matches!(summary, Message::Tool(_)) {
                return refuse("its summary carries tool calls or results".into());
            }
        }
        for (i, replacement) in plan.replace {
            self.log.replace(i, replacement);
        }
        if !plan.drop.is_empty() {
            self.log.retain(|i, _, _| !plan.drop.contains(&i));
        }
        if let Some((at, summary)) = plan.insert {
            let dropped_before = plan.drop.range(..at).count();
            self.log.insert(at - dropped_before, summary);
        }
        true
    }
}

/// The bytes of `history`'s JSON form, about.
fn history_bytes(history: &[Message]) -> usize {
    history
        .iter()
        .map(|m| serde_json::to_string(m).map_or(0, |s| s.len()))
        .sum()
}

/// The local token estimate of `log`'s messages.
fn log_tokens(log: &MessageLog, estimator: &dyn TokenEstimator) -> u64 {
    log.messages()
        .map(|m| context::message_tokens(estimator, m))
        .sum()
}

/// Which text of a message: its text (user, system, assistant, tool result), a reasoning
/// entry's, a tool call's arguments.
#[derive(Debug, Clone, Copy)]
enum Part {
    Text,
    Reasoning(usize),
    Arguments(usize),
}

/// The longest text of `messages`: its message, which text, its length in bytes.
fn longest_text(messages: &[Message]) -> Option<(usize, Part, usize)> {
    let mut best: Option<(usize, Part, usize)> = None;
    let mut consider = |i: usize, part: Part, len: usize| {
        if best.is_none_or(|(_, _, l)| len > l) {
            best = Some((i, part, len));
        }
    };
    for (i, m) in messages.iter().enumerate() {
        match m {
            Message::Tool(r) => consider(i, Part::Text, r.content.len()),
            Message::System { content } => consider(i, Part::Text, content.len()),
            Message::User { content } => {
                let len = content
                    .iter()
                    .map(|p| match p {
                        ContentPart::Text { text } => text.len(),
                        _ => 0,
                    })
                    .max()
                    .unwrap_or(0);
                consider(i, Part::Text, len);
            }
            Message::Assistant(a) => {
                consider(i, Part::Text, a.text.len());
                for (k, r) in a.reasoning.iter().enumerate() {
                    consider(i, Part::Reasoning(k), r.text.len());
                }
                for (k, c) in a.tool_calls.iter().enumerate() {
                    consider(i, Part::Arguments(k), c.raw_arguments.len());
                }
            }
        }
    }
    best
}

/// Cuts `part` of `message` to about `bytes`, saying so. Reasoning loses its signature (it
/// no longer matches); arguments become a JSON object that says what was there.
fn cut_text(message: &mut Message, part: Part, bytes: usize) {
    const WHY: &str = "cut to fit the summary request into the context window";
    let cut = |text: &mut String| {
        if let Some(shorter) = cut_middle(text, bytes, WHY) {
            *text = shorter;
        }
    };
    match (message, part) {
        (Message::Tool(r), _) => {
            if let Some(shorter) = cut_middle(&r.content, bytes, WHY) {
                r.content = shorter.into();
            }
        }
        (Message::System { content }, _) => cut(content),
        (Message::User { content }, _) => {
            if let Some(ContentPart::Text { text }) = content
                .iter_mut()
                .filter(|p| matches!(p, ContentPart::Text { .. }))
                .max_by_key(|p| match p {
                    ContentPart::Text { text } => text.len(),
                    _ => 0,
                })
            {
                cut(text);
            }
        }
        (Message::Assistant(a), Part::Text) => cut(&mut a.text),
        (Message::Assistant(a), Part::Reasoning(k)) => {
            if let Some(r) = a.reasoning.get_mut(k) {
                cut(&mut r.text);
                r.signature = None;
            }
        }
        (Message::Assistant(a), Part::Arguments(k)) => {
            if let Some(c) = a.tool_calls.get_mut(k) {
                let len = c.raw_arguments.len();
                let head: String = c.raw_arguments.chars().take(bytes.min(200)).collect();
                c.raw_arguments = serde_json::json!({
                    "$cut": format!("{len} bytes of arguments {WHY}; they began: {head}")
                })
                .to_string()
                .into();
            }
        }
    }
}
