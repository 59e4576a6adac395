//! Integration tests of lockgate-blocks: one binary, one module per area.

mod apps;
mod blocks;
mod confine;
mod fixtures;
mod hooks;
mod input;
mod ordered;
mod pool;
mod restore;
mod scope;
