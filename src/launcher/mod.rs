//! The compiler launcher (issue 10): `strata <compiler> ARGS...` as
//! `CMAKE_<LANG>_COMPILER_LAUNCHER`, caching each C/C++ compilation in the L1 cache.
//!
//! Work in progress; nothing calls it yet. What exists:
//!
//! * [`args`]: the classification of a compiler command line into one cacheable
//!   compilation (source, object, depfile, side outputs, include directories) or a reason
//!   to run the compiler unchanged;
//! * [`depfile`]: reading and writing the dependency files compilers write;
//! * [`shadow`]: the header-shadowing probes a direct-mode lookup checks.
//!
//! Next: the key (toolchain identity, relocated arguments, source digest), the entry with
//! its header manifest, lookup and save, and the `strata <compiler> …` entry point.

pub mod args;
pub mod depfile;
pub mod shadow;
