//! lockgate-host: what lockgate reads from the host it runs on, shared by the server and
//! the command line (so that `lockgate policy check FILE` reads a policy exactly as
//! `lockgate server --config FILE` does, and every command finds the same data dir).
//!
//! - [`data_dir`]: the default data dir and the names of what lives in it;
//! - [`policy_files`]: a policy file, or a `conf.d` directory of them, read and validated;
//! - [`zone`]: the machine's local time zone, as the calendar knows it.
//!
//! No network, no state: each function reads the environment or the files it is given.
#![warn(missing_docs)]

pub mod data_dir;
pub mod policy_files;
pub mod zone;
