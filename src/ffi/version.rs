//! `zkl_version`.

use std::ffi::c_char;

const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), "\0");

/// The library's version, Cargo.toml's, e.g. "0.3.0" (the header's ZKL_VERSION_STRING is the
/// version it was generated for; the SONAME carries its ABI part, libzklock.so.0.3). Never NULL;
/// static, owned by the library (never free it). Any thread.
///
/// ```c
/// if (strcmp(zkl_version(), ZKL_VERSION_STRING) != 0)
///     fprintf(stderr, "built against zklock %s, running %s\n", ZKL_VERSION_STRING, zkl_version());
/// ```
#[no_mangle]
pub extern "C" fn zkl_version() -> *const c_char {
    ffi_boundary!(value { VERSION.as_ptr().cast() })
}
