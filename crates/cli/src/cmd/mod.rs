//! One module per subcommand.

pub mod demo;
pub mod presets;
pub mod sim;
