//! Property tests (written next).
