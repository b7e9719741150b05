//! [`OutputTruncation`]: an after-hook that bounds every tool result.

use async_trait::async_trait;
use halo_core::{ToolContext, ToolHook, ToolResult};

use crate::text::HeadTail;
use crate::tools::{DEFAULT_OUTPUT_LIMIT, NOTES_MARGIN, ToolOptions};

/// The default bound of [`OutputTruncation`], in bytes: 33 KiB, the sandbox tools' default
/// output limit ([`DEFAULT_OUTPUT_LIMIT`], 32 KiB) plus the room their notes may take
/// ([`NOTES_MARGIN`], 1 KiB).
///
/// So a tool set built with the default [`ToolOptions`] is never cut a second time: a
/// `read` that stopped at the output limit keeps the lines its note names, and `bash` keeps
/// both stream headers. For another output limit use [`OutputTruncation::for_tools`].
pub const DEFAULT_RESULT_LIMIT: usize = DEFAULT_OUTPUT_LIMIT + NOTES_MARGIN;

/// The smallest bound [`OutputTruncation::new`] accepts (smaller ones are raised to it): room
/// for the note and a little text on both sides of it.
pub const MIN_RESULT_LIMIT: usize = 256;

/// An after-hook that bounds every tool result to a number of bytes, for user tools and MCP
/// tools that do not bound their own output (the sandbox's tools do, and pass unchanged
/// through the default bound or [`for_tools`](Self::for_tools)).
///
/// A longer result keeps its first and last bytes, cut on UTF-8 character boundaries, with a
/// line `[... N bytes omitted ...]` between them (the note the sandbox's `bash` uses); the
/// whole result, note included, is at most the bound. `is_error` is kept. Results within the
/// bound pass unchanged.
///
/// ```
/// use halo_sandbox::policy::OutputTruncation;
///
/// let cut = OutputTruncation::new(256).truncate(&"ab".repeat(1000)).unwrap();
/// assert!(cut.len() <= 256);
/// assert!(cut.contains("\n[... 1774 bytes omitted ...]\n"));
/// assert_eq!(OutputTruncation::new(256).truncate("short"), None);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct OutputTruncation {
    max_bytes: usize,
}

impl Default for OutputTruncation {
    /// Bounds results to [`DEFAULT_RESULT_LIMIT`] bytes.
    fn default() -> Self {
        Self::new(DEFAULT_RESULT_LIMIT)
    }
}

impl OutputTruncation {
    /// Bounds results to `max_bytes` bytes (at least [`MIN_RESULT_LIMIT`]).
    pub fn new(max_bytes: usize) -> Self {
        OutputTruncation {
            max_bytes: max_bytes.max(MIN_RESULT_LIMIT),
        }
    }

    /// Bounds results to what the tools built with `options` may return: their output
    /// limit plus [`NOTES_MARGIN`]. Their own results pass unchanged; other tools' results
    /// get the same bound.
    ///
    /// ```
    /// use halo_sandbox::ToolOptions;
    /// use halo_sandbox::policy::{DEFAULT_RESULT_LIMIT, OutputTruncation};
    ///
    /// let options = ToolOptions::default().with_output_limit(8 * 1024);
    /// assert_eq!(OutputTruncation::for_tools(&options).max_bytes(), 9 * 1024);
    /// let default = OutputTruncation::for_tools(&ToolOptions::default());
    /// assert_eq!(default.max_bytes(), DEFAULT_RESULT_LIMIT);
    /// ```
    pub fn for_tools(options: &ToolOptions) -> Self {
        Self::new(options.output_limit().saturating_add(NOTES_MARGIN))
    }

    /// The bound, in bytes.
    pub fn max_bytes(&self) -> usize {
        self.max_bytes
    }

    /// `content` cut to the bound, or `None` when it fits.
    pub fn truncate(&self, content: &str) -> Option<String> {
        if content.len() <= self.max_bytes {
            return None;
        }
        // The note is longest when the whole content is dropped; budget for that. The cut
        // is the one `bash` makes: head and tail on character boundaries, joined by the
        // same `[... N bytes omitted ...]` line.
        let note_room = format!("\n[... {} bytes omitted ...]\n", content.len()).len();
        let mut kept = HeadTail::new(self.max_bytes.saturating_sub(note_room));
        kept.push(content.as_bytes());
        Some(kept.finish().text)
    }
}

#[async_trait]
impl ToolHook for OutputTruncation {
    async fn after_tool_call(&self, cx: &ToolContext, mut result: ToolResult) -> ToolResult {
        let call = cx.call();
        if let Some(cut) = self.truncate(&result.content) {
            tracing::debug!(tool = %call.name, bytes = result.content.len(), "truncated a tool result");
            result.content = cut.into();
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_on_char_boundaries_within_the_bound() {
        let t = OutputTruncation::new(300);
        for prefix in ["", "a", "ab", "abc"] {
            // 4-byte characters: the cut points land inside one whatever the offset.
            let content = format!("{prefix}{}", "😀".repeat(500));
            let cut = t.truncate(&content).unwrap();
            assert!(cut.len() <= 300, "{}", cut.len());
            let (head, rest) = cut.split_once("\n[... ").unwrap();
            let (count, tail) = rest.split_once(" bytes omitted ...]\n").unwrap();
            assert!(content.starts_with(head));
            assert!(content.ends_with(tail));
            assert_eq!(
                head.len() + count.parse::<usize>().unwrap() + tail.len(),
                content.len()
            );
            assert!(head.len() > 100 && tail.len() > 100, "{cut}");
        }
    }

    #[test]
    fn small_bounds_are_raised_and_fitting_results_pass() {
        assert_eq!(OutputTruncation::new(0).max_bytes(), MIN_RESULT_LIMIT);
        let exact = "x".repeat(MIN_RESULT_LIMIT);
        assert_eq!(OutputTruncation::new(0).truncate(&exact), None);
        let cut = OutputTruncation::new(0)
            .truncate(&format!("{exact}y"))
            .unwrap();
        assert!(cut.len() <= MIN_RESULT_LIMIT);
    }
}
