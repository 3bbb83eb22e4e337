//! The C header `include/zklock.h`, generated from `src/ffi` by cbindgen: `build.rs` writes it
//! when the `header` feature is on (the project's own builds: `scripts/test.sh`), and
//! `tests/ffi_symbols.rs` checks that the committed header is what this gives. A crate that
//! depends on zklock builds without cbindgen.

use std::path::Path;

/// The header's text for the crate at `dir` whose version is `major.minor.patch` (`full`);
/// `Ok(None)` if cbindgen cannot parse the crate (rustc then reports the real error).
pub fn generate(
    dir: &Path,
    (major, minor, patch, full): (&str, &str, &str, &str),
) -> Result<Option<Vec<u8>>, String> {
    let version = format!(
        "#define ZKL_VERSION_MAJOR {major}\n#define ZKL_VERSION_MINOR {minor}\n#define ZKL_VERSION_PATCH {patch}\n#define ZKL_VERSION_STRING \"{full}\""
    );
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml"))
        .map_err(|e| format!("read cbindgen.toml: {e}"))?;
    match cbindgen::Builder::new()
        .with_crate(dir)
        .with_config(config)
        .with_after_include(version)
        .generate()
    {
        Ok(bindings) => {
            let mut out = Vec::new();
            bindings.write(&mut out);
            Ok(Some(out))
        }
        Err(cbindgen::Error::ParseSyntaxError { .. }) => Ok(None),
        Err(e) => Err(format!("cbindgen failed: {e}")),
    }
}
