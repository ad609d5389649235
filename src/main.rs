//! The `strata` binary: a thin shell that parses arguments, calls the library, prints
//! results and maps errors to documented exit codes (see `cli`).

mod cli;

fn main() {
    std::process::exit(cli::main());
}
