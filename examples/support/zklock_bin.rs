//! The `zklock` binary the examples drive: `$ZKLOCK_BIN`, else the one built
//! beside the example (`target/<profile>/zklock`).

use std::path::PathBuf;

use anyhow::{ensure, Context};

/// The binary's path; an error says how to build it.
pub(crate) fn zklock_bin() -> anyhow::Result<PathBuf> {
    let bin = match std::env::var_os("ZKLOCK_BIN") {
        Some(b) => PathBuf::from(b),
        None => std::env::current_exe()?
            .parent()
            .and_then(|examples| examples.parent())
            .context("where is the zklock binary?")?
            .join("zklock"),
    };
    ensure!(
        bin.exists(),
        "{} is missing: build it with `cargo build --release --features cli` (make demo does)",
        bin.display()
    );
    Ok(bin)
}
