//! What a run measured, and the table.

use std::fmt::Write as _;

use halo_core::AgentStats;

use crate::Provider;
use crate::mcp::CHANGE_AFTER;
use crate::session::{STEPS, Session};

/// Price of a cached input token relative to an uncached one.
pub(crate) const CACHED_PRICE: f64 = 0.10;
/// Anthropic (5-minute TTL) and OpenAI GPT-5.6+: price of a token written to the cache
/// relative to an uncached one; the written tokens are part of the request's input.
pub(crate) const WRITE_PRICE: f64 = 1.25;
/// Gemini: price of a token of a created `cachedContents` object (billed like input, in a
/// separate call: the request then reads it as cached). Storage per token-hour is left out.
pub(crate) const GEMINI_WRITE_PRICE: f64 = 1.0;

/// What one run measured.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Figures {
    pub(crate) provider: Provider,
    pub(crate) requests: u64,
    pub(crate) input: u64,
    pub(crate) cached: u64,
    pub(crate) written: u64,
    /// The theoretical maximum of cached tokens, when the simulator records it.
    pub(crate) max: Option<u64>,
    pub(crate) busts: u64,
    /// Calls the ledger predicted as misses (a prefix change, a planned rewrite).
    pub(crate) expected_misses: usize,
    /// How often the prefix's fingerprint changed during the run.
    pub(crate) prefix_changes: u64,
    /// A new session's first call after the run, same prefix: its input and cached tokens.
    pub(crate) next_session: Option<(u64, u64)>,
}

/// One provider's three runs.
pub(crate) struct Row {
    pub(crate) provider: Provider,
    pub(crate) halo: Figures,
    pub(crate) baseline: Figures,
    pub(crate) mcp: Figures,
}

impl Figures {
    pub(crate) fn new(
        provider: Provider,
        stats: AgentStats,
        expected_misses: usize,
        max: Option<u64>,
    ) -> Self {
        Figures {
            provider,
            requests: stats.steps,
            input: stats.input_tokens,
            cached: stats.cache_read_tokens,
            written: stats.cache_write_tokens,
            max,
            busts: stats.cache_busts,
            expected_misses,
            prefix_changes: stats.prefix_fingerprint_changes,
            next_session: None,
        }
    }

    /// Input cost in uncached-token equivalents: cached tokens at [`CACHED_PRICE`], written
    /// ones at the provider's write price.
    pub(crate) fn cost(&self) -> f64 {
        let cached = self.cached as f64 * CACHED_PRICE;
        let written = self.written as f64;
        match self.provider {
            // The normalized input holds the writes (Anthropic, OpenAI GPT-5.6+): take them
            // out of the full-price part.
            p if p.bills_writes() => {
                let uncached = self.input.saturating_sub(self.cached + self.written);
                uncached as f64 + cached + written * WRITE_PRICE
            }
            // Gemini's writes are a separate create call; the request reads them as cached.
            Provider::Gemini => {
                (self.input - self.cached.min(self.input)) as f64
                    + cached
                    + written * GEMINI_WRITE_PRICE
            }
            _ => (self.input - self.cached.min(self.input)) as f64 + cached,
        }
    }

    pub(crate) fn hit(&self) -> f64 {
        ratio(self.cached, self.input)
    }
}

pub(crate) fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

/// The table: one row per provider, Halo's run beside the baseline's.
pub(crate) fn table(session: &Session, rows: &[Row]) -> String {
    let mut out = String::new();
    let prefix_tokens = halo_adapters::sim::count_tokens(&session.system);
    let _ = writeln!(
        out,
        "\ncache bench: one {STEPS}-call session ({} tool calls, then an answer) per provider, through its adapter, against its loopback cache simulator; system prompt {} tokens + 4 tool schemas; o200k_base tokens",
        session.calls.len(),
        group(prefix_tokens)
    );
    let mut sizes = session.result_sizes();
    sizes.sort_unstable();
    if let (Some(min), Some(max)) = (sizes.first(), sizes.last()) {
        let _ = writeln!(
            out,
            "tool results: {} B to {} B, median {} B, {} B in all\n",
            group(*min as u64),
            group(*max as u64),
            group(sizes[sizes.len() / 2] as u64),
            group(sizes.iter().sum::<usize>() as u64)
        );
    }
    let _ = writeln!(
        out,
        "{:<22} | {:^46} | {:^39} |",
        "", "halo: stable prefix", "baseline: date-time in system prompt"
    );
    let _ = writeln!(
        out,
        "{:<22} | {:>9} {:>9} {:>6} {:>6} {:>6} {:>5} | {:>9} {:>9} {:>6} {:>6} {:>5} | {:>6}",
        "provider",
        "input",
        "cached",
        "hit",
        "max",
        "of max",
        "busts",
        "input",
        "cached",
        "hit",
        "of max",
        "busts",
        "cost x"
    );
    let _ = writeln!(out, "{}", "-".repeat(122));
    let mut notes = Vec::new();
    for row in rows {
        let (provider, halo, base) = (&row.provider, &row.halo, &row.baseline);
        let (max_share, of_max, base_of_max) = match halo.max {
            Some(max) => (
                pct(ratio(max, halo.input)),
                format!("{:.3}", ratio(halo.cached, max)),
                format!("{:.3}", ratio(base.cached, max)),
            ),
            None => ("n/a".into(), "n/a".into(), "n/a".into()),
        };
        let _ = writeln!(
            out,
            "{:<22} | {:>9} {:>9} {:>6} {:>6} {:>6} {:>5} | {:>9} {:>9} {:>6} {:>6} {:>5} | {:>6}",
            provider.name(),
            group(halo.input),
            group(halo.cached),
            pct(halo.hit()),
            max_share,
            of_max,
            halo.busts,
            group(base.input),
            group(base.cached),
            pct(base.hit()),
            base_of_max,
            base.busts,
            format!("{:.2}", base.cost() / halo.cost()),
        );
        if halo.written > 0 || base.written > 0 {
            let how = match provider {
                Provider::Gemini => format!(
                    "cachedContents created, a separate call at {:.0}%",
                    GEMINI_WRITE_PRICE * 100.0
                ),
                _ => format!("part of input, at {:.0}%", WRITE_PRICE * 100.0),
            };
            notes.push(format!(
                "{}: tokens written to the cache ({how}): halo {}, baseline {}",
                provider.name(),
                group(halo.written),
                group(base.written)
            ));
        }
        if halo.requests != STEPS as u64 || base.requests != STEPS as u64 {
            let _ = writeln!(
                out,
                "  note: {} made {} / {} calls",
                provider.name(),
                halo.requests,
                base.requests
            );
        }
    }
    for note in notes {
        let _ = writeln!(out, "{note}");
    }
    let _ = writeln!(
        out,
        "\ninput, cached: tokens summed over the {STEPS} requests, as the adapter reported them; hit = cached / input.\n\
max: the theoretical maximum, every token of a request already sent in an earlier request of the session (longest\n\
common token prefix, no minimum, no rounding), as a share of input; of max = cached / that maximum (halo's goal: >= 0.98;\n\
deepseek can pass 1.0: it also caches the answers it generated). The baseline's \"of max\" is against the same maximum.\n\
busts: calls Halo's cache ledger flagged as reading far less than expected.\n\
cost x: the baseline's input cost over halo's, cached tokens at {:.0}% of the uncached price, written tokens as noted\n\
(Gemini's storage per token-hour left out).",
        CACHED_PRICE * 100.0,
    );
    out.push_str(&mcp_table(rows));
    out.push_str(&write_table(rows));
    out
}

/// OpenAI's caching side by side: the input cost of Halo's run (writes billed where the
/// model bills them), and a new session's first call with the same prefix.
fn write_table(rows: &[Row]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\nopenai caching: halo's run as input cost in uncached-token units (cached at {:.0}%, written at {:.0}% on GPT-5.6+,\n\
which caches at breakpoints: implicit = OpenAI's own breakpoint on the newest message, nothing sent; explicit =\n\
prompt_cache_options explicit and Halo's breakpoints on the prefix and the newest block), and the first call of a new\n\
session with the same prefix after it\n",
        CACHED_PRICE * 100.0,
        WRITE_PRICE * 100.0
    );
    let _ = writeln!(
        out,
        "{:<22} | {:>9} {:>9} {:>9} {:>11} | {:>18}",
        "provider", "input", "cached", "written", "input cost", "new session cached"
    );
    let _ = writeln!(out, "{}", "-".repeat(88));
    for row in rows {
        let h = &row.halo;
        let Some((input, cached)) = h.next_session else {
            continue;
        };
        let _ = writeln!(
            out,
            "{:<22} | {:>9} {:>9} {:>9} {:>11} | {:>18}",
            row.provider.name(),
            group(h.input),
            group(h.cached),
            group(h.written),
            group(h.cost().round() as u64),
            format!("{} of {}", group(cached), group(input)),
        );
    }
    out
}

/// The MCP variant beside Halo's plain run: an MCP server's tools in the prefix, its tool
/// list changing once after [`CHANGE_AFTER`] tool calls.
fn mcp_table(rows: &[Row]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\nmcp: the same session with an in-process MCP server (halo-mcp's server and client over a duplex pipe) whose\n\
tool list grows by one tool after tool call {CHANGE_AFTER}: notifications/tools/list_changed, the client re-lists, the agent\n\
swaps the tools in at the next step boundary\n"
    );
    let _ = writeln!(
        out,
        "{:<22} | {:>9} {:>9} {:>6} {:>6} | {:>14} {:>15} {:>5} | {:>9} {:>6}",
        "provider",
        "input",
        "cached",
        "hit",
        "of max",
        "prefix changes",
        "expected misses",
        "busts",
        "halo hit",
        "delta"
    );
    let _ = writeln!(out, "{}", "-".repeat(113));
    for row in rows {
        let m = &row.mcp;
        let of_max = match m.max {
            Some(max) => format!("{:.3}", ratio(m.cached, max)),
            None => "n/a".into(),
        };
        let _ = writeln!(
            out,
            "{:<22} | {:>9} {:>9} {:>6} {:>6} | {:>14} {:>15} {:>5} | {:>9} {:>6}",
            row.provider.name(),
            group(m.input),
            group(m.cached),
            pct(m.hit()),
            of_max,
            m.prefix_changes,
            m.expected_misses,
            m.busts,
            pct(row.halo.hit()),
            format!("{:+.1}", (m.hit() - row.halo.hit()) * 100.0),
        );
    }
    let _ = writeln!(
        out,
        "\nprefix changes: fingerprint changes during the run; expected misses: calls the ledger predicted to miss (the goal:\n\
exactly 1, and 0 busts); halo hit: the plain run's hit share, delta: the MCP run's minus it, in points (its extra\n\
tool schemas count in input and cached alike)."
    );
    out
}

pub(crate) fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

/// `1234567` → `1,234,567`.
pub(crate) fn group(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
