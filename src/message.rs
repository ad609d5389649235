//! Errors as one line of text, for warnings, events, annotations and JSON fields that must
//! stay on one line (the command line prints the full chain, one cause per line, itself).

/// `error` and all its causes joined with `: `, skipping a cause whose text the line
/// already holds (a message that embeds its source), with line breaks replaced by spaces.
pub fn one_line(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(e) = cause {
        let next = e.to_string();
        if !text.contains(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        cause = e.source();
    }
    text.replace(['\n', '\r'], " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("{text}")]
    struct Layer {
        text: String,
        #[source]
        source: Option<Box<Layer>>,
    }

    fn layer(text: &str, source: Option<Layer>) -> Layer {
        Layer { text: text.to_owned(), source: source.map(Box::new) }
    }

    #[test]
    fn causes_join_once_on_one_line() {
        let inner = layer("disk full\n(errno 28)", None);
        let middle = layer("cannot write /x: disk full\n(errno 28)", Some(inner));
        let outer = layer("save failed", Some(middle));
        assert_eq!(one_line(&outer), "save failed: cannot write /x: disk full (errno 28)");
        assert_eq!(one_line(&layer("alone", None)), "alone");
    }
}
