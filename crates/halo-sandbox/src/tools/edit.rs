//! `edit`: replaces an exact piece of a text file and shows the change as a unified diff
//! (computed by the `similar` crate).

use std::borrow::Cow;
use std::sync::Arc;

use halo_core::{Tool, ToolAnnotations, ToolError, ToolOutput};
use schemars::JsonSchema;
use serde::Deserialize;
use similar::TextDiff;

use super::read::read_text_file;
use super::{Ctx, MAX_OPEN_FILE_BYTES, failed};
use crate::text::{Lines, cut_line};

/// Lines of unchanged context around each change in the diff: 3 (as `diff -u`).
const DIFF_CONTEXT: usize = 3;

// Arguments of `edit` (no doc comment: it would enter the schema the model reads).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct EditArgs {
    /// Path of the file, relative to the sandbox root.
    path: String,
    /// The exact text to replace, whitespace and indentation included. It must occur exactly once in the file unless replace_all is true.
    old_string: String,
    /// The text to put in its place.
    new_string: String,
    /// Replace every occurrence of old_string instead of exactly one (default false).
    #[serde(default)]
    replace_all: bool,
}

pub(super) struct EditTool {
    ctx: Arc<Ctx>,
}

impl EditTool {
    pub(super) fn new(ctx: Arc<Ctx>) -> Self {
        EditTool { ctx }
    }
}

impl Tool for EditTool {
    type Args = EditArgs;

    fn name(&self) -> &str {
        "edit"
    }

    fn description(&self) -> &str {
        "Edits a text file in the sandbox by replacing an exact string. old_string must \
         occur exactly once in the file (copy it from read, without the line-number prefix), \
         or set replace_all to replace every occurrence. Returns a unified diff of the \
         change."
    }

    /// Changes only files in the workspace.
    fn annotations(&self) -> ToolAnnotations {
        ToolAnnotations::default().with_open_world(false)
    }

    async fn call(&self, args: EditArgs) -> Result<ToolOutput, ToolError> {
        let path = self.ctx.path(Some(&args.path))?;
        if args.old_string.is_empty() {
            return Err(ToolError::Failed(
                "old_string is empty; give the exact text to replace (use write to create or \
                 replace a whole file)"
                    .into(),
            ));
        }
        if args.old_string == args.new_string {
            return Err(ToolError::Failed(
                "old_string and new_string are the same; there is nothing to change".into(),
            ));
        }
        let bytes = read_text_file(&self.ctx, &path, MAX_OPEN_FILE_BYTES, "edited").await?;
        let old = String::from_utf8(bytes).map_err(|_| {
            ToolError::Failed(format!(
                "`{path}` is not valid UTF-8 text (perhaps Latin-1 or another encoding); edit \
                 only changes UTF-8 files: to change it, write its whole new content"
            ))
        })?;
        let Replace {
            old_string,
            new_string,
            count,
        } = Replace::in_text(&old, &args.old_string, &args.new_string);
        if count == 0 {
            return Err(ToolError::Failed(format!(
                "old_string was not found in `{path}`; read the file first and copy the text \
                 to replace exactly, with its whitespace and indentation"
            )));
        }
        if old_string == new_string {
            // `a\nb` for `a\r\nb` in a file with `\r\n` line endings.
            return Err(ToolError::Failed(
                "old_string and new_string differ only in line endings, which edit keeps as \
                 the file has them; there is nothing to change"
                    .into(),
            ));
        }
        if count > 1 && !args.replace_all {
            return Err(ToolError::Failed(format!(
                "old_string occurs {count} times in `{path}`; include more surrounding lines \
                 to make it unique, or set replace_all to replace every occurrence"
            )));
        }
        let new = old.replace(old_string.as_ref(), &new_string);
        self.ctx
            .sandbox
            .write(&path, new.clone().into_bytes())
            .await
            .map_err(failed)?;
        let head = format!(
            "replaced {count} occurrence{} in `{path}`",
            if count == 1 { "" } else { "s" }
        );
        let limit = self
            .ctx
            .options
            .output_limit()
            .saturating_sub(head.len() + 1);
        Ok(ToolOutput::text(format!(
            "{head}\n{}",
            diff(path.as_str(), &old, &new, limit)
        )))
    }
}

/// What `edit` replaces in a file's text, with which text, and how often it occurs.
struct Replace<'a> {
    old_string: Cow<'a, str>,
    new_string: Cow<'a, str>,
    count: usize,
}

impl<'a> Replace<'a> {
    /// Matches line endings the way the model sees them: `read` shows lines without their
    /// `\r`, so in a file with `\r\n` line endings an `old_string` not found as given is
    /// looked for with its line breaks as `\r\n`. When the file's line breaks are all
    /// `\r\n`, or when that second look found it, `new_string` is written with `\r\n` too,
    /// so the file keeps its own line endings.
    fn in_text(text: &str, old_string: &'a str, new_string: &'a str) -> Self {
        let crlf = text.contains("\r\n");
        let all_crlf = crlf
            && text
                .match_indices('\n')
                .all(|(i, _)| i > 0 && text.as_bytes()[i - 1] == b'\r');
        let count = text.matches(old_string).count();
        if count > 0 || !crlf || !old_string.contains('\n') {
            let new_string = if count > 0 && all_crlf {
                to_crlf(new_string)
            } else {
                Cow::Borrowed(new_string)
            };
            return Replace {
                old_string: Cow::Borrowed(old_string),
                new_string,
                count,
            };
        }
        let old_crlf = to_crlf(old_string);
        let count = text.matches(old_crlf.as_ref()).count();
        Replace {
            old_string: old_crlf,
            new_string: to_crlf(new_string),
            count,
        }
    }
}

/// `text` with every line break as `\r\n` (those already `\r\n` kept as they are).
fn to_crlf(text: &str) -> Cow<'_, str> {
    if !text.contains('\n') {
        return Cow::Borrowed(text);
    }
    Cow::Owned(text.replace("\r\n", "\n").replace('\n', "\r\n"))
}

/// A unified diff of `old` to `new` within `limit` bytes, cut at a line with a note.
fn diff(name: &str, old: &str, new: &str, limit: usize) -> String {
    let text = TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(DIFF_CONTEXT)
        .header(&format!("a/{name}"), &format!("b/{name}"))
        .to_string();
    let total = text.lines().count();
    let mut out = Lines::new(limit);
    for line in text.lines() {
        if !out.push(&cut_line(line)) {
            break;
        }
    }
    let shown = out.count();
    let note = (shown < total).then(|| {
        format!("[diff cut after {shown} of {total} lines; read the file to see the rest]")
    });
    out.finish(note)
}
