//! `cargo xtask bench server`: the release `llooma` binary measured from the outside.
//!
//! - start to ready on an existing database (process spawn until `/readyz` answers 200);
//! - resident memory once idle;
//! - sign-ins per second (argon2id at the production cost, concurrent clients).
//!
//! Plain HTTP/1.1 over `std::net::TcpStream`, so xtask needs no HTTP client.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::util::{Ctx, run};

const STARTS: usize = 15;
const LOGIN_SECONDS: u64 = 5;
const LOGIN_CLIENTS: usize = 8;
const PASSWORD: &str = "benchmark password 0123456789";

pub fn server(ctx: &Ctx, _args: &[String]) -> Result<()> {
    run(&mut ctx.cargo(["build", "--release", "-p", "llooma-server"]))?;
    let binary = ctx.root.join("target").join("release").join("llooma");
    let data = tempdir()?;

    // First start creates the database, the secret and the administrator.
    let port = free_port()?;
    let mut first = spawn(&binary, &data, port)?;
    wait_ready(port, Duration::from_secs(30))?;
    let body = format!(r#"{{"username":"bench","password":"{PASSWORD}"}}"#);
    let (status, _) = request(port, "POST", "/api/v1/auth/register", Some(&body))?;
    if status != 201 {
        bail!("registering the benchmark account answered {status}");
    }
    stop(&mut first);

    let mut starts = Vec::new();
    let mut rss_kib = 0;
    for i in 0..STARTS {
        let port = free_port()?;
        let started = Instant::now();
        let mut child = spawn(&binary, &data, port)?;
        wait_ready(port, Duration::from_secs(30))?;
        starts.push(started.elapsed());
        if i == STARTS - 1 {
            std::thread::sleep(Duration::from_secs(2));
            rss_kib = resident_kib(child.id())?;
            logins_per_second(port)?;
        }
        stop(&mut child);
    }
    starts.sort();
    eprintln!(
        "start to ready (existing SQLite database, {STARTS} starts): median {:.1} ms, min {:.1} ms, max {:.1} ms (goal < 300 ms)",
        ms(starts[STARTS / 2]),
        ms(starts[0]),
        ms(starts[STARTS - 1])
    );
    eprintln!("idle resident memory: {:.1} MiB (goal < 40 MiB)", rss_kib as f64 / 1024.0);
    let _ = std::fs::remove_dir_all(&data);
    Ok(())
}

fn logins_per_second(port: u16) -> Result<()> {
    let ok = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs(LOGIN_SECONDS);
    let body = format!(r#"{{"username":"bench","password":"{PASSWORD}"}}"#);
    let workers: Vec<_> = (0..LOGIN_CLIENTS)
        .map(|_| {
            let (ok, failed, body) = (ok.clone(), failed.clone(), body.clone());
            std::thread::spawn(move || {
                while Instant::now() < deadline {
                    match request(port, "POST", "/api/v1/auth/login", Some(&body)) {
                        Ok((200, _)) => ok.fetch_add(1, Ordering::Relaxed),
                        _ => failed.fetch_add(1, Ordering::Relaxed),
                    };
                }
            })
        })
        .collect();
    for worker in workers {
        let _ = worker.join();
    }
    let ok = ok.load(Ordering::Relaxed);
    eprintln!(
        "sign-ins: {:.1}/s with {LOGIN_CLIENTS} concurrent clients over {LOGIN_SECONDS} s ({} failed)",
        ok as f64 / LOGIN_SECONDS as f64,
        failed.load(Ordering::Relaxed)
    );
    Ok(())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn tempdir() -> Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("llooma-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

fn free_port() -> Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

fn spawn(binary: &Path, data: &Path, port: u16) -> Result<Child> {
    Command::new(binary)
        .arg("serve")
        .env("LLOOMA_DATA_DIR", data)
        .env("LLOOMA_LISTEN", format!("127.0.0.1:{port}"))
        .env("LLOOMA_LOG", "warn")
        .env_remove("DATABASE_URL")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {}", binary.display()))
}

fn stop(child: &mut Child) {
    let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    let _ = child.wait();
}

fn wait_ready(port: u16, limit: Duration) -> Result<()> {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Ok((200, _)) = request(port, "GET", "/readyz", None) {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    bail!("the server on port {port} was not ready within {limit:?}")
}

fn resident_kib(pid: u32) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .context("VmRSS not found")
}

/// One request on a fresh connection; returns the status and the body.
fn request(port: u16, method: &str, path: &str, body: Option<&str>) -> Result<(u16, String)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let body = body.unwrap_or("");
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .context("no HTTP status in the answer")?;
    let body = response.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
    Ok((status, body))
}
