//! [`ScratchDir`]: the one way tests, examples and benches make a temporary
//! directory, and [`remove_at_exit`]: the one way a directory that must outlive
//! every handle (a `static`'s) is removed when the process ends.

use std::fs;
use std::io::{self, Write};
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, Command, Stdio};
use std::sync::Mutex;
use std::thread;

use super::process::make_temp_dir;

/// A fresh, empty directory under [`std::env::temp_dir`], removed with its contents
/// when dropped.
///
/// - Its name is `zklock-<prefix>-<pid>-<n>`, `n` counting up in the process, so two
///   scratch directories never collide, in one process or across processes.
/// - [`Drop`] removes it (errors ignored: a test's `Drop` never panics; removing a
///   small local directory does not block for long) — unless the thread is
///   panicking (a failing test): then the directory is kept and its path printed,
///   the convention of [`ZkServer`](super::ZkServer) and
///   [`ZkEnsemble`](super::ZkEnsemble) for their directories.
/// - [`keep`](ScratchDir::keep) keeps it for good (debugging);
///   [`until_exit`](ScratchDir::until_exit) hands it to a process-wide owner (a
///   `static`, which Rust never drops) and has it removed when the process ends, in
///   any way.
/// - It dereferences to its [`Path`], so `dir.join("file")`, `&*dir` and
///   `dir.display()` work.
///
/// # Examples
///
/// ```no_run
/// use zklock::testing::ScratchDir;
///
/// let dir = ScratchDir::new("example")?;
/// std::fs::write(dir.join("flag"), "x")?;
/// let path = dir.path().to_path_buf();
/// drop(dir);
/// assert!(!path.exists());
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct ScratchDir {
    /// Empty once kept or handed on: nothing to remove.
    path: PathBuf,
}

impl ScratchDir {
    /// Creates `zklock-<prefix>-<pid>-<n>` under [`std::env::temp_dir`]
    /// (`$TMPDIR`, else `/tmp`).
    ///
    /// # Errors
    ///
    /// The directory cannot be created (the error names it).
    pub fn new(prefix: &str) -> io::Result<ScratchDir> {
        Ok(ScratchDir {
            path: make_temp_dir(prefix)?,
        })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Keeps the directory and its contents (they are no longer removed) and returns
    /// its path.
    pub fn keep(mut self) -> PathBuf {
        std::mem::take(&mut self.path)
    }

    /// For a directory shared by a whole process (held in a `static`, which is
    /// never dropped, e.g. the classes a test binary compiles once): it is removed
    /// when the process ends, in any way (see [`remove_at_exit`]), and not before.
    /// Returns its path.
    ///
    /// # Errors
    ///
    /// The process-exit cleaner cannot be started (`sh` is missing); the directory
    /// is then removed at once.
    pub fn until_exit(mut self) -> io::Result<PathBuf> {
        remove_at_exit(&self.path)?;
        Ok(std::mem::take(&mut self.path))
    }
}

impl Deref for ScratchDir {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.path
    }
}

impl AsRef<Path> for ScratchDir {
    fn as_ref(&self) -> &Path {
        &self.path
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        if self.path.as_os_str().is_empty() {
            return;
        }
        if thread::panicking() {
            eprintln!(
                "zklock::testing: kept the scratch directory for the failed test: {}",
                self.path.display()
            );
        } else {
            let _ = fs::remove_dir_all(&self.path);
        }
    }
}

/// The process-exit cleaner: one `sh` per process, fed one path per line on a pipe
/// from this process. When the pipe closes — the process exited, panicked, aborted
/// or was killed: the kernel closes it in every case — it removes every path it
/// was given. The watchdog of the harness's JVMs works the same way; no signal
/// handler or `unsafe` code is involved.
const CLEANER: &str = r#"
set --
while IFS= read -r p; do set -- "$@" "$p"; done
if [ "$#" -gt 0 ]; then rm -rf -- "$@"; fi
"#;

/// Has `path` (a file or directory, with its contents) removed when this process
/// ends, however it ends. For what a `static` owns: Rust never drops a `static`.
/// Removing it earlier (a `Drop`) is harmless.
///
/// # Errors
///
/// `sh` cannot be started, or the cleaner is gone.
pub fn remove_at_exit(path: &Path) -> io::Result<()> {
    static CLEANER_STDIN: Mutex<Option<ChildStdin>> = Mutex::new(None);
    let mut guard = CLEANER_STDIN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if guard.is_none() {
        // Never waited for: it outlives the process on purpose (init reaps it).
        let mut child = Command::new("sh")
            .args(["-c", CLEANER])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| io::Error::new(e.kind(), format!("cannot start sh: {e}")))?;
        *guard = child.stdin.take();
    }
    let stdin = guard.as_mut().expect("set above");
    let line = path.to_string_lossy();
    if line.contains('\n') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("a path with a newline: {line:?}"),
        ));
    }
    writeln!(stdin, "{line}")?;
    stdin.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scratch_dir_is_unique_and_gone_after_drop() {
        let a = ScratchDir::new("scratch-unit").unwrap();
        let b = ScratchDir::new("scratch-unit").unwrap();
        assert_ne!(a.path(), b.path());
        let name = a.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            name.starts_with(&format!("zklock-scratch-unit-{}-", std::process::id())),
            "{name}"
        );
        fs::create_dir(a.join("sub")).unwrap();
        fs::write(a.join("sub/file"), "x").unwrap();
        let (pa, pb) = (a.to_path_buf(), b.to_path_buf());
        drop(a);
        drop(b);
        assert!(!pa.exists(), "{pa:?} left behind");
        assert!(!pb.exists(), "{pb:?} left behind");
    }

    #[test]
    fn keep_keeps_the_directory() {
        let dir = ScratchDir::new("scratch-keep").unwrap();
        let path = dir.keep();
        assert!(path.is_dir());
        fs::remove_dir_all(&path).unwrap();
    }
}
