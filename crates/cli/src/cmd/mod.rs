//! One module per subcommand.

pub mod bench;
pub mod demo;
pub mod presets;
pub mod sim;
pub mod torture;
