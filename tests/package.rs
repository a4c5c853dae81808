//! What a user of the crate gets, checked from Cargo's own resolution of the
//! committed lock file (`cargo metadata`, offline).
//!
//! `cargo install zklock --features cli` installs exactly the `zklock`
//! binary, built without the test harness (the `testing` feature: fault
//! proxy, ensembles, chaos, step hooks).
//!
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
    let m = metadata(features);
    highest_in(&m)
}

/// `cargo metadata` of zklock with `features`, offline, from the lock file.
fn metadata(features: &str) -> serde_json::Value {
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
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The highest `rust-version` in `m`'s build of zklock (see [`highest`]).
fn highest_in(m: &serde_json::Value) -> (String, String) {
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

/// What `cargo install --features <features>` builds: the package's
/// binaries whose required features are on, and the features on, expanded
/// through the package's `[features]` table as Cargo does for an install
/// (no dev-dependencies: `cargo metadata`'s resolution unifies the tests'
/// self-dependency with the `testing` feature, an install does not).
fn installed(features: &str) -> (Vec<String>, Vec<String>) {
    let m = metadata("");
    let root = m["resolve"]["root"].as_str().unwrap();
    let package = m["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"] == root)
        .unwrap();
    let table = package["features"].as_object().unwrap();
    let mut on: Vec<String> = Vec::new();
    let mut todo: Vec<String> = features.split(',').map(str::to_string).collect();
    while let Some(f) = todo.pop() {
        if f.starts_with("dep:") || on.contains(&f) {
            continue;
        }
        if let Some(implied) = table.get(&f).and_then(|v| v.as_array()) {
            todo.extend(implied.iter().map(|i| i.as_str().unwrap().to_string()));
        }
        on.push(f);
    }
    let bins = package["targets"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["kind"].as_array().unwrap().iter().any(|k| k == "bin"))
        .filter(|t| {
            t["required-features"]
                .as_array()
                .map_or(true, |r| r.iter().all(|f| on.iter().any(|o| f == o)))
        })
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    (bins, on)
}

#[test]
fn installing_the_command_gives_one_binary_without_the_test_harness() {
    let (bins, features) = installed("cli");
    assert_eq!(
        bins,
        ["zklock"],
        "cargo install --features cli would install {bins:?}"
    );
    assert!(
        !features.iter().any(|f| f == "testing"),
        "the command is built with the test harness: {features:?}"
    );
    assert!(features.iter().any(|f| f == "server"), "{features:?}");
    // The harness, for zklock's own tests, brings its chaos worker.
    let (bins, _) = installed("testing");
    assert!(bins.iter().any(|b| b == "zklock-chaos-worker"), "{bins:?}");
}

/// The links of what registries render (the README on crates.io, the crate
/// docs on docs.rs) work there: none is relative (crates.io resolves those
/// only against a `repository`, which zklock has not), and each link to a
/// packaged file (`https://docs.rs/crate/zklock/latest/source/...`) names a
/// file `cargo package` ships.
#[test]
fn rendered_links_are_absolute_and_name_packaged_files() {
    const SOURCE: &str = "https://docs.rs/crate/zklock/latest/source/";
    let out = Command::new(env!("CARGO"))
        .args(["package", "--list", "--allow-dirty", "--offline"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cargo package --list: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let packaged: HashSet<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    let dir = env!("CARGO_MANIFEST_DIR");
    let readme = std::fs::read_to_string(format!("{dir}/README.md")).unwrap();
    let lib = std::fs::read_to_string(format!("{dir}/src/lib.rs")).unwrap();
    let crate_docs: String = lib
        .lines()
        .filter_map(|l| l.strip_prefix("//!"))
        .collect::<Vec<_>>()
        .join("\n");
    let mut checked = 0;
    for (name, text) in [("README.md", &readme), ("the crate docs", &crate_docs)] {
        // Inline targets `](target)` and reference definitions `[label]: target`.
        let inline = text.split("](").skip(1).filter_map(|t| t.split(')').next());
        let defined = text
            .lines()
            .filter(|l| l.trim_start().starts_with('['))
            .filter_map(|l| l.split_once("]: ").map(|(_, t)| t.trim()));
        for target in inline.chain(defined) {
            if target.starts_with('#') || target.contains(' ') {
                continue; // an anchor, or prose that holds "](": not a link
            }
            let rust_path = !target.contains('/') && !target.contains(".md");
            if name != "README.md" && rust_path {
                continue; // an intra-doc link (`Error::code`), resolved by rustdoc
            }
            assert!(
                target.starts_with("https://") || target.starts_with("http://"),
                "{name} links to {target:?}: relative links break on crates.io"
            );
            if let Some(file) = target.strip_prefix(SOURCE) {
                let file = file.split('#').next().unwrap_or(file);
                assert!(
                    packaged.contains(file),
                    "{name} links to {file}, which the package does not ship"
                );
                checked += 1;
            }
        }
    }
    assert!(checked >= 20, "only {checked} links to packaged files");
}
