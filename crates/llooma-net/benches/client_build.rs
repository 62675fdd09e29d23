//! What building one [`NetClient`] costs. Every turn builds at least one (its provider's), so
//! this is paid per turn unless clients are reused; the part worth watching is the TLS setup
//! (the system's root certificates), which should be paid once per process, not per build.
//!
//! Prints the first build on its own (it may pay for process-wide setup) and the mean of the
//! next 200. A plain `harness = false` main: run with
//! `cargo bench -p llooma-net --bench client_build`.

#![expect(clippy::print_stdout, reason = "a benchmark reports on stdout")]

use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

use llooma_net::{NetClient, OutboundPolicy, Purpose};

const BUILDS: u32 = 200;

fn main() {
    let policy = Arc::new(OutboundPolicy::public_only());
    let build = || NetClient::builder(Arc::clone(&policy), Purpose::Provider).build();

    let started = Instant::now();
    let first = build();
    let first_took = started.elapsed();
    if let Err(err) = first {
        println!("building a client failed: {err}");
        return;
    }

    let started = Instant::now();
    for _ in 0..BUILDS {
        if let Err(err) = black_box(build()) {
            println!("building a client failed: {err}");
            return;
        }
    }
    let mean = started.elapsed() / BUILDS;
    println!("NetClient::build: first {first_took:?}, mean of the next {BUILDS}: {mean:?}");
}
