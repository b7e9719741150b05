//! [`AgentStats`]: token, cache and tool counters over model calls, kept in one place (the
//! run engine's state) and reported per run and per agent.

use serde::{Deserialize, Serialize};

use crate::model::Usage;

/// Token and cache counters over model calls.
///
/// Counts the provider did not report are left out of the sums; `calls_without_cache_info`
/// says how many calls that was, so a 0 % hit ratio from a server that reports nothing is
/// not mistaken for a cold cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct AgentStats {
    /// Model calls made.
    pub steps: u64,
    /// Input tokens, cached ones included.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Input tokens read from the prompt cache.
    pub cache_read_tokens: u64,
    /// Input tokens written to the prompt cache (where reported).
    pub cache_write_tokens: u64,
    /// Input tokens of the calls that reported both input and cache reads (the ratio's
    /// denominator).
    pub cache_reported_input_tokens: u64,
    /// Cache reads of those same calls (the ratio's numerator).
    pub cache_reported_read_tokens: u64,
    /// Calls whose provider did not report cache reads.
    pub calls_without_cache_info: u64,
    /// Times the prefix fingerprint differed from the previous call's: each is one
    /// expected cache miss.
    pub prefix_fingerprint_changes: u64,
    /// Tool calls executed.
    pub tool_calls: u64,
    /// Input tokens the [`CacheLedger`](crate::CacheLedger) expected the provider to read from its cache, summed
    /// over the calls where it could estimate them.
    pub expected_cached_tokens: u64,
    /// Calls the ledger judged a cache bust ([`AgentEvent::CacheBust`](crate::AgentEvent::CacheBust)).
    pub cache_busts: u64,
    /// Times a context strategy rewrote the history ([`crate::context`]): each is one
    /// expected cache miss on everything after the change.
    pub history_rewrites: u64,
    /// Compactions made ([`crate::context::Compaction`]). Their summary requests' tokens are
    /// counted with the other calls', and also on their own below.
    pub compactions: u64,
    /// Input tokens of the summary requests.
    pub compaction_input_tokens: u64,
    /// Cache reads of the summary requests (a summary request is the prefix and the
    /// history, so most of it should be read from the cache).
    pub compaction_cache_read_tokens: u64,
    /// Changes a [`RepairStrategy`](crate::RepairStrategy) made to the model's tool calls
    /// (a tool name or an argument string each).
    pub tool_call_repairs: u64,
    /// Model calls made by the agent's tools on its behalf — sub-agents' and plans' runs
    /// ([`crate::delegate`]) — whose counters were added to these (so `steps` and the token
    /// counts include them).
    pub delegated_steps: u64,
    /// Calls answered by another provider than the call before (a fallback switched): each
    /// is an expected miss. Which provider answered a step is its
    /// [`StepResult::cache`](crate::StepResult::cache)`.provider`.
    pub provider_switches: u64,
}

impl AgentStats {
    /// The counts added since `earlier` (a snapshot of the same counters), field by field.
    pub fn since(&self, earlier: &AgentStats) -> AgentStats {
        AgentStats {
            steps: self.steps.saturating_sub(earlier.steps),
            input_tokens: self.input_tokens.saturating_sub(earlier.input_tokens),
            output_tokens: self.output_tokens.saturating_sub(earlier.output_tokens),
            cache_read_tokens: self
                .cache_read_tokens
                .saturating_sub(earlier.cache_read_tokens),
            cache_write_tokens: self
                .cache_write_tokens
                .saturating_sub(earlier.cache_write_tokens),
            cache_reported_input_tokens: self
                .cache_reported_input_tokens
                .saturating_sub(earlier.cache_reported_input_tokens),
            cache_reported_read_tokens: self
                .cache_reported_read_tokens
                .saturating_sub(earlier.cache_reported_read_tokens),
            calls_without_cache_info: self
                .calls_without_cache_info
                .saturating_sub(earlier.calls_without_cache_info),
            prefix_fingerprint_changes: self
                .prefix_fingerprint_changes
                .saturating_sub(earlier.prefix_fingerprint_changes),
            tool_calls: self.tool_calls.saturating_sub(earlier.tool_calls),
            expected_cached_tokens: self
                .expected_cached_tokens
                .saturating_sub(earlier.expected_cached_tokens),
            cache_busts: self.cache_busts.saturating_sub(earlier.cache_busts),
            compactions: self.compactions.saturating_sub(earlier.compactions),
            compaction_input_tokens: self
                .compaction_input_tokens
                .saturating_sub(earlier.compaction_input_tokens),
            compaction_cache_read_tokens: self
                .compaction_cache_read_tokens
                .saturating_sub(earlier.compaction_cache_read_tokens),
            history_rewrites: self
                .history_rewrites
                .saturating_sub(earlier.history_rewrites),
            tool_call_repairs: self
                .tool_call_repairs
                .saturating_sub(earlier.tool_call_repairs),
            delegated_steps: self.delegated_steps.saturating_sub(earlier.delegated_steps),
            provider_switches: self
                .provider_switches
                .saturating_sub(earlier.provider_switches),
        }
    }

    /// Adds the counters of a run made on this agent's behalf (a sub-agent's, a plan's:
    /// [`ToolOutput::stats`](crate::ToolOutput::stats)), field by field; its model calls
    /// are also counted in [`delegated_steps`](Self::delegated_steps).
    pub fn add_delegated(&mut self, other: &AgentStats) {
        let AgentStats {
            steps,
            input_tokens,
            output_tokens,
            cache_read_tokens,
            cache_write_tokens,
            cache_reported_input_tokens,
            cache_reported_read_tokens,
            calls_without_cache_info,
            prefix_fingerprint_changes,
            tool_calls,
            expected_cached_tokens,
            cache_busts,
            history_rewrites,
            compactions,
            compaction_input_tokens,
            compaction_cache_read_tokens,
            tool_call_repairs,
            delegated_steps: _,
            provider_switches,
        } = *other;
        self.steps += steps;
        self.input_tokens += input_tokens;
        self.output_tokens += output_tokens;
        self.cache_read_tokens += cache_read_tokens;
        self.cache_write_tokens += cache_write_tokens;
        self.cache_reported_input_tokens += cache_reported_input_tokens;
        self.cache_reported_read_tokens += cache_reported_read_tokens;
        self.calls_without_cache_info += calls_without_cache_info;
        self.prefix_fingerprint_changes += prefix_fingerprint_changes;
        self.tool_calls += tool_calls;
        self.expected_cached_tokens += expected_cached_tokens;
        self.cache_busts += cache_busts;
        self.history_rewrites += history_rewrites;
        self.compactions += compactions;
        self.compaction_input_tokens += compaction_input_tokens;
        self.compaction_cache_read_tokens += compaction_cache_read_tokens;
        self.tool_call_repairs += tool_call_repairs;
        self.provider_switches += provider_switches;
        self.delegated_steps += steps;
    }

    /// Cache reads over input tokens, counting only the calls that reported both (so at most
    /// 1); 0 when none did.
    pub fn cache_hit_ratio(&self) -> f64 {
        if self.cache_reported_input_tokens == 0 {
            0.0
        } else {
            self.cache_reported_read_tokens as f64 / self.cache_reported_input_tokens as f64
        }
    }

    pub(crate) fn record(&mut self, usage: &Usage) {
        self.steps += 1;
        self.input_tokens += usage.input_tokens.unwrap_or(0);
        self.output_tokens += usage.output_tokens.unwrap_or(0);
        self.cache_write_tokens += usage.cache_write_tokens.unwrap_or(0);
        match (usage.cache_read_tokens, usage.input_tokens) {
            (Some(read), Some(input)) => {
                self.cache_read_tokens += read;
                self.cache_reported_read_tokens += read;
                self.cache_reported_input_tokens += input;
            }
            (Some(read), None) => self.cache_read_tokens += read,
            _ => self.calls_without_cache_info += 1,
        }
    }
}

/// One line for logs and terminals: steps, tool calls, input tokens, cached input tokens with
/// the hit percentage ([`AgentStats::cache_hit_ratio`]), output tokens; then calls that did
/// not report cache reads and cache busts, when there are any. When no call reported cache
/// reads, the cached part says so instead of showing a 0 % that would look like a cold cache.
///
/// ```
/// use halo_core::AgentStats;
///
/// let mut s = AgentStats { steps: 2, tool_calls: 1, input_tokens: 545, output_tokens: 21,
///     cache_read_tokens: 253, cache_reported_input_tokens: 545,
///     cache_reported_read_tokens: 253, ..AgentStats::default() };
/// assert_eq!(s.to_string(),
///     "2 steps, 1 tool call, 545 input tokens, 253 cached (46.4 % hit), 21 output tokens");
///
/// s.calls_without_cache_info = 1;
/// s.cache_busts = 1;
/// assert!(s.to_string().ends_with(
///     "output tokens, 1 call did not report cache reads, 1 cache bust"));
/// s.tool_call_repairs = 2;
/// assert!(s.to_string().ends_with("1 cache bust, 2 tool call repairs"));
///
/// let none = AgentStats { steps: 1, input_tokens: 40, output_tokens: 3,
///     calls_without_cache_info: 1, ..AgentStats::default() };
/// assert_eq!(none.to_string(),
///     "1 step, 0 tool calls, 40 input tokens, cache reads not reported, 3 output tokens");
/// ```
impl std::fmt::Display for AgentStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let plural =
            |n: u64, one: &'static str, many: &'static str| if n == 1 { one } else { many };
        write!(
            f,
            "{} {}, {} {}, {} input tokens, ",
            self.steps,
            plural(self.steps, "step", "steps"),
            self.tool_calls,
            plural(self.tool_calls, "tool call", "tool calls"),
            self.input_tokens,
        )?;
        if self.steps > 0 && self.calls_without_cache_info == self.steps {
            f.write_str("cache reads not reported")?;
        } else {
            write!(
                f,
                "{} cached ({:.1} % hit)",
                self.cache_read_tokens,
                100.0 * self.cache_hit_ratio()
            )?;
        }
        write!(f, ", {} output tokens", self.output_tokens)?;
        if self.calls_without_cache_info > 0 && self.calls_without_cache_info < self.steps {
            let n = self.calls_without_cache_info;
            write!(
                f,
                ", {n} {} not report cache reads",
                plural(n, "call did", "calls did")
            )?;
        }
        if self.cache_busts > 0 {
            let n = self.cache_busts;
            write!(f, ", {n} {}", plural(n, "cache bust", "cache busts"))?;
        }
        if self.tool_call_repairs > 0 {
            let n = self.tool_call_repairs;
            write!(
                f,
                ", {n} {}",
                plural(n, "tool call repair", "tool call repairs")
            )?;
        }
        Ok(())
    }
}
