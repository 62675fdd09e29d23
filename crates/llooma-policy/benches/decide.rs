//! How long one policy decision takes. The goal is well under a microsecond per call, so the
//! check can sit in front of every connection and every redirect hop without being noticed.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use llooma_policy::{OutboundPolicy, Purpose, Url};

fn decide(c: &mut Criterion) {
    let public_only = OutboundPolicy::public_only();
    let listed = OutboundPolicy::from_allow_lists(
        Some("http://127.0.0.1:8080, https://gateway.internal, http://[::1]:9000"),
        None,
        None,
    )
    .unwrap_or_default();

    let blocked = "http://169.254.169.254/latest/meta-data/";
    let public = "https://8.8.8.8/dns-query";

    let mut group = c.benchmark_group("decide");
    // What a caller holding a string pays: parse + decide.
    group.bench_function("parse_and_decide/ip_literal_blocked", |b| {
        b.iter(|| public_only.decide_str(Purpose::Fetch, black_box(blocked)))
    });
    group.bench_function("parse_and_decide/ip_literal_public", |b| {
        b.iter(|| public_only.decide_str(Purpose::Fetch, black_box(public)))
    });
    // What the connector and the redirect policy pay: the URL is already parsed.
    if let (Ok(blocked_url), Ok(public_url), Ok(listed_url)) =
        (Url::parse(blocked), Url::parse(public), Url::parse("http://127.0.0.1:8080/mcp"))
    {
        group.bench_function("decide/ip_literal_blocked", |b| {
            b.iter(|| public_only.decide(Purpose::Fetch, black_box(&blocked_url)))
        });
        group.bench_function("decide/ip_literal_public", |b| {
            b.iter(|| public_only.decide(Purpose::Fetch, black_box(&public_url)))
        });
        group.bench_function("decide/ip_literal_allow_listed", |b| {
            b.iter(|| listed.decide(Purpose::Mcp, black_box(&listed_url)))
        });
    }
    group.finish();
}

criterion_group!(benches, decide);
criterion_main!(benches);
