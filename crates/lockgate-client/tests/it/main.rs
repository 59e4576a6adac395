//! Integration tests of lockgate-client: real child processes held under a lease kept
//! against a real TCP server whose answers the tests control ([`fake`]).

mod failover;
mod fake;
mod hold;
