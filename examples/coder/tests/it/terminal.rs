//! The coder on a pseudo-terminal, as a person runs it: a model whose command is built to
//! redraw the approval question (carriage return, cursor up, erase line), a command whose
//! output writes the clipboard (OSC 52), and model text with a C1 control. The screen, as a
//! VT100 terminal shows it, must show the real command, escaped, before the answer; and no
//! byte the coder writes may drive the terminal.

use std::io::{Read as _, Write as _};
use std::os::fd::OwnedFd;
use std::os::unix::fs::OpenOptionsExt as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use halo_adapters::sim::SimReply;
use halo_adapters::sim::openai::OpenAiSim;
use serde_json::json;

use super::state_home;

/// The command the model asks for: on a terminal that obeys it, the question's line would
/// read `ls -la`.
const REDRAWN: &str = "rm -rf x\r\x1b[1A\x1b[2Kls -la";
/// The same, as the coder must show it.
const SHOWN: &str = "rm -rf x\\r\\x1b[1A\\x1b[2Kls -la";
/// The question's prompt.
const PROMPT: &str = "[Y]es / [N]o / [Q]uit: ";

/// A pseudo-terminal: the controller side, and the path of the other side.
fn open_pty() -> (OwnedFd, std::path::PathBuf) {
    use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
    let controller = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC)
        .expect("a pseudo-terminal opens");
    grantpt(&controller).unwrap();
    unlockpt(&controller).unwrap();
    let name = ptsname(&controller, Vec::new()).unwrap();
    let size = rustix::termios::Winsize {
        ws_row: 60,
        ws_col: 200,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    rustix::termios::tcsetwinsize(&controller, size).unwrap();
    (
        controller,
        std::path::PathBuf::from(name.to_str().unwrap().to_string()),
    )
}

/// Everything the coder wrote to the terminal so far.
#[derive(Clone, Default)]
struct Screen(Arc<Mutex<Vec<u8>>>);

impl Screen {
    fn bytes(&self) -> Vec<u8> {
        self.0.lock().unwrap().clone()
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes()).into_owned()
    }

    /// Waits (at most 60 s, a guard against a hang) until the output holds `n` prompts.
    fn wait_for_prompts(&self, n: usize) {
        let start = Instant::now();
        while self.text().matches(PROMPT).count() < n {
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "no question {n} after 60 s; the terminal shows:\n{}",
                self.text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// What a VT100 terminal of the pty's size shows.
    fn rendered(&self) -> String {
        let size = |n| std::num::NonZeroU16::new(n).expect("not zero");
        let mut parser = vt100::Parser::new(size(60), size(200), 0);
        parser.process(&self.bytes());
        parser.screen().contents()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_built_to_redraw_the_question_is_shown_escaped_on_a_terminal() {
    let project = tempfile::tempdir().unwrap();
    let sim = OpenAiSim::openai().await.unwrap();
    sim.set_reply_script([
        SimReply::tool_call("bash", json!({"command": REDRAWN})),
        SimReply::tool_call(
            "bash",
            json!({"command": "printf 'copied\\033]52;c;cHduZWQ=\\007\\n'"}),
        ),
        SimReply::text("Done.\u{1b}]52;c;cHduZWQ=\u{7} \u{9b}2J"),
    ]);
    let (controller, tty) = open_pty();
    let terminal = || {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(rustix::fs::OFlags::NOCTTY.bits() as i32)
            .open(&tty)
            .unwrap()
    };
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_coder"))
        .args(["--dir", project.path().to_str().unwrap(), "Clean up."])
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("GEMINI_API_KEY")
        .env_remove("DEEPSEEK_API_KEY")
        .env("OPENAI_API_KEY", "sk-test")
        .env("OPENAI_BASE_URL", sim.base_url())
        .env("OPENAI_MODEL", "sim-model")
        .env("RUST_LOG", "warn")
        .env("XDG_STATE_HOME", state_home())
        .stdin(terminal())
        .stdout(terminal())
        .stderr(terminal())
        .spawn()
        .expect("the coder starts");
    let screen = Screen::default();
    let mut reader = std::fs::File::from(controller.try_clone().unwrap());
    let sink = screen.clone();
    let reading = std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        // EIO once the coder and its terminal are gone.
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0 {
                break;
            }
            sink.0.lock().unwrap().extend_from_slice(&buf[..n]);
        }
    });
    let mut keyboard = std::fs::File::from(controller);

    // The question about the redrawing command, before any answer.
    screen.wait_for_prompts(1);
    let shown = screen.rendered();
    assert!(
        shown.contains(&format!("? allow `bash`: {SHOWN}")),
        "the screen does not show the real command:\n{shown}"
    );
    let raw = screen.bytes();
    assert!(
        !raw.contains(&0x1b),
        "a raw ESC reached the terminal:\n{}",
        screen.text()
    );
    assert!(
        raw.windows(2).all(|w| w[0] != b'\r' || w[1] == b'\n'),
        "a raw carriage return reached the terminal:\n{}",
        screen.text()
    );
    keyboard.write_all(b"n\n").unwrap();

    // The second command runs; its output and the model's answer hold a clipboard write.
    screen.wait_for_prompts(2);
    keyboard.write_all(b"y\n").unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the coder did not finish:\n{}",
            screen.text()
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    drop(keyboard);
    reading.join().unwrap();
    let raw = screen.bytes();
    let shown = screen.rendered();
    assert!(status.success(), "{status}:\n{shown}");
    for (byte, name) in [(0x1b, "ESC"), (0x07, "BEL")] {
        assert!(
            !raw.contains(&byte),
            "a raw {name} reached the terminal:\n{}",
            screen.text()
        );
    }
    assert!(
        !screen.text().contains('\u{9b}'),
        "a raw C1 CSI reached the terminal"
    );
    assert!(
        shown.contains("copied\\x1b]52;c;cHduZWQ=\\x07"),
        "the command's output is not shown escaped:\n{shown}"
    );
    assert!(
        shown.contains("Done.\\x1b]52;c;cHduZWQ=\\x07 \\u{9b}2J"),
        "the model's text is not shown escaped:\n{shown}"
    );
    // The model read that the user skipped the first command.
    let second = sim.requests()[1].to_string();
    assert!(second.contains("skipped"), "{second}");
}
