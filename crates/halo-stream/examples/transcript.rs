//! Writes the UI Message Stream of every scripted scenario to `<DIR>/<name>.sse`, for the
//! Node test that feeds them to the `ai` package (`cargo xtask interop`).
//!
//! `cargo run -p halo-stream --example transcript -- DIR`

#[path = "../tests/it/scenarios.rs"]
mod scenarios;

fn main() -> std::io::Result<()> {
    let Some(dir) = std::env::args_os().nth(1) else {
        eprintln!("usage: transcript DIR");
        std::process::exit(2);
    };
    let dir = std::path::PathBuf::from(dir);
    std::fs::create_dir_all(&dir)?;
    for (name, agent, input, options) in scenarios::all() {
        let path = dir.join(format!("{name}.sse"));
        std::fs::write(&path, scenarios::transcript(agent, input, options))?;
        println!("{}", path.display());
    }
    Ok(())
}
