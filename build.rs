//! Gives the shared library its SONAME, and (feature `header`, on in the project's own builds)
//! regenerates `include/zklock.h` from `src/ffi` with cbindgen (`src/ffi/header.rs`).

use std::env;

fn main() {
    // cbindgen reads the whole crate (its `mod` lines too), not only src/ffi.
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=build.rs");
    // The SONAME changes with every ABI break: with the major version, or while it is 0 with the
    // minor one (libzklock.so.0.3), derived from Cargo.toml's version as cargo-c derives it
    // (scripts/install.sh installs that layout). Under every feature set: the C library of
    // scripts/install.sh and the Python package is built with `capi`, and `cargo cinstall`
    // passes the same name (the linker keeps the last -soname; both are this one).
    if env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        let major = env::var("CARGO_PKG_VERSION_MAJOR").unwrap();
        let sover = match major.as_str() {
            "0" => format!("0.{}", env::var("CARGO_PKG_VERSION_MINOR").unwrap()),
            _ => major,
        };
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libzklock.so.{sover}");
    }

    #[cfg(feature = "header")]
    write_header(&std::path::PathBuf::from(
        env::var("CARGO_MANIFEST_DIR").unwrap(),
    ));
}

#[cfg(feature = "header")]
#[path = "src/ffi/header.rs"]
mod header;

/// Regenerates `include/zklock.h`, writing it only when it changed.
#[cfg(feature = "header")]
fn write_header(dir: &std::path::Path) {
    let var = |k: &str| env::var(k).unwrap();
    let version = (
        &*var("CARGO_PKG_VERSION_MAJOR"),
        &*var("CARGO_PKG_VERSION_MINOR"),
        &*var("CARGO_PKG_VERSION_PATCH"),
        &*var("CARGO_PKG_VERSION"),
    );
    match header::generate(dir, version) {
        Ok(Some(text)) => {
            let path = dir.join("include/zklock.h");
            if std::fs::read(&path).ok().as_deref() != Some(&text[..]) {
                std::fs::write(&path, text).expect("write include/zklock.h");
            }
        }
        // Let rustc report the real syntax error.
        Ok(None) => {
            println!("cargo:warning=cbindgen could not parse the crate; header not regenerated")
        }
        Err(e) => panic!("{e}"),
    }
}
