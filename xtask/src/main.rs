//! `cargo xtask`: Halo's developer tasks (ci, model, demo, bench).

mod model;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("model") => {
            let path = model::ensure_model()?;
            println!("{}", path.display());
            Ok(())
        }
        _ => {
            eprintln!("usage: cargo xtask <ci|model|demo|bench>");
            std::process::exit(2)
        }
    }
}
