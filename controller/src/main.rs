//! The `autoforge` binary.

fn main() -> std::process::ExitCode {
    std::process::ExitCode::SUCCESS
}
