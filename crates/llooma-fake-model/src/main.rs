//! `llooma-fake-model`: an OpenAI-compatible model server on 127.0.0.1 that echoes the last
//! user message, or plays a JSON script, so Llooma can be tried end to end with no provider.

use std::io::Write as _;
use std::path::PathBuf;

use clap::Parser;
use llooma_fake_model::{FakeModel, Fallback, ScriptFile};

/// An OpenAI-compatible fake model on 127.0.0.1 (base URL `http://127.0.0.1:<port>/v1`).
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// Port on 127.0.0.1; 0 picks a free one.
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// A JSON script: `{"replies": [...], "fallback": {"kind": "echo"}}` or an array of
    /// replies. Without one, every request is answered by echoing the last user message.
    #[arg(long)]
    script: Option<PathBuf>,
    /// Pause between streamed chunks of echo replies, in milliseconds.
    #[arg(long, default_value_t = 30)]
    chunk_delay_ms: u64,
    /// Model ids listed by `GET /v1/models` (repeat the flag for several).
    #[arg(long = "model", default_value = "fake-model")]
    models: Vec<String>,
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    match run().await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("llooma-fake-model: {message}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// The binary's whole life; errors are sentences for the terminal (this crate is a library too,
/// so no anyhow here).
async fn run() -> Result<(), String> {
    let args = Args::parse();
    let script = match &args.script {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("could not read the script {}: {e}", path.display()))?;
            ScriptFile::from_json(&text)
                .map_err(|e| format!("{} is not a valid script: {e}", path.display()))?
        }
        None => ScriptFile {
            replies: Vec::new(),
            fallback: Fallback::Echo { chunk_delay_ms: args.chunk_delay_ms },
        },
    };
    let model = FakeModel::builder()
        .port(args.port)
        .replies(script.replies)
        .fallback(script.fallback)
        .models(args.models)
        .log_requests(true)
        .start()
        .await
        .map_err(|e| format!("could not listen on 127.0.0.1:{}: {e}", args.port))?;
    // The base URL goes to stdout, alone on its line, so a script can capture it.
    let mut stdout = std::io::stdout();
    writeln!(stdout, "{}", model.base_url())
        .and_then(|()| stdout.flush())
        .map_err(|e| e.to_string())?;
    eprintln!("llooma-fake-model: serving {} (Ctrl-C to stop)", model.base_url());
    tokio::signal::ctrl_c().await.map_err(|e| format!("could not wait for Ctrl-C: {e}"))?;
    model.stop().await;
    Ok(())
}
