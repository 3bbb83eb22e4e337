//! Generates `include/zklock.h` from `src/ffi` with cbindgen (rewritten only when it changed),
//! and gives the shared library its SONAME.

use std::env;
use std::path::PathBuf;

fn main() {
    let dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    println!("cargo:rerun-if-changed=src/ffi");
    println!("cargo:rerun-if-changed=cbindgen.toml");
    println!("cargo:rerun-if-changed=build.rs");
    // cargo-c (`cargo cinstall`, feature `capi`) gives the library its own SONAME.
    if env::var_os("CARGO_FEATURE_CAPI").is_none() {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libzklock.so.0");
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
