//! Helpers of the FFI tests: where the built library is, and a fresh build of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The crate's root directory.
pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `target/<profile>` of this test run: the test executable is `target/<profile>/deps/<name>`.
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let deps = exe.parent().expect("deps dir");
    deps.parent().expect("profile dir").to_path_buf()
}

/// Builds the library (cdylib + staticlib) of this profile, once per test process, and
/// returns `target/<profile>/libzklock.so`. `cargo test` alone does not refresh the cdylib.
pub fn cdylib() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let dir = profile_dir();
            let target_dir = dir.parent().expect("target dir");
            let mut cmd = Command::new(env!("CARGO"));
            // The features of this test run (the FFI tests need `testing`), so that after
            // `cargo build --features testing` this is a no-op.
            cmd.current_dir(repo())
                .args([
                    "build",
                    "--lib",
                    "--quiet",
                    "--features",
                    "testing",
                    "--target-dir",
                ])
                .arg(target_dir);
            if dir.file_name().is_some_and(|n| n == "release") {
                cmd.arg("--release");
            }
            let st = cmd.status().expect("run cargo build --lib");
            assert!(st.success(), "cargo build --lib failed");
            let so = dir.join("libzklock.so");
            assert!(so.exists(), "{} not built", so.display());
            so
        })
        .clone()
}

/// Whether `prog` can be run (found on PATH and answers `--version`).
pub fn have(prog: &str) -> bool {
    Command::new(prog)
        .arg("--version")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}
