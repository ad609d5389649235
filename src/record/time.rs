//! [`Timestamp`]: the one clock reading records carry (`created_at`, `restored_at`), as UTC
//! RFC 3339 text (STYLE.md rule 12).
//!
//! Two precisions, one rule each: records that name a moment to the second (snapshot
//! manifests and sidecars, refs, leases, L0 signature statements, restore origins) use
//! [`Timestamp::rfc3339_seconds`] (`2026-12-01T03:11:58Z`); entries, whose save times order
//! saves made within one second (`strata action explain` picks the newest nearest entry, a
//! compile candidate's id hashes its save time), use [`Timestamp::rfc3339`] with the
//! clock's nanoseconds (`2026-12-01T03:11:58.577235138Z`). Both are what earlier releases
//! wrote in those places, so old and new records read alike.

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// A UTC moment (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Timestamp(OffsetDateTime);

/// What [`Timestamp`] writes if a moment cannot be formatted (a year outside 0..=9999,
/// which the system clock does not give).
const EPOCH_TEXT: &str = "1970-01-01T00:00:00Z";

impl Timestamp {
    /// The system clock now, in UTC.
    pub fn now() -> Self {
        Self(OffsetDateTime::now_utc())
    }

    /// RFC 3339 with the clock's full precision (trailing zeros of the fraction left out,
    /// no fraction at a whole second), e.g. `2026-12-01T03:11:58.577235138Z`.
    pub fn rfc3339(&self) -> String {
        self.0.format(&Rfc3339).unwrap_or_else(|_| EPOCH_TEXT.to_owned())
    }

    /// RFC 3339 to the second, e.g. `2026-12-01T03:11:58Z`.
    pub fn rfc3339_seconds(&self) -> String {
        let whole = self.0.replace_nanosecond(0).unwrap_or(self.0);
        Timestamp(whole).rfc3339()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_precisions_are_utc_rfc3339() {
        let t = Timestamp(
            OffsetDateTime::from_unix_timestamp_nanos(1_796_095_918_577_235_138).unwrap(),
        );
        assert_eq!(t.rfc3339(), "2026-12-01T03:31:58.577235138Z");
        assert_eq!(t.rfc3339_seconds(), "2026-12-01T03:31:58Z");
        let whole = Timestamp(OffsetDateTime::from_unix_timestamp(1_796_095_918).unwrap());
        assert_eq!(whole.rfc3339(), "2026-12-01T03:31:58Z");
        let now = Timestamp::now();
        assert!(now.rfc3339().ends_with('Z') && now.rfc3339_seconds().len() == 20);
    }
}
