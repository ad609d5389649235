//! Tool identity: which toolchain an action or a snapshot was built with, below both
//! `crate::action` (the compiler-environment component of an action key) and
//! `crate::snapshot` (the toolchain part of a snapshot key), so neither imports the other.
//!
//! * [`version`]: finding a tool like `which` (looking through compiler wrappers such as a
//!   ccache masquerade directory), its `--version` identity and the stamp memo that lets a
//!   HIT skip the spawn; [`looks_like_compiler`] for the driver names.
//!
//! * [`content`]: identity by content (the driver's and its back ends' bytes),
//!   for toolchains whose `--version` cannot be trusted to tell them apart.

pub mod content;
pub mod version;

pub use content::{TOOL_CONTENT_MEMO_SCHEMA, tool_content};

use std::path::PathBuf;

pub use version::{
    TOOL_MEMO_SCHEMA, VERSION_TIMEOUT, is_compiler_wrapper, looks_like_compiler, memoised,
    resolve_tool, tool_version,
};

/// A failure to identify a tool. Variants name the tool's canonical path.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A filesystem operation failed (`stat` of the tool).
    #[error(transparent)]
    Fs(#[from] crate::fs::Error),
    /// A tool's `--version` failed.
    #[error("cannot read the version of {}: {reason}", tool.display())]
    ToolVersion {
        /// The canonical tool path.
        tool: PathBuf,
        /// What went wrong.
        reason: String,
    },
}
