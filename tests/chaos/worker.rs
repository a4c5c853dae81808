//! `zklock-chaos-worker`: one worker process of the chaos suite (`tests/chaos.rs`,
//! `make chaos`). Everything is in the harness's `worker_main`
//! (`tests/chaos/harness/`, test code shared with `tests/chaos.rs`); the
//! controlling test finds this binary through `CARGO_BIN_EXE_zklock-chaos-worker`
//! (built by Cargo for integration tests; needs the `testing` feature).

#[path = "harness/mod.rs"]
mod harness;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    std::process::exit(harness::worker_main(&args));
}
