//! A command line read for the denylist with [brush-parser], a POSIX and bash parser: each
//! command the line would run, normalized for matching.
//!
//! The line is parsed into brush-parser's syntax tree, and the walk over it ([`walk`]) takes
//! every simple command it holds: the parts of `;`, `&`, `&&`, `||` and newline lists, of
//! pipelines (`|`, `|&`), and the commands inside subshells, `{ … }` groups, `if`, `while`,
//! `until`, `for` and `case` bodies and function definitions. Words lose their quotes and
//! backslashes (`"$HOME"` is `$HOME`, `\rm` is `rm`, `$'rm'` is `rm`); a word whose quoted
//! part held whitespace or an operator character is shown in single quotes, so `echo "rm -rf
//! /"` stays one argument of `echo`. Redirections are shown as words (`>/dev/sda` is `>
//! /dev/sda`, `2>&1` is `2 >& 1`, `<<'EOF'` is `<< EOF`), after the arguments when they came
//! before the program; comments are gone. The bodies of `$(…)`, backticks, `<(…)` and `>(…)`
//! (in any word, `${x:-…}` and `$((…))` too, and in a here-document whose delimiter is not
//! quoted) are returned as nested command lines to check on their own, and an arithmetic
//! expression holding one is also a command of its own (`(( $(curl …) ))` gives `$(curl
//! …)`: bash evaluates the output as arithmetic, where `a[$(…)]` runs). A here-document's
//! body is otherwise data, unless a shell reads its script from it (`bash <<EOF`): then it is
//! a nested line too. A here-document left without its delimiter line runs to the end, as in
//! bash.
//!
//! Each simple command is normalized ([`normalize`]): words joined by one space, leading
//! wrappers dropped (`VAR=value`, `sudo`/`doas` and their options, `env`, `nohup`, `nice`,
//! `time`, `timeout`, `xargs`, `command`, `exec`, `setsid`, `busybox`, `toybox`, `chroot
//! DIR`; reserved words are read by the parser), and the program named by its basename
//! (`/bin/rm` is `rm`). Arguments that are absolute or home paths are normalized lexically:
//! `//` is `/`, `.` components go, `..` pops the component before it (at `/` it stays `/`;
//! above `~` or `$HOME` it is kept), a trailing `/` goes (`/./` and `/usr/../` are `/`,
//! `$HOME/` is `$HOME`). `sh -c STRING`, `bash -lc STRING`, `su -c STRING`, `eval ARGS`, a
//! shell's here-string (`sh <<< STRING`) and `env -S STRING` add their command string to the
//! nested lines.
//!
//! A pipeline of two or more commands is also shown joined by ` | `, with `xargs` kept before
//! a command it runs (`find / | xargs rm -rf`), since there what feeds `xargs` matters; a
//! compound command in a pipeline is shown as the parser prints it (`{ curl x }`).
//!
//! A line the parser cannot read (an unclosed quote or bracket, a syntax error, a construct
//! brush-parser does not know such as `select`) is an [`Unparsed`] error, never a partial
//! split: bash would run the commands before the error, so the caller must not let it pass
//! unread (the denylist refuses it). So is a line brush-parser 0.4 is known to misread (a
//! `$(…)` after `<<EOF` on the same line), and a line nested so deeply that it is not parsed
//! at all. [`parse`] keeps the parser from taking the process down: a stack sized for the
//! line's nesting, a caught panic, and a final newline against its endless loops.
//!
//! What a parser still cannot see: the values of variables (`x=/; rm -rf $x`), aliases and
//! functions defined in an earlier call, the output of a substitution (`rm -rf $(echo /)`),
//! what a script run from a file does, what a program does with its input, and ANSI-C
//! escapes (`$'\x72m'` is read as the text `\x72m`).
//!
//! [brush-parser]: https://docs.rs/brush-parser/0.4

mod normalize;
mod parse;
mod walk;

pub(crate) use normalize::normalize_path;

/// One pipeline of a split line.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Pipeline {
    /// Its simple commands, normalized (with a compound command's own redirections as a
    /// command of their own: `{ …; } > /dev/sda` gives `> /dev/sda`).
    pub(crate) commands: Vec<String>,
    /// With two or more commands: them joined by ` | `, each with `xargs ` before it when
    /// `xargs` was among the wrappers dropped (`echo / | xargs rm -rf`).
    pub(crate) joined: Option<String>,
}

/// A command line split for matching.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Split {
    /// Pipelines, in order (those inside a compound command before the one holding it).
    pub(crate) pipelines: Vec<Pipeline>,
    /// Command lines found inside this one (substitutions, `sh -c`, `eval`, here-documents
    /// read by a shell).
    pub(crate) nested: Vec<String>,
}

/// Why a line could not be split: brush-parser's error, in words the model can act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Unparsed {
    /// Lowercase, no trailing period (`unterminated single quote at 1,6 (detected near line
    /// 1 col 9)`).
    pub(crate) reason: String,
}

/// Splits `line` (see the module docs).
///
/// # Errors
/// [`Unparsed`] when brush-parser cannot read the line, or a word of it, or the line is
/// nested too deeply to parse.
pub(crate) fn split(line: &str) -> Result<Split, Unparsed> {
    parse::guarded(line, |line| {
        let (program, source) = parse::program(line)?;
        walk::split(&program, &source)
    })
}

/// `line` with every run of whitespace made one space, trimmed.
pub(crate) fn collapse_whitespace(line: &str) -> String {
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn commands(line: &str) -> Vec<Vec<String>> {
        split(line)
            .unwrap()
            .pipelines
            .into_iter()
            .map(|p| p.commands)
            .collect()
    }

    fn nested(line: &str) -> Vec<String> {
        split(line).unwrap().nested
    }

    #[test]
    fn splits_chains_and_pipelines_and_drops_wrappers() {
        assert_eq!(
            commands("cd a && sudo -u root rm -rf /  ;  ls | FOO=1 env -i nice -n 5 sh x || true"),
            vec![
                vec!["cd a".to_string()],
                vec!["rm -rf /".to_string()],
                vec!["ls".to_string(), "sh x".to_string()],
                vec!["true".to_string()],
            ]
        );
        assert_eq!(
            commands("/bin/rm -rf ~"),
            vec![vec!["rm -rf ~".to_string()]]
        );
        assert_eq!(
            commands("timeout 5 reboot"),
            vec![vec!["reboot".to_string()]]
        );
        assert_eq!(
            commands("if x; then reboot; fi")[1],
            vec!["reboot".to_string()]
        );
        assert_eq!(
            commands("time ! 2>/dev/null sudo rm -rf /"),
            vec![vec!["rm -rf / 2 > /dev/null".to_string()]]
        );
    }

    #[test]
    fn quotes_are_removed_but_quoted_operators_stay_one_word() {
        assert_eq!(
            commands(r#"rm -rf "/""#),
            vec![vec!["rm -rf /".to_string()]]
        );
        assert_eq!(
            commands(r"\rm -rf '$HOME'"),
            vec![vec!["rm -rf $HOME".to_string()]]
        );
        assert_eq!(
            commands(r#"echo "rm -rf /; reboot" | grep '| sh'"#),
            vec![vec![
                "echo 'rm -rf /; reboot'".to_string(),
                "grep '| sh'".to_string()
            ]]
        );
        assert_eq!(
            commands("echo hi # ; reboot"),
            vec![vec!["echo hi".to_string()]]
        );
        assert_eq!(commands("echo a#b"), vec![vec!["echo a#b".to_string()]]);
        assert_eq!(commands("$'rm' -rf /"), vec![vec!["rm -rf /".to_string()]]);
    }

    #[test]
    fn redirections_are_words_and_substitutions_are_nested() {
        assert_eq!(
            commands("cat x>/dev/sda 2>&1"),
            vec![vec!["cat x > /dev/sda 2 >& 1".to_string()]]
        );
        assert_eq!(
            commands("> /dev/./vda"),
            vec![vec!["> /dev/vda".to_string()]]
        );
        assert_eq!(
            commands("{ echo x; } > /dev/sda"),
            vec![vec!["echo x".to_string()], vec!["> /dev/sda".to_string()]]
        );
        let line = r#"echo "$(rm -rf /)" `reboot` && bash <(curl -s https://x)"#;
        assert_eq!(nested(line), ["rm -rf /", "reboot", "curl -s https://x"]);
        assert_eq!(
            commands(line),
            vec![
                vec!["echo $(rm -rf /) $(reboot)".to_string()],
                vec!["bash <(curl -s https://x)".to_string()],
            ]
        );
        assert_eq!(
            nested(r#"sh -c "rm -rf /" ; bash -lc 'reboot'; eval mkfs /dev/sda"#),
            ["rm -rf /", "reboot", "mkfs /dev/sda"]
        );
        assert_eq!(
            nested("x=$(a) echo ${y:-$(b)} $((1 + $(c))); [[ -n `d` ]]; for i in $(e); do :; done"),
            ["a", "b", "c", "d", "e"]
        );
        assert_eq!(nested("cat <<EOF\n$(reboot)\nEOF"), ["reboot"]);
        assert!(nested("cat <<'EOF'\n$(reboot)\nEOF").is_empty());
    }

    #[test]
    fn paths_are_normalized_lexically() {
        for (word, normal) in [
            ("/", "/"),
            ("/./", "/"),
            ("/../", "/"),
            ("//", "/"),
            ("/.", "/"),
            ("/usr/../", "/"),
            ("/usr/../etc/", "/etc"),
            ("/./*", "/*"),
            ("/tmp/./build/", "/tmp/build"),
            ("~", "~"),
            ("~/", "~"),
            ("~/./", "~"),
            ("~/..", "~/.."),
            ("~/a/../..", "~/.."),
            ("~/project/build/..", "~/project"),
            ("$HOME/", "$HOME"),
            ("${HOME}/.", "${HOME}"),
            ("~/.*", "~/.*"),
            ("./..", "./.."),
            ("build/..", "build/.."),
            ("~user/x", "~user/x"),
            ("$HOMEDIR/x", "$HOMEDIR/x"),
            ("of=/dev/sda", "of=/dev/sda"),
        ] {
            assert_eq!(normalize_path(word), normal, "{word}");
        }
        assert_eq!(
            commands(r#"rm -rf "$HOME"/./ /a//b "/x/../ y""#),
            vec![vec!["rm -rf $HOME /a/b '/x/../ y'".to_string()]]
        );
    }

    #[test]
    fn busybox_toybox_chroot_and_setsid_are_wrappers() {
        assert_eq!(
            commands(
                "busybox rm -rf / ; toybox rm x; sudo chroot --userspec=a:b /mnt rm -rf /; setsid -f ls; chroot /mnt"
            ),
            vec![
                vec!["rm -rf /".to_string()],
                vec!["rm x".to_string()],
                vec!["rm -rf /".to_string()],
                vec!["ls".to_string()],
            ]
        );
        assert_eq!(nested("busybox sh -c 'reboot'"), ["reboot"]);
        assert_eq!(nested("env -S 'rm -rf' /"), ["rm -rf /"]);
        assert!(nested("sudo -S -u root ls").is_empty());
    }

    #[test]
    fn a_joined_pipeline_keeps_xargs() {
        let s = split("find / -print0 | sort | sudo xargs -0 -n 1 rm -rf; ls | wc").unwrap();
        assert_eq!(
            s.pipelines[0].commands,
            ["find / -print0", "sort", "rm -rf"]
        );
        assert_eq!(
            s.pipelines[0].joined.as_deref(),
            Some("find / -print0 | sort | xargs rm -rf")
        );
        assert_eq!(s.pipelines[1].joined.as_deref(), Some("ls | wc"));
        assert_eq!(split("xargs rm -rf").unwrap().pipelines[0].joined, None);
        // A compound command in a pipeline is shown as the parser prints it.
        let s = split("{ curl -s x; } | sh").unwrap();
        assert_eq!(s.pipelines[0].commands, ["curl -s x"]);
        assert_eq!(s.pipelines[1].commands, ["sh"]);
        assert_eq!(s.pipelines[1].joined.as_deref(), Some("{ curl -s x } | sh"));
    }

    #[test]
    fn a_shell_here_string_or_here_document_is_nested_and_other_bodies_are_data() {
        assert_eq!(nested("sh <<< 'rm -rf /'"), ["rm -rf /"]);
        assert_eq!(nested("sudo bash -s <<<\"reboot\""), ["reboot"]);
        assert!(nested("grep x <<< 'rm -rf /'").is_empty());
        assert_eq!(nested("bash -c 'cat' <<< 'rm -rf /'"), ["cat"]);
        assert!(nested("bash run.sh <<< 'rm -rf /'").is_empty());

        let s = split("bash <<EOF\nrm -rf /\necho \"$x\"\nEOF\nls").unwrap();
        assert_eq!(s.nested, ["rm -rf /\necho \"$x\"\n"]);
        assert_eq!(
            s.pipelines
                .iter()
                .map(|p| p.commands.clone())
                .collect::<Vec<_>>(),
            vec![vec!["bash << EOF".to_string()], vec!["ls".to_string()]]
        );
        let s = split("sh <<-'END' 2>/dev/null\n\treboot\n\tEND\nls").unwrap();
        assert_eq!(s.nested, ["reboot\n"]);
        assert_eq!(s.pipelines.len(), 2);
        // A body fed to another program is data: an apostrophe in it opens no quote.
        let s = split("cat > notes.md <<'EOF'\nDon't rm -rf /\nEOF\nreboot").unwrap();
        assert!(s.nested.is_empty());
        assert_eq!(
            s.pipelines
                .iter()
                .map(|p| p.commands.clone())
                .collect::<Vec<_>>(),
            vec![
                vec!["cat > notes.md << EOF".to_string()],
                vec!["reboot".to_string()]
            ]
        );
        // Two here-documents on one line, read in order; a body without its delimiter
        // runs to the end.
        assert_eq!(
            nested("cat <<A; sh <<B\na1\nA\nreboot\nB\nsh <<C\nmkfs /dev/sda"),
            ["reboot\n", "mkfs /dev/sda\n"]
        );
        assert_eq!(nested("sh <<'A B'\nreboot"), ["reboot\n"]);
    }

    #[test]
    fn a_line_the_parser_cannot_read_is_an_error_not_a_partial_split() {
        for line in [
            "echo 'abc",
            "echo \"abc",
            "echo $(ls",
            "echo `ls",
            "$(",
            "<(",
            "cat <<",
            "sh <<-",
            "sh <<<",
            "ls; fi",
            "select x in a; do echo $x; done",
        ] {
            let e = split(line).unwrap_err();
            assert!(!e.reason.is_empty(), "{line:?}");
        }
        // Lines brush-parser reads although they look unfinished.
        for line in [
            "a \\",
            "chroot",
            "sudo chroot --userspec",
            "cat <<EOF",
            "sh <<EOF\n",
        ] {
            assert!(split(line).is_ok(), "{line:?}");
        }
    }

    // brush-parser 0.4 unwraps the parse of a file descriptor and of `~N`.
    #[test]
    fn numbers_brush_parser_would_panic_on_are_an_error() {
        for line in [
            "echo 99999999999999999999999>x",
            "cat 1234567890<f",
            "ls ~99999999999999999999999",
            "ls ~+12345678901/x",
        ] {
            assert!(
                split(line).unwrap_err().reason.contains("too long"),
                "{line:?}"
            );
        }
        for line in ["echo 123456789012345", "echo 123>x", "ls ~+1"] {
            assert!(split(line).is_ok(), "{line:?}");
        }
    }

    // brush-parser 0.4 reads the tokens of a `$(…)` after `<<EOF` on its line as words of
    // the command, leaving `$()`: `reboot` was an argument of `echo`.
    #[test]
    fn a_substitution_after_a_here_document_operator_is_an_error() {
        for line in [
            "cat <<EOF; echo $(reboot)\nhi\nEOF",
            "cat <<EOF | grep \"$(whoami)\"\nhi\nEOF",
            "cat <<EOF; echo $((1 + $(reboot)))\nhi\nEOF",
        ] {
            assert!(
                split(line).unwrap_err().reason.contains("here-document"),
                "{line:?}"
            );
        }
        assert_eq!(
            nested("cat > \"$(mktemp)\" <<EOF\nhi\nEOF\necho $(reboot)"),
            ["mktemp", "reboot"]
        );
        assert_eq!(nested("echo $() ; cat <<< x"), [""]);
    }

    // brush-parser 0.4 loops without end, allocating, on these as they are (found by
    // fuzzing); each ends once the line ends with a newline.
    #[test]
    fn lines_ending_inside_a_here_document_tag_return() {
        for line in [
            "cat <<\"\" ",
            "$(x <<-  ",
            "<<$((  in ",
            "$( << |$(",
            "$($({ << ||$(",
            "}$(><<-\t ",
            "&&<<\"\"<(||(>\\",
            "<<\"\"<(\\",
        ] {
            let _ = split(line);
        }
    }

    #[test]
    fn a_panic_in_the_parse_is_an_error_inline_or_on_its_own_thread() {
        let deep = "(".repeat(100);
        for line in ["ls", deep.as_str()] {
            let e = parse::guarded(line, |_| -> Result<(), Unparsed> { panic!("boom") });
            assert_eq!(e.unwrap_err().reason, "the shell parser failed on it");
        }
        assert_eq!(commands("ls"), vec![vec!["ls".to_string()]]);
    }

    // brush-parser recurses once per nesting level; past the stack a thread has, the
    // process would abort.
    #[test]
    fn deep_nesting_is_parsed_on_a_big_stack_or_refused_unparsed() {
        for n in [200, 2_000] {
            let line = format!("{}reboot{}", "$(".repeat(n), ")".repeat(n));
            assert_eq!(nested(&line).len(), 1);
            let line = format!("{}reboot{}", "if true; then ".repeat(n), "; fi".repeat(n));
            assert_eq!(commands(&line).len(), n + 1);
        }
        for n in [1_000, 5_000] {
            assert!(split(&format!("[[ {}a ]]", "! ".repeat(n))).is_ok());
            assert!(split(&format!("[[ {}a ]]", "a && ".repeat(n))).is_ok());
        }
        let line = format!("{}ls", "{ ".repeat(parse::MAX_OPENERS + 1));
        assert!(split(&line).unwrap_err().reason.contains("nested"));
    }

    /// Pieces of shell syntax, to make lines that reach deep into the parser.
    #[rustfmt::skip]
    const PIECES: &[&str] = &[
        "$(", ")", "`", "\\`", "'", "\"", "\\", "\n", " ", "\t", ";", "&", "|", "||", "&&", "<",
        ">", ">&", "2>", "<<", "<<-", "<<<", "EOF", "'EOF'", "\"\"", "''", "<<\"\"", "<(", ">(",
        "(", "{ ", "}", "${", "$((", "))", "[[", "]]", "#", "~", "~+", "=", "x=", "12", "$'",
        "\\\n", "if ", "then ", "else ", "fi", "for x in ", "do ", "done", "case ", " in ", "a)",
        ";;", "esac", "f() ", "function ", "sh -c ", "sudo ", "eval ", "env -S ", "bash -s ",
        "xargs ", "rm -rf /", "reboot", "$HOME", "é",
    ];

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        // Whatever the line, the split returns: a split or an error, never a panic or an
        // overflowed stack.
        #[test]
        fn any_line_splits_or_is_an_error(line in "\\PC{0,120}") {
            let _ = split(&line);
        }

        #[test]
        fn any_line_of_shell_pieces_splits_or_is_an_error(
            pieces in prop::collection::vec(prop::sample::select(PIECES), 0..48),
        ) {
            let _ = split(&pieces.concat());
        }
    }
}
