//! The allocator of every process that runs a server, and its purging.
//!
//! glibc's allocator keeps freed memory in its arenas: after a thousand event streams and
//! a thousand long-polls were opened and reset, a server that peaked at 90 MB stayed at
//! 90 MB with nothing open, and with `malloc_trim` every 10 s it still kept about 1.27x
//! its start (the live data that was left was scattered over the pages of new thread
//! arenas, and a page with one live byte cannot be given back). jemalloc groups
//! allocations by size class in extents and returns whole freed extents: the same load
//! ends within 1.1x of the start (docs/security.md, `memory.rs`).
//!
//! # Invariants
//! - One allocator for the product: the `lockgate` binary and the test binary whose child
//!   processes run servers both declare [`Allocator`] as their global allocator.
//! - Freed memory goes back to the kernel without a request: [`purge_in_background`] turns
//!   on jemalloc's background threads (at most one per CPU), which purge dirty pages after
//!   jemalloc's decay time (10 s), idle server or not. Nothing here runs on the HTTP
//!   workers or the event loop.

/// The global allocator to declare (`#[global_allocator] static A: Allocator = Allocator;`).
pub use tikv_jemallocator::Jemalloc as Allocator;

/// Turns on jemalloc's background purging. A process whose global allocator is not
/// [`Allocator`] only starts threads for a heap it never uses, so the error is logged
/// and the server goes on.
pub fn purge_in_background() {
    if let Err(e) = tikv_jemalloc_ctl::background_thread::write(true) {
        tracing::warn!("could not start the allocator's background purging: {e}");
    }
}
