//! One module per subcommand.

pub mod bench;
pub mod demo;
pub mod fsck;
pub mod info;
pub mod mkfs;
pub mod presets;
pub mod sim;
pub mod torture;
