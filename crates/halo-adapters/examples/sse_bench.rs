//! Benchmark of the streaming decode path: Halo's SSE layer plus chat-completion chunk
//! assembly ([`decode_stream`]) over a large generated stream in OpenAI's chunk format, next
//! to a bare `serde_json` parse of the same chunks (already split out, so no framing at
//! all), and the time from the first body byte to the first event. Run by
//! `cargo xtask bench sse`; prints figures, asserts nothing.
//!
//! The stream is one turn of about 32 MB: text deltas, and four tool calls whose argument
//! fragments (1-24 characters, some non-ASCII or escaped) interleave, several per chunk at
//! times; then the finish chunk, OpenAI's usage chunk and `[DONE]`. It is fed in 16 KiB
//! reads (a TLS record) from memory, so only decoding is timed.

use std::error::Error;
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use halo_adapters::openai::{OpenAiCompatible, decode_stream};
use halo_core::{GenerationOptions, Message, ModelAdapter, ModelRequest, StablePrefix};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

const TARGET_BYTES: usize = 32 << 20;
const READ_BYTES: usize = 16 << 10;
const REPETITIONS: usize = 5;
const CALLS: u64 = 4;

fn main() -> Result<(), Box<dyn Error>> {
    let stream = generate();
    let mb = stream.body.len() as f64 / 1e6;
    println!(
        "stream: {mb:.1} MB, {} chunks, {} tool calls, {} KiB reads",
        stream.chunks.len(),
        CALLS,
        READ_BYTES >> 10
    );

    let reads: Vec<&[u8]> = stream.body.chunks(READ_BYTES).collect();
    let (halo, events) = best_of(|| {
        let events = decode_stream(futures::stream::iter(reads.iter().map(|r| Ok(*r))));
        futures::executor::block_on(events.fold(0usize, |n, e| async move {
            assert!(e.is_ok(), "decode failed: {e:?}");
            n + 1
        }))
    });
    let (framing, _) = best_of(|| {
        let events =
            halo_adapters::sse::decode(futures::stream::iter(reads.iter().map(|r| Ok(*r))));
        futures::executor::block_on(events.fold(0usize, |n, _| async move { n + 1 }))
    });
    let (typed, _) = best_of(|| {
        stream
            .chunks
            .iter()
            .map(|c| serde_json::from_str::<BareChunk>(c).map(|_| 1usize))
            .sum::<Result<usize, _>>()
            .expect("chunk parses")
    });
    let (untyped, _) = best_of(|| {
        stream
            .chunks
            .iter()
            .map(|c| serde_json::from_str::<Value>(c).map(|_| 1usize))
            .sum::<Result<usize, _>>()
            .expect("chunk parses")
    });
    let rate = |d: Duration| mb / d.as_secs_f64();
    println!(
        "halo sse + assembly:        {:8.1} MB/s  ({events} events, best of {REPETITIONS})",
        rate(halo)
    );
    println!(
        "  of which SSE framing:     {:8.1} MB/s  (halo_adapters::sse::decode alone)",
        rate(framing)
    );
    println!(
        "bare serde_json, typed:     {:8.1} MB/s  (owned-string chunk struct, chunks pre-split)",
        rate(typed)
    );
    println!("bare serde_json, Value:     {:8.1} MB/s", rate(untyped));
    println!(
        "ratio halo / bare typed:    {:8.2}     (goal: at least 0.50)",
        rate(halo) / rate(typed)
    );
    println!(
        "ratio halo / bare Value:    {:8.2}",
        rate(halo) / rate(untyped)
    );

    // First byte to first event, in memory: the first 16 KiB read through the decoder.
    let first_read = reads[0];
    let mut samples = Vec::new();
    for _ in 0..2000 {
        let started = Instant::now();
        let mut events = decode_stream(futures::stream::iter([Ok::<_, halo_core::ModelError>(
            first_read,
        )]));
        let first = futures::executor::block_on(events.next());
        samples.push(started.elapsed());
        assert!(matches!(first, Some(Ok(_))));
    }
    println!(
        "first byte to first event, in memory:       median {:6.1} µs",
        median_us(&mut samples)
    );

    // First byte to first event through the adapter over loopback HTTP: the server notes
    // the instant it writes the first body byte; the client the instant the first event
    // arrives (one process, one clock).
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let mut samples = runtime.block_on(over_loopback(stream.body[..READ_BYTES * 4].to_vec()))?;
    println!(
        "first byte to first event, loopback HTTP:   median {:6.1} µs (reqwest + decode, {} runs)",
        median_us(&mut samples),
        samples.len()
    );
    Ok(())
}

/// The fastest of [`REPETITIONS`] runs, and its result.
fn best_of<T>(mut run: impl FnMut() -> T) -> (Duration, T) {
    let mut best: Option<(Duration, T)> = None;
    for _ in 0..REPETITIONS {
        let started = Instant::now();
        let out = run();
        let elapsed = started.elapsed();
        if best.as_ref().is_none_or(|(b, _)| elapsed < *b) {
            best = Some((elapsed, out));
        }
    }
    best.expect("at least one run")
}

fn median_us(samples: &mut [Duration]) -> f64 {
    samples.sort();
    samples[samples.len() / 2].as_secs_f64() * 1e6
}

/// What a typical client deserializes a chunk into (owned strings), for the bare parse.
#[derive(Deserialize)]
#[allow(dead_code)]
struct BareChunk {
    id: String,
    model: String,
    choices: Vec<BareChoice>,
    usage: Option<Value>,
}

#[derive(Deserialize)]
#[allow(dead_code)]
struct BareChoice {
    index: u32,
    delta: BareDelta,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
#[allow(dead_code)]
struct BareDelta {
    content: Option<String>,
    tool_calls: Option<Vec<BareToolCall>>,
}

#[derive(Deserialize)]
#[allow(dead_code)]
struct BareToolCall {
    index: u32,
    id: Option<String>,
    function: Option<BareFunction>,
}

#[derive(Deserialize)]
#[allow(dead_code)]
struct BareFunction {
    name: Option<String>,
    arguments: Option<String>,
}

struct Generated {
    /// The SSE body.
    body: Vec<u8>,
    /// Each chunk's JSON, as its `data:` line holds it.
    chunks: Vec<String>,
}

/// A deterministic xorshift generator.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const WORDS: &[&str] = &[
    "the",
    "file",
    "src/main.rs",
    "温度",
    "25℃",
    "line\n",
    "\"quoted\"",
    "fn",
    "{",
    "}",
    "tab\there",
    "😀",
    "cargo",
    "test",
    "naïve",
    "path/to/module",
    "0.5",
    "[1, 2]",
];

fn fragment(rng: &mut Rng) -> String {
    let mut s = String::new();
    let target = 1 + rng.below(24) as usize;
    while s.chars().count() < target {
        s.push_str(WORDS[rng.below(WORDS.len() as u64) as usize]);
        s.push(' ');
    }
    s.chars().take(target).collect()
}

fn chunk(delta: Value, finish: Option<&str>) -> Value {
    json!({
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": 1_750_000_000,
        "model": "gpt-4o-mini-2024-07-18",
        "system_fingerprint": "fp_0123456789",
        "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
        "usage": null,
    })
}

fn generate() -> Generated {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut chunks = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
    let mut started = 0u64;
    let mut size = 0usize;
    while size < TARGET_BYTES {
        let value = match rng.below(10) {
            0..=3 => chunk(json!({"content": fragment(&mut rng)}), None),
            _ => {
                // One to three argument fragments of open calls; now and then a new call.
                let mut calls = Vec::new();
                if started < CALLS && (started == 0 || rng.below(2000) == 0) {
                    calls.push(json!({"index": started, "id": format!("call_{started}"), "type": "function",
                        "function": {"name": "write", "arguments": ""}}));
                    started += 1;
                }
                for _ in 0..1 + rng.below(3) {
                    let index = rng.below(started);
                    calls.push(
                        json!({"index": index, "function": {"arguments": fragment(&mut rng)}}),
                    );
                }
                chunk(json!({"tool_calls": calls}), None)
            }
        };
        let text = value.to_string();
        size += text.len() + 8;
        chunks.push(value);
    }
    chunks.push(chunk(json!({}), Some("tool_calls")));
    let mut usage = chunk(json!({}), None);
    usage["choices"] = json!([]);
    usage["usage"] = json!({"prompt_tokens": 1200, "completion_tokens": 900000, "total_tokens": 901200,
        "prompt_tokens_details": {"cached_tokens": 1152}});
    chunks.push(usage);
    let chunks: Vec<String> = chunks.iter().map(Value::to_string).collect();
    let mut body = Vec::with_capacity(size + 64);
    for c in &chunks {
        body.extend_from_slice(b"data: ");
        body.extend_from_slice(c.as_bytes());
        body.extend_from_slice(b"\n\n");
    }
    body.extend_from_slice(b"data: [DONE]\n\n");
    Generated { body, chunks }
}

/// Serves `body` (chunked, one HTTP chunk per 16 KiB) to each request and measures, per
/// run, the time from writing the first body byte to the adapter's first event.
async fn over_loopback(body: Vec<u8>) -> Result<Vec<Duration>, Box<dyn Error>> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Instant>();
    let server = tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let body = body.clone();
            let tx = tx.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 8192];
                // The head, then the body by content-length.
                let (end, length) = loop {
                    let Ok(n) = socket.read(&mut buf).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    head.extend_from_slice(&buf[..n]);
                    if let Some(p) = head.windows(4).position(|w| w == b"\r\n\r\n") {
                        let text = String::from_utf8_lossy(&head[..p]).to_lowercase();
                        let length = text
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .and_then(|v| v.trim().parse::<usize>().ok())
                            .unwrap_or(0);
                        break (p + 4, length);
                    }
                };
                while head.len() < end + length {
                    let Ok(n) = socket.read(&mut buf).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    head.extend_from_slice(&buf[..n]);
                }
                let response_head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
                if socket.write_all(response_head.as_bytes()).await.is_err() {
                    return;
                }
                let _ = socket.flush().await;
                // Let the client see the head before the first body byte goes out.
                tokio::time::sleep(Duration::from_millis(2)).await;
                for (i, piece) in body.chunks(READ_BYTES).enumerate() {
                    let mut frame = format!("{:x}\r\n", piece.len()).into_bytes();
                    frame.extend_from_slice(piece);
                    frame.extend_from_slice(b"\r\n");
                    if i == 0 {
                        let _ = tx.send(Instant::now());
                    }
                    if socket.write_all(&frame).await.is_err() {
                        return;
                    }
                }
                let _ = socket.write_all(b"0\r\n\r\n").await;
            });
        }
    });
    let model = OpenAiCompatible::custom(format!("http://{addr}/v1"), "bench").build()?;
    let prefix = StablePrefix::new("Bench.");
    let history = [Message::user("go")];
    let options = GenerationOptions::default();
    let mut samples = Vec::new();
    for _ in 0..60 {
        let mut events = model.stream(ModelRequest::new(&prefix, &history, &options));
        let first = events.next().await;
        let arrived = Instant::now();
        let Some(Ok(_)) = first else {
            return Err(format!("no first event: {first:?}").into());
        };
        let sent = rx.recv().await.ok_or("the server stopped")?;
        samples.push(arrived.saturating_duration_since(sent));
        drop(events);
    }
    server.abort();
    Ok(samples)
}
