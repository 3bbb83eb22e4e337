//! The C API. See `include/zklock.h`.
