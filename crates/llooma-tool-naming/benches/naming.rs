//! Naming plus grouping of 10,000 tools across 20 servers, the size of a large gateway fleet.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use llooma_tool_naming::{NameTable, group_tools};

/// 20 servers of 500 tools each: MCPHub-style `<server>-<tool>` names, a tenth of them long,
/// some colliding after sanitising.
fn catalogue() -> Vec<(String, String, Vec<String>)> {
    (0..20)
        .map(|s| {
            let tools = (0..500)
                .map(|t| match t % 10 {
                    0 => format!("Server_{}-{}_{t}", t % 25, "very_long_tool_name_".repeat(4)),
                    1 => format!("Server_{}-tool.{t}", t % 25),
                    2 => format!("Server_{}-tool_{}", t % 25, t - 1),
                    _ => format!("Server_{}-do_thing_{t}", t % 25),
                })
                .collect();
            (format!("srv-{s}"), format!("gateway_{s}"), tools)
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let servers = catalogue();
    c.bench_function("name and group 10k tools / 20 servers", |b| {
        b.iter(|| {
            let table = NameTable::build(
                black_box(&servers)
                    .iter()
                    .map(|(id, slug, tools)| (id.as_str(), slug.as_str(), tools.iter())),
            );
            let groups: usize = servers.iter().map(|(_, _, tools)| group_tools(tools).len()).sum();
            black_box((table.map(|t| t.len()), groups))
        });
    });
}

fn parts(c: &mut Criterion) {
    let servers = catalogue();
    c.bench_function("name only 10k", |b| {
        b.iter(|| {
            NameTable::build(
                black_box(&servers)
                    .iter()
                    .map(|(id, slug, tools)| (id.as_str(), slug.as_str(), tools.iter())),
            )
            .map(|t| t.len())
        });
    });
    c.bench_function("group only 10k", |b| {
        b.iter(|| {
            black_box(&servers).iter().map(|(_, _, tools)| group_tools(tools).len()).sum::<usize>()
        });
    });
}

criterion_group!(benches, bench, parts);
criterion_main!(benches);
