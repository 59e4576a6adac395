//! Integration tests of lockgate-client: real child processes held under a lease kept
//! against a real TCP server whose answers the tests control ([`fake`]), and the event
//! stream read from a server that ends it.

mod events;
mod failover;
mod fake;
mod hold;
mod meter;
