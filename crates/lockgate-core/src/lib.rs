//! lockgate-core
