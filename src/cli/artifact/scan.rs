//! `strata artifact scan-includes`: the closure of local quoted includes
//! ([`include::scan`]), optionally packaged ([`include::package`]).

use std::path::{Path, PathBuf};

use serde_json::json;

use super::{print, shown};
use crate::cli::Failure;
use crate::cli::exit;
use strata::artifact::include;

/// Exit 0 complete, 6 unsupported input, 1 I/O error or malformed input.
pub(super) fn scan_includes(
    sources: &[PathBuf],
    include_dirs: &[PathBuf],
    package: Option<&Path>,
    json: bool,
) -> Result<i32, Failure> {
    let closure = match include::scan(sources, include_dirs).map_err(Failure::of)? {
        include::Verdict::Closure(closure) => closure,
        include::Verdict::Unsupported(u) => {
            let value = json!({"verdict": "unsupported", "file": shown(&u.file), "line": u.line, "reason": u.reason});
            let text = format!("strata: unsupported {}:{}: {}", u.file.display(), u.line, u.reason);
            print(json, &value, &text)?;
            return Ok(exit::UNSUPPORTED);
        }
    };
    if let Some(dest) = package {
        include::package(&closure, dest).map_err(Failure::of)?;
    }
    let value = json!({
        "verdict": "complete",
        "common_root": shown(&closure.common_root),
        "files": closure.files.iter().map(|f| shown(f)).collect::<Vec<_>>(),
        "relative_files": closure.relative_files,
        "include_dirs": closure.relative_include_dirs,
        "system_includes": closure.system_includes,
        "package": package.map(shown),
    });
    let mut text = String::new();
    for f in &closure.files {
        text.push_str(&format!("{}\n", f.display()));
    }
    for s in &closure.system_includes {
        text.push_str(&format!("system <{}> ({}:{})\n", s.name, s.file.display(), s.line));
    }
    text.push_str(&format!("strata: complete, {} file(s)", closure.files.len()));
    print(json, &value, &text)?;
    Ok(0)
}
