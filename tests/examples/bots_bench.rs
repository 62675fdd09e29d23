//! The bots benchmark (run by `cargo xtask bench bots`): the release `llooma` binary polling many
//! bot integrations against the fake Chatto server, measured from the outside.
//!
//! - CPU (user + system time of the server process over a window, as a share of one core) and
//!   resident memory while every integration is polled at the default interval (5 s);
//! - the time from a notification appearing to the answer being posted, and the part of it after
//!   the bot picked the notification up, with the fake model's own round trip (measured
//!   separately, median) subtracted.
//!
//! Environment: `LLOOMA_BIN` (the binary, required), `BENCH_BOTS` (200), `BENCH_SECS` (60),
//! `BENCH_QUESTIONS` (40).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    reason = "a benchmark driver: a failed step should stop it loudly"
)]

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use llooma_chatto_fake::{ALL_BOT_PERMISSIONS, BotStyle, FakeChatto, SignalKind};
use llooma_fake_model::{FakeModel, Fallback};
use serde_json::{Value, json};

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

struct Client {
    http: reqwest::Client,
    base: String,
    cookie: Option<String>,
    csrf: Option<String>,
}

impl Client {
    async fn send(
        &mut self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut request = self
            .http
            .request(method, format!("{}{}", self.base, path))
            .header("origin", &self.base);
        if let Some(cookie) = &self.cookie {
            request = request.header("cookie", format!("llooma_session={cookie}"));
        }
        if let Some(csrf) = &self.csrf {
            request = request.header("x-csrf-token", csrf);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        if let Some(cookie) = response.headers().get("set-cookie") {
            let value = cookie.to_str().unwrap().split(';').next().unwrap();
            self.cookie = Some(value.trim_start_matches("llooma_session=").to_owned());
        }
        let json: Value = response.json().await.unwrap_or(Value::Null);
        if let Some(csrf) = json.get("csrfToken").and_then(Value::as_str) {
            self.csrf = Some(csrf.to_owned());
        }
        (status, json)
    }
}

fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name (which is in parentheses): utime is the 14th, stime the 15th.
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

fn resident_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kib / 1024.0
}

fn ticks_per_second() -> f64 {
    let out = Command::new("getconf").arg("CLK_TCK").output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap_or(100.0)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let index = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[index]
}

fn millis(d: chrono::TimeDelta) -> f64 {
    d.num_microseconds().unwrap_or(0) as f64 / 1000.0
}

/// The fake model's own round trip for a short answer (what the bot's model time is here).
async fn model_round_trip_ms(model: &FakeModel) -> f64 {
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let mut times = Vec::new();
    for _ in 0..30 {
        let started = Instant::now();
        let body = json!({"model": "fake-model", "stream": true,
            "messages": [{"role": "user", "content": "Ann Lee (@ann): @bot question"}]});
        let response = http
            .post(format!("{}/chat/completions", model.base_url()))
            .json(&body)
            .send()
            .await
            .unwrap();
        let _ = response.bytes().await.unwrap();
        times.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    times.sort_by(f64::total_cmp);
    percentile(&times, 0.5)
}

#[tokio::main]
async fn main() {
    let binary = std::env::var("LLOOMA_BIN").expect("set LLOOMA_BIN to the release binary");
    let bots = env_or("BENCH_BOTS", 200) as usize;
    let window = Duration::from_secs(env_or("BENCH_SECS", 60));
    let questions = env_or("BENCH_QUESTIONS", 40) as usize;

    let chat = FakeChatto::start().await.unwrap();
    let model =
        FakeModel::builder().fallback(Fallback::Echo { chunk_delay_ms: 0 }).start().await.unwrap();
    let data = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut server: Child = Command::new(&binary)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("LLOOMA_LISTEN", format!("127.0.0.1:{port}"))
        .env("LLOOMA_DATA_DIR", data.path())
        .env("LLOOMA_LOG", "warn")
        .env("PROVIDER_ALLOWED_ORIGINS", model.origin())
        .env("BOT_ALLOWED_ORIGINS", chat.origin())
        .arg("serve")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = server.id();
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !http.get(format!("{base}/readyz")).send().await.is_ok_and(|r| r.status() == 200) {
        assert!(Instant::now() < deadline, "the server did not become ready");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut client = Client { http, base, cookie: None, csrf: None };
    let (status, _) = client
        .send(
            reqwest::Method::POST,
            "/api/v1/auth/register",
            Some(json!({"username": "bench", "password": "benchmark password 0123456789"})),
        )
        .await;
    assert_eq!(status, 201);
    let (_, provider) = client
        .send(
            reqwest::Method::POST,
            "/api/v1/admin/providers",
            Some(json!({"name": "fake", "baseUrl": model.base_url()})),
        )
        .await;
    let provider_id = provider["id"].as_str().unwrap().to_owned();

    let ann = chat.add_person("ann", "Ann Lee");
    let mut rooms = Vec::new();
    for i in 0..bots {
        let bot = chat.add_bot(
            &format!("bot{i}"),
            &format!("Bot {i}"),
            BotStyle::IsBotFlag,
            &ALL_BOT_PERMISSIONS,
        );
        let room = chat.add_channel(&format!("room{i}"), &[&bot.id, &ann]);
        let (status, answer) = client
            .send(
                reqwest::Method::POST,
                "/api/v1/bots",
                Some(json!({
                    "address": chat.origin(), "apiKey": bot.key, "providerId": provider_id,
                    "model": "fake-model", "context": {"mode": "calling_message"},
                })),
            )
            .await;
        assert_eq!(status, 201, "{answer}");
        rooms.push((bot.id, room));
    }
    println!("{bots} integrations added; letting every poller start");
    tokio::time::sleep(Duration::from_secs(15)).await;

    // Polling cost.
    let hz = ticks_per_second();
    let lists_before = chat_lists(&chat, &rooms);
    let (ticks_before, started) = (cpu_ticks(pid), Instant::now());
    let mut rss = Vec::new();
    while started.elapsed() < window {
        tokio::time::sleep(Duration::from_secs(5)).await;
        rss.push(resident_mib(pid));
    }
    let elapsed = started.elapsed().as_secs_f64();
    let cpu = (cpu_ticks(pid) - ticks_before) as f64 / hz / elapsed * 100.0;
    let polls = (chat_lists(&chat, &rooms) - lists_before) as f64 / elapsed;
    rss.sort_by(f64::total_cmp);

    // Notification to post.
    let mut asked: Vec<(usize, DateTime<Utc>, String)> = Vec::new();
    for q in 0..questions {
        let i = (q * 7) % bots;
        let (bot, room) = &rooms[i];
        let now = Utc::now();
        let event = chat.post(room, &ann, &format!("@bot{i} question {q}"), now);
        chat.notify(bot, SignalKind::DirectMentionReceived, room, &event, now);
        asked.push((i, now, event));
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    let answered = |calls: &[llooma_chatto_fake::CreateMessageCall], event: &str| {
        calls
            .iter()
            .find(|c| c.in_reply_to.as_deref() == Some(event) && c.refused.is_none())
            .map(|c| c.at)
    };
    loop {
        let calls = chat.create_message_calls();
        if asked.iter().all(|(_, _, e)| answered(&calls, e).is_some()) || Instant::now() > deadline
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let model_ms = model_round_trip_ms(&model).await;
    let calls = chat.create_message_calls();
    let mut total = Vec::new();
    let mut after_pickup = Vec::new();
    for (i, at, event) in &asked {
        let Some(posted) = answered(&calls, event) else { continue };
        total.push(millis(posted - *at));
        let picked = chat.list_times(&rooms[*i].0).into_iter().find(|t| t >= at);
        if let Some(picked) = picked {
            after_pickup.push((millis(posted - picked) - model_ms).max(0.0));
        }
    }
    total.sort_by(f64::total_cmp);
    after_pickup.sort_by(f64::total_cmp);

    let _ = Command::new("kill").args(["-TERM", &pid.to_string()]).status();
    let _ = server.wait();

    println!("bots bench: {bots} integrations, polled every 5 s (release binary, SQLite)");
    println!("  server CPU over {elapsed:.0} s: {cpu:.1}% of one core");
    println!("  notification lists served: {polls:.1}/s (expected {:.1}/s)", bots as f64 / 5.0);
    println!(
        "  resident memory: median {:.1} MiB, max {:.1} MiB",
        percentile(&rss, 0.5),
        rss.last().copied().unwrap_or(f64::NAN)
    );
    println!(
        "  notification -> post ({} of {questions} answered): p50 {:.0} ms, p95 {:.0} ms (includes waiting for the next poll, 0-5 s)",
        total.len(),
        percentile(&total, 0.5),
        percentile(&total, 0.95)
    );
    println!(
        "  picked up -> posted, model time excluded (fake model round trip {model_ms:.1} ms subtracted): p50 {:.1} ms, p95 {:.1} ms",
        percentile(&after_pickup, 0.5),
        percentile(&after_pickup, 0.95)
    );
}

fn chat_lists(chat: &FakeChatto, rooms: &[(String, String)]) -> usize {
    rooms.iter().map(|(bot, _)| chat.list_times(bot).len()).sum()
}
