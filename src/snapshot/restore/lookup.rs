//! Lookup: which snapshots a restore tries, in which order (see [`super`]'s module
//! docs for the rules): the exact key by a HEAD of its sidecar, then each prefix's complete
//! snapshots newest first, future-dated keys left out. A snapshot counts when its sidecar
//! `<key>.json` exists: the sidecar is uploaded after the object it commits (which, for
//! today's saves, is named `~<16 hex>-<32 hex>` and so is not in the prefix's listing);
//! restore then reads the sidecar and checks that object.

use std::time::{Duration, SystemTime};

use super::{MatchLevel, RestoreReport, RestoreRequest};
use crate::snapshot::commit::object_key;
use crate::snapshot::key::{KeyParts, SuffixTime, check_key_text, key_time};
use crate::snapshot::{Error, SnapshotKey};
use crate::transport::ObjectMeta;

/// How far in the future a suffix time may be before its snapshot is ignored (clock skew
/// between runners is fine; a key dated years ahead would otherwise win every lookup).
pub const MAX_FUTURE: Duration = Duration::from_secs(24 * 60 * 60);

/// A candidate snapshot: key, level, the sidecar's store metadata and, when the lookup
/// saw it, the size of its object (which object a sidecar commits is known only once the
/// sidecar is read).
pub(crate) struct Candidate {
    pub(crate) key: String,
    pub(crate) level: MatchLevel,
    pub(crate) sidecar: ObjectMeta,
    pub(crate) object_size_bytes: Option<u64>,
}

/// The sort key of [`recency`].
type Recency = (SuffixTime, String);

/// The sort key of a listed snapshot: its suffix time, else the sidecar's `Last-Modified`
/// (to the store's resolution), then the key itself; larger is newer.
fn recency(name: &str, sidecar: &ObjectMeta) -> Recency {
    let time = key_time(name)
        .and_then(SuffixTime::parse)
        .unwrap_or_else(|| SuffixTime::of(sidecar.last_modified));
    (time, name.to_owned())
}

/// The complete snapshots among `objects` under `prefix`, newest first (see the module
/// docs). Snapshots whose suffix time lies more than [`MAX_FUTURE`] after `now` are left
/// out with a note.
fn newest_first(
    objects: &[ObjectMeta],
    prefix: &str,
    now: SystemTime,
    notes: &mut Vec<String>,
) -> Vec<(String, ObjectMeta, Option<u64>)> {
    let sizes: std::collections::HashMap<&str, u64> =
        objects.iter().map(|o| (o.key.as_str(), o.size_bytes)).collect();
    let limit = SuffixTime::of(now + MAX_FUTURE);
    let mut found: Vec<(Recency, ObjectMeta, Option<u64>)> = Vec::new();
    for o in objects {
        let Some(name) = o.key.as_str().strip_suffix(".json") else { continue };
        if !name.starts_with(prefix) || check_key_text("--key", name).is_err() {
            continue;
        }
        // The object `<key>` of an earlier release's snapshot is listed with it.
        let size = sizes.get(name).copied();
        if let Some(time) = key_time(name)
            && SuffixTime::parse(time).is_some_and(|t| t > limit)
        {
            notes.push(format!(
                "ignoring snapshot {name}: its time {time} is more than a day in the future \
                 (a wrong clock or a crafted key); delete it from the store if it keeps \
                 appearing"
            ));
            continue;
        }
        found.push((recency(name, o), o.clone(), size));
    }
    found.sort_by(|a, b| b.0.cmp(&a.0));
    found.into_iter().map(|((_, name), meta, size)| (name, meta, size)).collect()
}

/// The prefixes to try after the exact key, with their levels, deduplicated in order.
pub(crate) fn prefixes(
    key: &SnapshotKey,
    extra: &[String],
) -> Result<Vec<(String, MatchLevel)>, Error> {
    let derived = key.parts().map(|p: KeyParts| (p.same_source_prefix(), p.compat_prefix()));
    let mut out: Vec<(String, MatchLevel)> = Vec::new();
    if let Some((same, compat)) = &derived {
        out.push((same.clone(), MatchLevel::SameSource));
        out.push((compat.clone(), MatchLevel::Compatible));
    }
    for prefix in extra {
        check_key_text("--restore-key", prefix)?;
        let level = match &derived {
            Some((same, _)) if same == prefix => MatchLevel::SameSource,
            Some((_, compat)) if compat == prefix => MatchLevel::Compatible,
            _ => MatchLevel::Prefix,
        };
        if !out.iter().any(|(p, _)| p == prefix) {
            out.push((prefix.clone(), level));
        }
    }
    Ok(out)
}

/// The candidates of one lookup step: step 0 is the exact key (HEAD of sidecar and
/// object), step `i > 0` the newest-first listing of the `i`-th prefix. `None` past the
/// last step.
pub(crate) fn candidates(
    request: &RestoreRequest<'_>,
    prefixes: &[(String, MatchLevel)],
    step: usize,
    report: &mut RestoreReport,
) -> Result<Option<Vec<Candidate>>, Error> {
    let store = request.store;
    let Some(index) = step.checked_sub(1) else {
        let key = request.key.as_str();
        report.tried.push(key.to_owned());
        let sidecar_key = object_key(&request.key.sidecar_name())?;
        // The sidecar is uploaded after the object it names, so it is the snapshot's
        // presence; restore then checks the object it names.
        let sidecar = store
            .head(&sidecar_key)
            .map_err(|e| Error::transport("look up", sidecar_key.as_str(), e))?;
        return Ok(Some(
            sidecar
                .map(|sidecar| Candidate {
                    key: key.to_owned(),
                    level: MatchLevel::Exact,
                    sidecar,
                    object_size_bytes: None,
                })
                .into_iter()
                .collect(),
        ));
    };
    let Some((prefix, level)) = prefixes.get(index) else { return Ok(None) };
    let Some(listing) = store.listing() else {
        // An HTTP cache server: the exact key is all a restore can find there (a
        // `--restore-key` was refused before the lookup began).
        report.notes.push(format!(
            "{} cannot list objects, so only the exact key was looked up: no newest \
             same-source or compatible snapshot is searched for (a store that lists, file:// \
             or s3://, can)",
            store.describe()
        ));
        return Ok(None);
    };
    report.tried.push(prefix.clone());
    let objects = listing.list(prefix).map_err(|e| Error::transport("list", prefix, e))?;
    let listed = newest_first(&objects, prefix, SystemTime::now(), &mut report.notes);
    Ok(Some(
        listed
            .into_iter()
            .map(|(key, sidecar, size)| Candidate {
                key,
                level: *level,
                sidecar,
                object_size_bytes: size,
            })
            .collect(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(key: &str, secs: u64) -> ObjectMeta {
        ObjectMeta {
            key: key.parse().unwrap(),
            size_bytes: 1,
            last_modified: SystemTime::UNIX_EPOCH + Duration::from_secs(secs),
            etag: None,
        }
    }

    #[test]
    fn newest_needs_a_sidecar_and_prefers_the_suffix_time() {
        let p = "ns-";
        let objects = vec![
            meta("ns-a-20250101T000000Z-1-0-1-aa", 500),
            meta("ns-a-20250101T000000Z-1-0-1-aa.json", 500),
            meta("ns-b-20250301T000000Z-1-0-1-aa", 100),
            meta("ns-b-20250301T000000Z-1-0-1-aa.json", 100),
            // Newest by time but incomplete: no sidecar.
            meta("ns-c-20250401T000000Z-1-0-1-aa", 900),
            // Today's layout: the object has a name of its own, outside the prefix.
            meta("ns-d-20250201T000000Z-1-0-1-aa.json", 1),
        ];
        let now = SystemTime::now();
        let names = |objects: &[ObjectMeta], prefix: &str| -> Vec<String> {
            newest_first(objects, prefix, now, &mut Vec::new()).into_iter().map(|c| c.0).collect()
        };
        assert_eq!(
            names(&objects, p),
            [
                "ns-b-20250301T000000Z-1-0-1-aa",
                "ns-d-20250201T000000Z-1-0-1-aa",
                "ns-a-20250101T000000Z-1-0-1-aa"
            ]
        );
        let sizes: Vec<Option<u64>> =
            newest_first(&objects, p, now, &mut Vec::new()).into_iter().map(|c| c.2).collect();
        assert_eq!(sizes, [Some(1), None, Some(1)]);
        assert!(names(&objects, "other-").is_empty());
    }

    #[test]
    fn saves_within_one_second_come_newest_first_whatever_their_pids() {
        let objects = vec![
            meta("ns-s-20250101T000000.000100Z-local-0-937-ff.json", 1),
            meta("ns-s-20250101T000000.000300Z-local-0-1000-00.json", 1),
            meta("ns-s-20250101T000000.000200Z-local-0-20-aa.json", 1),
            // Made by an older release, in the same second: the second's start.
            meta("ns-s-20250101T000000Z-local-0-99-ff.json", 1),
        ];
        let listed = newest_first(&objects, "ns-", SystemTime::now(), &mut Vec::new());
        let pids: Vec<&str> =
            listed.iter().map(|c| c.0.rsplit('-').nth(1).unwrap_or_default()).collect();
        assert_eq!(pids, ["1000", "20", "937", "99"]);
    }

    #[test]
    fn future_dated_snapshots_are_ignored_with_a_note() {
        let objects = vec![
            meta("ns-a-20250101T000000Z-1-0-1-aa", 1),
            meta("ns-a-20250101T000000Z-1-0-1-aa.json", 1),
            meta("ns-z-20991231T000000Z-1-0-1-aa", 1),
            meta("ns-z-20991231T000000Z-1-0-1-aa.json", 1),
        ];
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_750_000_000);
        let mut notes = Vec::new();
        let listed = newest_first(&objects, "ns-", now, &mut notes);
        let names: Vec<&str> = listed.iter().map(|c| c.0.as_str()).collect();
        assert_eq!(names, ["ns-a-20250101T000000Z-1-0-1-aa"]);
        assert!(notes.len() == 1 && notes[0].contains("ns-z-20991231T000000Z"), "{notes:?}");
        // Within a day of now (clock skew between runners) is fine.
        let soon = SystemTime::UNIX_EPOCH + Duration::from_secs(4_102_358_400 - 3600);
        assert_eq!(newest_first(&objects, "ns-", soon, &mut Vec::new()).len(), 2);
    }

    #[test]
    fn keys_without_a_suffix_use_sub_second_times_then_the_key() {
        let at = |key: &str, millis: u64| ObjectMeta {
            last_modified: SystemTime::UNIX_EPOCH + Duration::from_millis(millis),
            ..meta(key, 0)
        };
        // The same second: the later millisecond wins, whatever the key order; an exact
        // tie goes to the larger key.
        let objects = vec![
            at("my-b", 1),
            at("my-b.json", 5_200),
            at("my-a", 1),
            at("my-a.json", 5_700),
            at("my-c", 1),
            at("my-c.json", 5_200),
        ];
        let listed = newest_first(&objects, "my-", SystemTime::now(), &mut Vec::new());
        let names: Vec<&str> = listed.iter().map(|c| c.0.as_str()).collect();
        assert_eq!(names, ["my-a", "my-c", "my-b"]);
    }

    #[test]
    fn derived_prefixes_come_first() {
        let text = format!("p-schema1-{}-src-20250102T030405Z-1-1-1-ab", "c".repeat(32));
        let key: SnapshotKey = text.parse().unwrap();
        let list = prefixes(&key, &["p-".into(), key.parts().unwrap().compat_prefix()]).unwrap();
        let levels: Vec<MatchLevel> = list.iter().map(|(_, l)| *l).collect();
        assert_eq!(levels, [MatchLevel::SameSource, MatchLevel::Compatible, MatchLevel::Prefix]);
        let plain: SnapshotKey = "my-key".parse().unwrap();
        assert_eq!(
            prefixes(&plain, &["my-".into()]).unwrap(),
            [("my-".into(), MatchLevel::Prefix)]
        );
        assert!(prefixes(&plain, &["a,b".into()]).is_err());
    }
}
