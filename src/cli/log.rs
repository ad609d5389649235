//! The log: library `tracing` events (transport retries, aborted uploads, cleanup failures)
//! as single lines on stderr, so a CI log shows them.
//!
//! Format: `strata: <LEVEL> <message> <field>=<value> ...`, one line per event (line
//! breaks inside a message become spaces). Filtering is a `tracing-subscriber`
//! [`EnvFilter`] read from `STRATA_LOG`: WARN and ERROR are shown by default; a level
//! (`info`, `debug`, `trace`, or `error` for errors only) applies to every module, and
//! full directives select modules, e.g. `STRATA_LOG=strata::transport=debug` (the default
//! `warn` still holds for the rest). A value that is not a filter is reported once and the
//! default is used. The library never puts a secret in an event (secrets never leave
//! memory), so nothing here filters them.
//!
//! Lines are written with an active progress bar hidden ([`super::progress::suspend`]).

use std::fmt::Write as _;

use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

use super::output::errln;

/// The message and the other fields of one event.
#[derive(Default)]
struct Line {
    message: String,
    fields: String,
}

impl Visit for Line {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message.push_str(value);
        } else {
            let _ = write!(self.fields, " {}={value}", field.name());
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.message, "{value:?}");
        } else {
            let _ = write!(self.fields, " {}={value:?}", field.name());
        }
    }
}

/// The text of `event`'s line (without the newline).
fn format_event(event: &Event<'_>) -> String {
    let mut line = Line::default();
    event.record(&mut line);
    let text = format!("strata: {} {}{}", event.metadata().level(), line.message, line.fields);
    text.replace(['\n', '\r'], " ")
}

/// Writes every event that passes the filter as one line.
struct Lines<W> {
    write: W,
}

impl<S: Subscriber, W: Fn(&str) + 'static> Layer<S> for Lines<W> {
    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        (self.write)(&format_event(event));
    }
}

/// The filter for the `STRATA_LOG` value `given`, and a complaint if it is not a filter.
fn filter(given: Option<&str>) -> (EnvFilter, Option<String>) {
    let given = given.unwrap_or_default().trim();
    // A later directive for the same target replaces an earlier one, so a level in
    // `given` overrides the default and module directives add to it.
    let directives = if given.is_empty() { "warn".to_owned() } else { format!("warn,{given}") };
    match EnvFilter::builder().with_regex(false).parse(&directives) {
        Ok(filter) => (filter, None),
        Err(e) => (
            EnvFilter::new("warn"),
            Some(format!(
                "STRATA_LOG={given:?} is not a log filter ({e}); showing warnings and errors. \
                 Use a level (error, warn, info, debug, trace) or directives such as \
                 strata::transport=debug"
            )),
        ),
    }
}

/// Installs the log as the global default (once; later calls do nothing).
pub(crate) fn init() {
    let (filter, complaint) = filter(std::env::var("STRATA_LOG").ok().as_deref());
    let write = |text: &str| super::progress::suspend(|| errln!("{text}"));
    let subscriber = tracing_subscriber::registry().with(filter).with(Lines { write });
    if tracing::subscriber::set_global_default(subscriber).is_ok()
        && let Some(complaint) = complaint
    {
        tracing::warn!("{complaint}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// The lines `STRATA_LOG=given` lets through for one event of each level (from this
    /// module) and one debug event of `strata::transport`.
    fn shown(given: Option<&str>) -> Vec<String> {
        let (filter, complaint) = filter(given);
        let got = Arc::new(Mutex::new(Vec::new()));
        if let Some(c) = complaint {
            got.lock().unwrap().push(format!("complaint: {c}"));
        }
        let sink = Arc::clone(&got);
        let write = move |text: &str| sink.lock().unwrap().push(text.to_owned());
        let subscriber = tracing_subscriber::registry().with(filter).with(Lines { write });
        tracing::subscriber::with_default(subscriber, || {
            tracing::error!(retries = 3, "e");
            tracing::warn!(object = %"k/o", "w\nsecond line");
            tracing::info!("i");
            tracing::debug!("d");
            tracing::trace!("t");
            tracing::debug!(target: "strata::transport", "transport d");
        });
        got.lock().unwrap().clone()
    }

    #[test]
    fn warnings_and_errors_by_default_in_the_one_line_format() {
        let expected = ["strata: ERROR e retries=3", "strata: WARN w second line object=k/o"];
        assert_eq!(shown(None), expected);
        assert_eq!(shown(Some("")), expected);
        assert_eq!(shown(Some("  warn ")), expected);
    }

    #[test]
    fn a_level_or_directives_select_what_is_shown() {
        assert_eq!(shown(Some("error")), ["strata: ERROR e retries=3"]);
        assert_eq!(shown(Some("info")).len(), 3);
        assert_eq!(shown(Some("INFO")).len(), 3);
        assert_eq!(shown(Some("debug")).len(), 5);
        assert_eq!(shown(Some("trace")).len(), 6);
        // A module directive adds to the default: warnings elsewhere still show.
        let lines = shown(Some("strata::transport=debug"));
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert_eq!(lines[2], "strata: DEBUG transport d");
    }

    #[test]
    fn a_value_that_is_not_a_filter_keeps_the_default_and_says_so() {
        let lines = shown(Some("strata=loud"));
        assert!(lines[0].starts_with("complaint: STRATA_LOG=\"strata=loud\" is not a log filter"));
        assert_eq!(
            &lines[1..],
            ["strata: ERROR e retries=3", "strata: WARN w second line object=k/o"]
        );
    }
}
