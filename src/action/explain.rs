//! `strata action explain`: why would this action miss? (docs/operations.md "Debugging
//! misses").
//!
//! Given the same flags as `run`, compute the identity without building (through the
//! preparation `run` uses, [`crate::action::prepare`], so both name the same key), then:
//! * if the exact entry exists, say whether it is valid (a HIT) or why it is not;
//! * otherwise find the *nearest* existing entry of the same unit/action — the one whose
//!   stored identity records differ in the fewest places (ties: the newest) — and list each
//!   differing record: `prepared input input[0]/foo.h changed`, `recipe recipe_value[1]
//!   differs`, `tool c++ version differs`, `operator text kernel.cpp changed`, plus records
//!   only one side has.
//!
//! Explain never writes to the cache (the tool-version memo may be refreshed).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::action::entry::{self, EntryManifest, Lookup};
use crate::action::identity::{Components, Records};
use crate::action::layout::{CacheRoot, Domain};
use crate::action::prepare::{entry_name, prepare};
use crate::action::{ActionKey, Error, RunOptions};
use crate::l1::layout::encode_component;

/// What changed in one record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "change", rename_all = "snake_case")]
pub enum Change {
    /// Both sides have it with different values.
    Changed {
        /// Value in the existing entry.
        old: String,
        /// Value now.
        new: String,
    },
    /// Only the request has it.
    Added {
        /// Value now.
        new: String,
    },
    /// Only the existing entry has it.
    Removed {
        /// Value in the existing entry.
        old: String,
    },
}

/// One differing identity record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Difference {
    /// `prepared_input`, `recipe`, `environment` or `operator_text`.
    pub component: &'static str,
    /// The record name.
    pub name: String,
    /// How it differs.
    #[serde(flatten)]
    pub change: Change,
}

impl Difference {
    /// One human line, e.g. `prepared input input[0]/foo.h changed`.
    pub fn describe(&self) -> String {
        let verb = match &self.change {
            Change::Changed { .. } => "changed",
            Change::Added { .. } => "added",
            Change::Removed { .. } => "removed",
        };
        match self.component {
            "prepared_input" => format!("prepared input {} {verb}", self.name),
            "operator_text" => format!("operator text {} {verb}", self.name),
            "environment" => match (self.name.strip_prefix("tool:"), &self.change) {
                (Some(tool), Change::Changed { .. }) => format!("tool {tool} version differs"),
                (Some(tool), _) => format!("tool {tool} {verb}"),
                (None, Change::Changed { old, new }) => {
                    format!("environment {} differs ({} → {})", self.name, short(old), short(new))
                }
                (None, _) => format!("environment {} {verb}", self.name),
            },
            _ => match &self.change {
                Change::Changed { old, new } if self.name == "original_command" => {
                    format!("recipe original_command differs: {} → {}", short(old), short(new))
                }
                Change::Changed { old, new } => {
                    format!("recipe {} differs ({} → {})", self.name, short(old), short(new))
                }
                _ => format!("recipe {} {verb}", self.name),
            },
        }
    }
}

fn short(v: &str) -> String {
    let is_hex = v.len() == 64 && v.bytes().all(|b| b.is_ascii_hexdigit());
    if is_hex {
        return format!("{}…", &v[..12]);
    }
    let mut s: String = v.chars().take(120).collect();
    if s.len() < v.len() {
        s.push('…');
    }
    format!("{s:?}")
}

/// The verdict.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Verdict {
    /// The exact entry exists and is valid: `run` would HIT.
    Hit {
        /// The entry directory.
        #[serde(serialize_with = "crate::fs::name::serialize_path")]
        entry: PathBuf,
    },
    /// The exact entry exists but would be rejected.
    Invalid {
        /// The entry directory.
        #[serde(serialize_with = "crate::fs::name::serialize_path")]
        entry: PathBuf,
        /// Why.
        reason: String,
    },
    /// No exact entry; the nearest one and how it differs.
    Nearest {
        /// Its key.
        nearest_key: ActionKey,
        /// Its directory.
        #[serde(serialize_with = "crate::fs::name::serialize_path")]
        entry: PathBuf,
        /// When it was saved.
        created_at: String,
        /// Differing records, by component then name.
        differences: Vec<Difference>,
    },
    /// No entry of this unit/action at all.
    NoEntries,
}

/// The result of explain.
#[derive(Debug, Clone, Serialize)]
pub struct Explanation {
    /// The key the request has.
    pub key: ActionKey,
    /// Domain.
    pub domain: Domain,
    /// Unit.
    pub unit: String,
    /// Verdict (flattened into this object in JSON: `"verdict": "hit" | "invalid" |
    /// "nearest" | "no_entries"` plus that verdict's fields).
    #[serde(flatten)]
    pub verdict: Verdict,
}

/// Explains the request `opts` (the same options `run` takes; see the module docs). The
/// key is computed by the very preparation `run` uses
/// ([`prepare`](fn@crate::action::prepare::prepare)), so explain names the key run looks up.
///
/// # Errors
/// What `run` reports before it builds: usage errors (a custom operator without its
/// flags, an empty command), identity errors (a missing declared input…), invalid names.
pub fn explain(opts: &RunOptions) -> Result<Explanation, Error> {
    let prepared = prepare(opts)?;
    let identity = prepared.identity()?;
    let cache = &prepared.cache;
    let name = entry_name(opts, &identity);
    let loc = cache.entry(&name, &identity.key)?;
    let expected = EntryManifest::expected(&name, &identity);
    let verdict = match entry::lookup(&loc, &expected) {
        Lookup::Valid(_) => Verdict::Hit { entry: loc.dir.clone() },
        Lookup::Invalid(reason) => Verdict::Invalid { entry: loc.dir.clone(), reason },
        Lookup::Absent => nearest(cache, opts, &identity.components)?,
    };
    Ok(Explanation { key: identity.key, domain: opts.domain, unit: opts.unit.clone(), verdict })
}

fn candidates(cache: &CacheRoot, req: &RunOptions) -> Result<Vec<PathBuf>, Error> {
    let mut dirs = Vec::new();
    let unit = encode_component("--unit", &req.unit)?;
    match req.domain {
        Domain::ThirdParty => dirs.push(cache.domain_dir(Domain::ThirdParty).join(unit)),
        Domain::CustomOperator => {
            let soc = encode_component("--soc", req.soc.as_deref().unwrap_or_default())?;
            let op = encode_component("--operator", req.operator.as_deref().unwrap_or_default())?;
            let action = encode_component("--action", req.action.as_deref().unwrap_or_default())?;
            let op_dir = cache.domain_dir(Domain::CustomOperator).join(soc).join(op);
            for ns in list(&op_dir)? {
                dirs.push(ns.join(format!("{action}@{unit}")));
            }
        }
    }
    let mut entries = Vec::new();
    for d in dirs {
        entries.extend(list(&d)?);
    }
    Ok(entries)
}

fn list(dir: &Path) -> Result<Vec<PathBuf>, Error> {
    match crate::fs::read_dir(dir) {
        Ok(v) => Ok(v
            .into_iter()
            .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| !n.starts_with('.')))
            .collect()),
        Err(e) if e.is_not_found() => Ok(Vec::new()),
        Err(e) => Err(e.into()),
    }
}

fn nearest(cache: &CacheRoot, req: &RunOptions, now: &Components) -> Result<Verdict, Error> {
    let mut best: Option<(usize, String, PathBuf, ActionKey, Vec<Difference>)> = None;
    for dir in candidates(cache, req)? {
        let (Ok(stored), Ok(manifest)) = (entry::read_identity(&dir), entry::read_manifest(&dir))
        else {
            continue;
        };
        let diffs = diff(&stored, now);
        let better = match &best {
            None => true,
            Some((n, created, ..)) => {
                diffs.len() < *n || (diffs.len() == *n && manifest.created_at > *created)
            }
        };
        if better {
            best = Some((diffs.len(), manifest.created_at, dir, manifest.key, diffs));
        }
    }
    Ok(match best {
        None => Verdict::NoEntries,
        Some((_, created_at, entry, nearest_key, differences)) => {
            Verdict::Nearest { nearest_key, entry, created_at, differences }
        }
    })
}

/// The differing records between a stored identity and the current one.
pub fn diff(old: &Components, new: &Components) -> Vec<Difference> {
    let mut out = Vec::new();
    let empty = Records::new();
    for (component, a, b) in [
        ("prepared_input", &old.prepared, &new.prepared),
        ("recipe", &old.recipe, &new.recipe),
        ("environment", &old.environment, &new.environment),
        (
            "operator_text",
            old.operator_text.as_ref().unwrap_or(&empty),
            new.operator_text.as_ref().unwrap_or(&empty),
        ),
    ] {
        let am = group(a);
        let bm = group(b);
        let names: std::collections::BTreeSet<&String> =
            am.keys().chain(bm.keys()).copied().collect();
        for name in names {
            let change = match (am.get(name), bm.get(name)) {
                (Some(x), Some(y)) if x == y => continue,
                (Some(x), Some(y)) => Change::Changed { old: x.join(", "), new: y.join(", ") },
                (None, Some(y)) => Change::Added { new: y.join(", ") },
                (Some(x), None) => Change::Removed { old: x.join(", ") },
                (None, None) => continue,
            };
            out.push(Difference { component, name: name.clone(), change });
        }
    }
    out
}

fn group(r: &Records) -> BTreeMap<&String, Vec<&str>> {
    let mut m: BTreeMap<&String, Vec<&str>> = BTreeMap::new();
    for rec in r.iter() {
        m.entry(&rec.name).or_default().push(rec.value.as_str());
    }
    for v in m.values_mut() {
        v.sort_unstable();
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diff_names_the_component() {
        let mut a = Components::default();
        a.prepared.push("input[0]/foo.h", "1".repeat(64));
        a.recipe.push("recipe_value[1]", "-O2");
        a.environment.push("tool:c++", "g++ 12");
        let mut b = a.clone();
        b.prepared = Records::new();
        b.prepared.push("input[0]/foo.h", "2".repeat(64));
        b.recipe = Records::new();
        b.recipe.push("recipe_value[1]", "-O3");
        b.environment = Records::new();
        b.environment.push("tool:c++", "g++ 13");
        let lines: Vec<String> = diff(&a, &b).iter().map(Difference::describe).collect();
        assert_eq!(
            lines,
            [
                "prepared input input[0]/foo.h changed",
                "recipe recipe_value[1] differs (\"-O2\" → \"-O3\")",
                "tool c++ version differs",
            ]
        );
    }
}
