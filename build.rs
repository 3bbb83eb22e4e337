//! Generates `include/zklock.h` from `src/ffi` with cbindgen (rewritten only when it changed),
//! and gives the shared library its SONAME.

use std::env;
use std::path::PathBuf;

fn main() {
    let dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    println!("cargo:rerun-if-changed=src/ffi");
    println!("cargo:rerun-if-changed=cbindgen.toml");
    println!("cargo:rerun-if-changed=build.rs");
    // The SONAME changes with every ABI break: with the major version, or while it is 0 with the
    // minor one (libzklock.so.0.2), as cargo-c (`cargo cinstall`, feature `capi`) names it too;
    // under cargo-c it sets the SONAME itself.
    if env::var_os("CARGO_FEATURE_CAPI").is_none() {
        let major = env::var("CARGO_PKG_VERSION_MAJOR").unwrap();
        let sover = match major.as_str() {
            "0" => format!("0.{}", env::var("CARGO_PKG_VERSION_MINOR").unwrap()),
            _ => major,
        };
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libzklock.so.{sover}");
    }

    let version = format!(
        "#define ZKL_VERSION_MAJOR {}\n#define ZKL_VERSION_MINOR {}\n#define ZKL_VERSION_PATCH {}\n#define ZKL_VERSION_STRING \"{}\"",
        env::var("CARGO_PKG_VERSION_MAJOR").unwrap(),
        env::var("CARGO_PKG_VERSION_MINOR").unwrap(),
        env::var("CARGO_PKG_VERSION_PATCH").unwrap(),
        env::var("CARGO_PKG_VERSION").unwrap(),
    );
    let config =
        cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("read cbindgen.toml");
    match cbindgen::Builder::new()
        .with_crate(&dir)
        .with_config(config)
        .with_after_include(version)
        .generate()
    {
        Ok(bindings) => {
            bindings.write_to_file(dir.join("include/zklock.h"));
        }
        Err(cbindgen::Error::ParseSyntaxError { .. }) => {
            // Let rustc report the real syntax error.
            println!("cargo:warning=cbindgen could not parse the crate; header not regenerated");
        }
        Err(e) => panic!("cbindgen failed: {e}"),
    }
}
