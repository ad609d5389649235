//! The compiler launcher (issue 10): `strata <compiler> ARGS...` as
//! `CMAKE_<LANG>_COMPILER_LAUNCHER`, caching each C/C++ compilation in the L1 cache.
//!
//! Work in progress. What exists: [`args`], the classification of a compiler command line
//! into one cacheable compilation (source, object, depfile, side outputs, include
//! directories) or a reason to run the compiler unchanged; [`depfile`], reading and writing
//! the dependency files compilers write; [`shadow`], the header-shadowing probes. The lookup, the direct-mode
//! header manifest with its shadowing check, and the command-line entry point come next.

pub mod args;
pub mod depfile;
pub mod shadow;
