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
            // The features this test was built with (cargo gives a package's tests its
            // features), so that after the build of the test run this is a no-op: with others
            // it would rebuild the library, and the next build of the run would again.
            let features: Vec<&str> = [
                ("testing", cfg!(feature = "testing")),
                ("cli", cfg!(feature = "cli")),
                ("header", cfg!(feature = "header")),
            ]
            .into_iter()
            .filter_map(|(name, on)| on.then_some(name))
            .collect();
            cmd.current_dir(repo())
                // `--tests`: the dependencies' features as the test run unified them (a
                // dev-dependency turns some on); the library alone resolves them apart, and
                // rebuilt itself here and again at the run's next build.
                .args(["build", "--lib", "--tests", "--quiet", "--features"])
                .arg(features.join(","))
                .arg("--target-dir")
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
