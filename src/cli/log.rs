//! A minimal `tracing` subscriber: library log events (transport retries, aborted uploads,
//! cleanup failures) as single lines on stderr, so a CI log shows them.
//!
//! Format: `strata: <LEVEL> <message> <field>=<value> ...`. WARN and ERROR are always
//! printed; `STRATA_LOG=info` (or `debug`, `trace`) adds lower levels. The library never
//! puts a secret in an event (secrets never leave memory), so nothing here filters.

use std::fmt::Write as _;
use std::io::Write as _;

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

struct StderrLog {
    max: Level,
}

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

impl Subscriber for StderrLog {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        *metadata.level() <= self.max
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        if !self.enabled(event.metadata()) {
            return;
        }
        let mut line = Line { message: String::new(), fields: String::new() };
        event.record(&mut line);
        let text = format!("strata: {} {}{}", event.metadata().level(), line.message, line.fields);
        let mut err = std::io::stderr().lock();
        let _ = writeln!(err, "{}", text.replace(['\n', '\r'], " "));
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

/// Installs the subscriber as the global default (once; later calls do nothing).
pub(crate) fn init() {
    let max = match std::env::var("STRATA_LOG").unwrap_or_default().to_ascii_lowercase().as_str() {
        "trace" => Level::TRACE,
        "debug" => Level::DEBUG,
        "info" => Level::INFO,
        "error" => Level::ERROR,
        _ => Level::WARN,
    };
    let _ = tracing::subscriber::set_global_default(StderrLog { max });
}
