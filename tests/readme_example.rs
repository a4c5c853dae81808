//! The README's example as a stranger uses it: its Rust block under "Use it"
//! pasted into a new crate (`cargo new`'s layout, zklock as a path
//! dependency, nothing else), built offline (the registry's crates are cached
//! by the build of this test) and run against a throwaway server through
//! `ZK_SERVERS`. It must print its fencing token and leave nothing behind.

mod common;

use std::fs;
use std::path::Path;
use std::process::Command;

use zklock::testing::{shared_server, ScratchDir};

/// The first Rust code block after the heading "## Use it".
fn readme_example(readme: &str) -> &str {
    let section = &readme[readme
        .find("## Use it")
        .expect("the README's \"Use it\" section")..];
    let start = section
        .find("```rust")
        .expect("a Rust block under \"Use it\"");
    let code = &section[start..];
    let code = &code[code.find('\n').unwrap() + 1..];
    &code[..code.find("```").expect("the block's end")]
}

#[test]
fn the_readme_example_builds_in_a_new_crate_and_runs_against_zk_servers() {
    common::init_log();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = fs::read_to_string(root.join("README.md")).unwrap();
    let code = readme_example(&readme);
    assert!(
        !code.contains("zklock::testing"),
        "the README's example needs the test harness"
    );

    let app = ScratchDir::new("readme-app").unwrap();
    fs::create_dir_all(app.join("src")).unwrap();
    fs::write(
        app.join("Cargo.toml"),
        format!(
            "[package]\nname = \"readme-app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
             [dependencies]\nzklock = {{ path = {:?} }}\n",
            root.display().to_string()
        ),
    )
    .unwrap();
    fs::write(app.join("src/main.rs"), code).unwrap();
    // Its own target directory, kept between runs (the dependencies build
    // once), outside the outer build's lock.
    let target = root.join("target").join("readme-example");
    let built = Command::new(env!("CARGO"))
        .args(["build", "--quiet", "--offline", "--manifest-path"])
        .arg(app.join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", &target)
        .env_remove("RUSTFLAGS")
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "the README's example does not build in a new crate:\n{}",
        String::from_utf8_lossy(&built.stderr)
    );

    let servers = shared_server().connect_string();
    let out = Command::new(target.join("debug").join("readme-app"))
        .env("ZK_SERVERS", &servers)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("held /locks/orders with fencing token"),
        "the README's example failed against {servers}: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let zk = common::raw();
    assert!(
        common::children(&zk, "/locks/orders").is_empty(),
        "the example left its lock node"
    );
}
