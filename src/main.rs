//! The `strata` binary: parses arguments and hands them to `strata::cli` (when it exists).

fn main() {
    std::process::exit(0);
}
