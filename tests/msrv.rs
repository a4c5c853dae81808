//! The minimum supported Rust version, as far as it can be checked without
//! an older toolchain (none can be installed here: only the registries are
//! reachable). `Cargo.toml`'s `rust-version` must be at least the
//! `rust-version` every crate in the build declares, for the committed
//! lock file and each feature set; the `kerberos` feature's build needs more
//! (bindgen's), which the README states. zklock's own use of std is checked
//! against `rust-version` by clippy's `incompatible_msrv` (`make clippy`).

use std::collections::{HashMap, HashSet};
use std::process::Command;

/// The `kerberos` feature's floor (bindgen 0.71's `rustc-hash` 2), as the
/// README says.
const KERBEROS_MSRV: &str = "1.77";

fn version(v: &str) -> Vec<u32> {
    v.split('.').map(|p| p.parse().unwrap_or(0)).collect()
}

/// The highest `rust-version` among the crates `zklock` builds with
/// `features` (normal and build dependencies, no dev ones), and its crate.
fn highest(features: &str) -> (String, String) {
    let mut cmd = Command::new(env!("CARGO"));
    cmd.args(["metadata", "--format-version", "1", "--offline", "--locked"])
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    if !features.is_empty() {
        cmd.args(["--features", features]);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let m: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let packages: HashMap<&str, &serde_json::Value> = m["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["id"].as_str().unwrap(), p))
        .collect();
    let nodes: HashMap<&str, &serde_json::Value> = m["resolve"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| (n["id"].as_str().unwrap(), n))
        .collect();
    let root = m["resolve"]["root"].as_str().unwrap();
    let (mut seen, mut todo) = (HashSet::new(), vec![root]);
    while let Some(id) = todo.pop() {
        if !seen.insert(id) {
            continue;
        }
        for dep in nodes[id]["deps"].as_array().unwrap() {
            let kinds = dep["dep_kinds"].as_array().unwrap();
            if kinds
                .iter()
                .any(|k| k["kind"].is_null() || k["kind"] == "build")
            {
                todo.push(dep["pkg"].as_str().unwrap());
            }
        }
    }
    seen.iter()
        .map(|id| {
            let p = packages[id];
            let rv = p["rust_version"].as_str().unwrap_or("0").to_string();
            (
                rv,
                format!("{} {}", p["name"].as_str().unwrap(), p["version"]),
            )
        })
        .max_by_key(|(rv, _)| version(rv))
        .unwrap()
}

#[test]
fn every_crate_of_the_build_supports_the_declared_rust_version() {
    let declared = env!("CARGO_PKG_RUST_VERSION");
    assert!(!declared.is_empty(), "Cargo.toml declares no rust-version");
    for features in [
        "",
        "tls",
        "metrics",
        "cli",
        "testing",
        "tls,metrics,cli,testing",
    ] {
        let (rv, krate) = highest(features);
        assert!(
            version(&rv) <= version(declared),
            "features [{features}]: {krate} needs Rust {rv}, above rust-version {declared}"
        );
    }
    let (rv, krate) = highest("kerberos");
    assert!(
        version(&rv) <= version(KERBEROS_MSRV),
        "feature kerberos: {krate} needs Rust {rv}, above the README's {KERBEROS_MSRV}"
    );
}
