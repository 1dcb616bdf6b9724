//! The `modhost` command: all of it is [`modhost::cli`], behind the default
//! `cli` feature (see the library's documentation for why).

fn main() -> std::process::ExitCode {
    modhost::cli::main()
}
