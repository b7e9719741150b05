//! Benchmark of the embedded model's KV-cache reuse: prefill time of a ~1,000-token prompt
//! evaluated cold versus with all but its last few tokens kept in the cache, plus the
//! generation speed. Run by `cargo xtask bench local-cache`; prints figures, asserts nothing.
//!
//! Each call is a `generate` with `max_tokens: 1`, so its wall time is the prefill plus one
//! sampled token. "Cold" prompts start with a different word, so only the chat template's
//! first tokens can be reused; "reused" prompts differ from the previous one only in the
//! user's last words.

use std::error::Error;
use std::time::{Duration, Instant};

use halo_adapters::local::{LocalAdapter, LocalConfig, default_model_path};
use halo_core::{GenerationOptions, Message, ModelAdapter, ModelRequest, StablePrefix};

const REPETITIONS: usize = 5;

/// About 60 tokens of filler prose; repeated to build the long system prompt.
const PARAGRAPH: &str = "The build system compiles each crate of the workspace in \
dependency order, caches every artifact by a hash of its inputs, and reruns a build script \
only when a file or variable it declared has changed. Tests of one crate share a single \
binary, so the linker runs once per crate instead of once per test file.";

fn main() -> Result<(), Box<dyn Error>> {
    let path = default_model_path();
    let model = LocalAdapter::load(&path, LocalConfig::default())?;
    println!("model: {}", path.display());
    let runtime = tokio::runtime::Builder::new_current_thread().build()?;
    runtime.block_on(run(&model))
}

struct Timed {
    elapsed: Duration,
    input_tokens: u64,
    cache_read_tokens: u64,
}

async fn call(
    model: &LocalAdapter,
    prefix: &StablePrefix,
    question: &str,
    options: &GenerationOptions,
) -> Result<Timed, Box<dyn Error>> {
    let history = [Message::user(question)];
    let started = Instant::now();
    let response = model
        .generate(ModelRequest::new(prefix, &history, options))
        .await?;
    Ok(Timed {
        elapsed: started.elapsed(),
        input_tokens: response.usage.input_tokens.unwrap_or(0),
        cache_read_tokens: response.usage.cache_read_tokens.unwrap_or(0),
    })
}

fn median(mut values: Vec<Duration>) -> Duration {
    values.sort();
    values[values.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

async fn run(model: &LocalAdapter) -> Result<(), Box<dyn Error>> {
    let one = GenerationOptions::default().with_max_tokens(1);
    let filler = vec![PARAGRAPH; 16].join("\n\n");
    // Warm-up: the first evaluation pays for allocating compute buffers.
    let warm = StablePrefix::new(format!("Warm-up.\n\n{filler}"));
    call(model, &warm, "Ready?", &one).await?;

    let mut cold = Vec::new();
    let mut reused = Vec::new();
    println!(
        "{:>4} {:>14} {:>8} {:>8} {:>16} {:>8} {:>8}",
        "rep", "cold ms", "tokens", "cached", "reused ms", "tokens", "cached"
    );
    for rep in 0..REPETITIONS {
        // A different first word: nothing but the template's opening tokens is in the cache.
        let prefix = StablePrefix::new(format!(
            "Session {}.\n\n{filler}",
            ["alpha", "bravo", "charlie", "delta", "echo"][rep % 5]
        ));
        let c = call(model, &prefix, "Which step runs first, question 1?", &one).await?;
        // Same prompt but the user's last words: all but those tokens come from the cache.
        let r = call(model, &prefix, "Which step runs first, question 2?", &one).await?;
        println!(
            "{rep:>4} {:>14.1} {:>8} {:>8} {:>16.1} {:>8} {:>8}",
            ms(c.elapsed),
            c.input_tokens,
            c.cache_read_tokens,
            ms(r.elapsed),
            r.input_tokens,
            r.cache_read_tokens
        );
        cold.push(c.elapsed);
        reused.push(r.elapsed);
    }
    let (cold, reused) = (median(cold), median(reused));
    println!(
        "prefill, median of {REPETITIONS}: cold {:.1} ms, reused {:.1} ms, ratio {:.1}x (goal: at least 15x)",
        ms(cold),
        ms(reused),
        cold.as_secs_f64() / reused.as_secs_f64()
    );

    // Generation speed: a short prompt, 128 tokens, no stop before.
    let prefix = StablePrefix::new("You are a storyteller.");
    let long = GenerationOptions::default().with_max_tokens(128);
    let history = [Message::user(
        "Tell a long story about a lighthouse keeper.",
    )];
    let request = ModelRequest::new(&prefix, &history, &one);
    model.generate(request).await?; // puts the prompt in the cache
    let started = Instant::now();
    let response = model
        .generate(ModelRequest::new(&prefix, &history, &long))
        .await?;
    let elapsed = started.elapsed();
    let generated = response.usage.output_tokens.unwrap_or(0);
    println!(
        "generation: {generated} tokens in {:.0} ms, {:.0} tokens/s",
        ms(elapsed),
        generated as f64 / elapsed.as_secs_f64()
    );
    Ok(())
}
