//! `zklock-chaos-worker`: one worker process of the chaos suite (`tests/chaos.rs`,
//! `make chaos`). Everything is in [`zklock::testing::chaos::worker_main`]; the
//! controlling test finds this binary through `CARGO_BIN_EXE_zklock-chaos-worker`
//! (built by Cargo for integration tests; needs the `testing` feature).

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    std::process::exit(zklock::testing::chaos::worker_main(&args));
}
