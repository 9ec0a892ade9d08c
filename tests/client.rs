//! The serve tests' HTTP and Server-Sent Events client, shared with the
//! load benchmark through its own crate (`tests/support`).

pub use mfstream_test_client::*;
