//! The `modhost` command. Everything happens in [`cli`].

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
