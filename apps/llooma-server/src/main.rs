//! `llooma`: the Llooma server and its administration commands.

mod http;
mod secret;
mod serve;
mod settings;

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};
use llooma_store::Store;
use llooma_vault::Secret;

use crate::settings::{LogFormat, Settings};

#[derive(Debug, Parser)]
#[command(name = "llooma", version, about = "A self-hosted, multi-account LLM chat server")]
struct Cli {
    /// A TOML settings file (also LLOOMA_CONFIG). Environment variables override it.
    #[arg(long, short = 'c', global = true)]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the server (the default).
    Serve,
    /// Apply database migrations and exit.
    Migrate,
    /// Print the effective settings, secrets redacted.
    Config,
    /// Manage accounts from the shell.
    Admin {
        #[command(subcommand)]
        command: AdminCommand,
    },
    /// Re-encrypt every stored secret under a new instance secret.
    RotateSecret {
        /// Read the new secret from this environment variable instead of generating one.
        #[arg(long)]
        new_secret_env: Option<String>,
    },
    /// MCP servers from the shell.
    Mcp {
        #[command(subcommand)]
        command: McpCommand,
    },
    /// Say whether the server may connect to URL, and why (exit 0 allowed, 3 refused, 2 usage).
    CheckAddress {
        /// What the address is for: mcp, fetch (page reading), bot (chat servers), provider
        /// (model providers) or search (web search, public only here).
        #[arg(long, default_value = "mcp")]
        purpose: String,
        url: String,
    },
}

/// Exit status of `check-address` when the address is refused.
const EXIT_REFUSED: u8 = 3;
/// Exit status for a usage error (clap uses the same for bad arguments).
const EXIT_USAGE: u8 = 2;

#[derive(Debug, Subcommand)]
enum McpCommand {
    /// Connect to an MCP server as adding it would, and show who answered and its tools.
    Probe {
        url: String,
        /// Send the token held in this environment variable.
        #[arg(long)]
        token_env: Option<String>,
        /// Print JSON: {protocolVersion, serverName, instructions, tools: [{name, modelName, group}]}.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
enum AdminCommand {
    /// Create an administrator account (the password is read from stdin unless --password-env).
    Create {
        #[arg(long)]
        username: String,
        #[arg(long)]
        display_name: Option<String>,
        /// Read the password from this environment variable.
        #[arg(long)]
        password_env: Option<String>,
    },
}

/// What a command prints for the person at the terminal.
#[expect(clippy::print_stdout, reason = "the command's own output")]
fn say(text: &str) {
    println!("{text}");
}

fn init_tracing(settings: &Settings) {
    let filter = tracing_subscriber::EnvFilter::try_new(&settings.log_filter)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    match settings.log_format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

/// Opens the database (creating the data directory for SQLite) and applies migrations.
async fn open_store(settings: &Settings) -> anyhow::Result<Store> {
    if settings.uses_sqlite() {
        std::fs::create_dir_all(&settings.data_dir).with_context(|| {
            format!("creating the data directory {}", settings.data_dir.display())
        })?;
    }
    let url = settings.database_url();
    let store = Store::connect(&url)
        .await
        .with_context(|| format!("opening the database {}", llooma_store::redact_url(&url)))?;
    store.migrate().await.context("applying database migrations")?;
    Ok(store)
}

fn read_password(password_env: Option<&str>) -> anyhow::Result<Secret> {
    if let Some(name) = password_env {
        return std::env::var(name)
            .map(Secret::new)
            .with_context(|| format!("the environment variable {name} is not set"));
    }
    let mut stderr = std::io::stderr();
    let _ = write!(stderr, "Password: ");
    let _ = stderr.flush();
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).context("reading the password from stdin")?;
    Ok(Secret::new(line.trim_end_matches(['\r', '\n'])))
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let settings = Settings::load(cli.config.as_deref(), |name| std::env::var(name).ok())?;
    match cli.command.unwrap_or(Command::Serve) {
        Command::CheckAddress { purpose, url } => {
            return check_address(&settings, &purpose, &url).await;
        }
        Command::Mcp { command: McpCommand::Probe { url, token_env, json } } => {
            return mcp_probe(&settings, &url, token_env.as_deref(), json).await;
        }
        Command::Config => say(settings.to_redacted_toml()?.trim_end()),
        Command::Serve => {
            init_tracing(&settings);
            serve::serve(settings).await?;
        }
        Command::Migrate => {
            init_tracing(&settings);
            open_store(&settings).await?;
            say("migrations applied");
        }
        Command::Admin {
            command: AdminCommand::Create { username, display_name, password_env },
        } => {
            init_tracing(&settings);
            let username = llooma_api::normalize_username(&username);
            llooma_api::validate_username(&username).map_err(|e| anyhow::anyhow!("{e}"))?;
            let password = read_password(password_env.as_deref())?;
            llooma_api::validate_password(&password).map_err(|e| anyhow::anyhow!("{e}"))?;
            let store = open_store(&settings).await?;
            secret::open_vault(&settings, &store).await?;
            let hash = llooma_api::Passwords::new(1)
                .hash(password)
                .await
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            let account = store
                .create_admin(llooma_store::NewAccount {
                    display_name: display_name.unwrap_or_else(|| username.clone()),
                    username,
                    password_hash: hash,
                })
                .await?;
            say(&format!("administrator {} created", account.username));
        }
        Command::RotateSecret { new_secret_env } => {
            init_tracing(&settings);
            let new_value = match new_secret_env {
                Some(name) => {
                    Some(std::env::var(&name).with_context(|| format!("{name} is not set"))?)
                }
                None => None,
            };
            let store = open_store(&settings).await?;
            say(&secret::rotate(&settings, &store, new_value).await?);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `llooma mcp probe`: what the add-server test shows, under the same policy.
async fn mcp_probe(
    settings: &Settings,
    url: &str,
    token_env: Option<&str>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let token = match token_env {
        Some(name) => Some(Secret::new(
            std::env::var(name)
                .with_context(|| format!("the environment variable {name} is not set"))?,
        )),
        None => None,
    };
    let policy = std::sync::Arc::new(settings.outbound_policy()?);
    let report = match llooma_mcp_client::probe(policy, url, token.as_ref()).await {
        Ok(report) => report,
        Err(err) => {
            eprintln!("error: {err}");
            return Ok(ExitCode::FAILURE);
        }
    };
    let names: Vec<&str> = report.tools.iter().map(|t| t.name.as_str()).collect();
    let slug = llooma_tool_naming::slugify(report.server_name.as_deref().unwrap_or("server"));
    let table = llooma_tool_naming::NameTable::build([("probe", slug.as_str(), names.clone())])
        .map_err(|e| anyhow::anyhow!("naming tools: {e}"))?;
    let group_of: std::collections::HashMap<String, String> =
        llooma_tool_naming::group_tools(&names)
            .into_iter()
            .flat_map(|g| g.tools.into_iter().map(move |t| (t, g.key.clone())))
            .collect();
    let tools: Vec<serde_json::Value> = names
        .iter()
        .map(|name| {
            serde_json::json!({
                "name": name,
                "modelName": table.model_name(&"probe", name).unwrap_or_default(),
                "group": group_of.get(*name).cloned().unwrap_or_default(),
            })
        })
        .collect();
    if json {
        let out = serde_json::json!({
            "protocolVersion": report.protocol_version,
            "serverName": report.server_name,
            "serverVersion": report.server_version,
            "instructions": report.instructions,
            "tools": tools,
            "notes": report.notes.iter().map(ToString::to_string).collect::<Vec<_>>(),
        });
        say(&serde_json::to_string_pretty(&out)?);
    } else {
        say(&format!(
            "connected: {} {} (protocol {})",
            report.server_name.as_deref().unwrap_or("(unnamed server)"),
            report.server_version.as_deref().unwrap_or(""),
            report.protocol_version
        ));
        say(&format!("{} tools:", tools.len()));
        for tool in &tools {
            say(&format!(
                "  {}  ->  {}  [group: {}]",
                tool["name"].as_str().unwrap_or_default(),
                tool["modelName"].as_str().unwrap_or_default(),
                tool["group"].as_str().unwrap_or_default()
            ));
        }
        for note in &report.notes {
            say(&format!("note: {note}"));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `llooma check-address`: decides exactly as the server would, with the same settings.
async fn check_address(settings: &Settings, purpose: &str, url: &str) -> anyhow::Result<ExitCode> {
    let purpose: llooma_net::Purpose = match purpose.parse() {
        Ok(purpose) => purpose,
        Err(err) => {
            eprintln!("error: {err}");
            return Ok(ExitCode::from(EXIT_USAGE));
        }
    };
    let policy = match settings.outbound_policy() {
        Ok(policy) => policy,
        Err(err) => {
            eprintln!("error: {err:#}");
            return Ok(ExitCode::from(EXIT_USAGE));
        }
    };
    let check = llooma_net::check_address(&policy, purpose, url, &llooma_net::SystemResolver).await;
    say(check.to_string().trim_end());
    Ok(if check.allowed() { ExitCode::SUCCESS } else { ExitCode::from(EXIT_REFUSED) })
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("error: starting the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// jemalloc, configured in `.cargo/config.toml` to return freed memory to the system within a
/// second or two (a background thread purges what has been unused that long). With glibc's
/// malloc, memory once used by 10,000 open tabs stayed with the process after they closed; an
/// allocator that only touches the pages it hands out also keeps an idle stream's buffers
/// cheaper. Chosen by measurement against glibc and mimalloc (docs/performance.md).
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;
