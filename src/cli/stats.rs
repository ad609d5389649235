//! `strata stats`: what an L1 cache root holds, and the hit and miss counters per domain.

use std::path::PathBuf;

use super::Failure;
use super::output::{errln, outln};

/// `--cache-root`, else a non-empty `STRATA_CACHE_ROOT`, else the default cache root
/// (`strata::config::default_cache_root`).
pub(crate) fn cache_root_or_default(flag: Option<PathBuf>) -> Result<PathBuf, Failure> {
    strata::config::cache_root_or_default(flag.as_deref())
        .map_err(|e| Failure { code: super::exit::USAGE, error: e.into() })
}

pub(crate) fn stats(root: Option<PathBuf>, json: bool, zero: bool) -> Result<i32, Failure> {
    let root = cache_root_or_default(root)?;
    let s = strata::l1::stats::stats(&root, &strata::launcher::report::Format);
    let cache = strata::l1::layout::CacheRoot::new(&root)?;
    if zero {
        strata::l1::counters::zero(&cache)?;
        outln!("strata: hit and miss counters zeroed in {}", cache.path().display())?;
        return Ok(0);
    }
    if json {
        outln!("{}", serde_json::to_string_pretty(&s)?)?;
        return Ok(0);
    }
    let compile = &s.compile;
    outln!("cache root: {}", s.cache_root.display())?;
    for (name, d) in [("third_party", &s.third_party), ("custom_operator", &s.custom_operator)] {
        let bypasses =
            if d.bypasses > 0 { format!(", {} bypasses", d.bypasses) } else { "".into() };
        let (entries, bytes, rate) = (d.entries, d.artifact_bytes, d.rate.describe());
        outln!("{name}: {entries} entries, {bytes} artifact bytes; {rate}{bypasses}")?;
        if !d.remote.is_empty() {
            outln!("  {}", d.remote.describe())?;
        }
    }
    outln!(
        "compile: {} entries, {} candidates, {} object bytes; {}",
        compile.entries,
        compile.candidates,
        compile.object_bytes,
        compile.rate.describe()
    )?;
    if !compile.remote.is_empty() {
        outln!("  {}", compile.remote.describe())?;
    }
    if !compile.observed.is_empty() {
        let n = |k: &str| compile.observed.get(k).copied().unwrap_or(0);
        outln!(
            "  compiles observed: {} traced, {} by the fallback model (tracing refused or STRATA_TRACE=0)",
            n("trace"),
            n("model")
        )?;
    }
    let hint = |k: &str| compile.hints.get(k).copied().unwrap_or(0);
    if hint("embedded_path_miss") > 0 {
        outln!(
            "  {} misses because the cached objects embed another checkout's path: build with \
             -ffile-prefix-map=<checkout>=. (docs/launcher.md, \"Prefix maps\")",
            hint("embedded_path_miss")
        )?;
    }
    if hint("saved_pinned") > 0 {
        outln!(
            "  {} results saved that embed this checkout's paths (they hit only where those \
             paths are the same)",
            hint("saved_pinned")
        )?;
    }
    print_reasons(&compile.counters)?;
    let archive = &compile.archive;
    if !archive.counters.is_empty() {
        outln!("archive steps (ar, ranlib): {}", archive.rate.describe())?;
        print_reasons(&archive.counters)?;
    }
    outln!("operator namespaces: {}", s.operator_namespaces)?;
    outln!("leftovers (removed by prune): {}", s.leftovers)?;
    outln!(".updated: {}", if s.updated_marker { "set" } else { "not set" })?;
    for w in &s.warnings {
        errln!("strata: WARNING stats: {w}");
    }
    Ok(0)
}

/// The counters other than hits, misses and the remote tier's, one per line
/// (`  not cached: <reason>: n`).
fn print_reasons(counters: &strata::l1::counters::Counters) -> Result<(), Failure> {
    for (name, n) in counters {
        if name != "hit" && name != "miss" && !name.starts_with("remote_") {
            let name = name
                .strip_prefix("uncacheable:")
                .map_or(name.clone(), |r| format!("not cached: {r}"));
            outln!("  {name}: {n}")?;
        }
    }
    Ok(())
}
