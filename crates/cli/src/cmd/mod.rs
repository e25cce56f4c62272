//! One module per subcommand.

pub mod bench;
pub mod demo;
pub mod files;
pub mod fsck;
pub mod fusebench;
pub mod info;
pub mod mkfs;
pub mod presets;
pub mod scrub;
pub mod sim;
pub mod torture;
pub mod tx;
