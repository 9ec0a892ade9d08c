//! A property's lock: what orders its ingest log against the queries
//! registered on it.
//!
//! A query registered on a property reads exactly the instants logged
//! after its registration ([`Store::register`] takes the log's next
//! sequence number as its first checkpoint). That holds only if no instant
//! of the property is logged between that read and the moment the query
//! gets its feed, so the caller holds the property's lock across both, as
//! it does across logging and delivering an ingest. `register` takes the
//! lock's guard: a caller without it does not compile.
//!
//! [`Store::register`]: super::Store::register

use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use super::record::PropertyPath;

/// The lock of one property, guarding the caller's `T` (the server's
/// feeds of the property's queries, say).
#[derive(Debug)]
pub struct PropertyLock<T> {
    property: PropertyPath,
    value: Arc<tokio::sync::Mutex<T>>,
}

impl<T> PropertyLock<T> {
    /// The lock of `property`, around `value`.
    pub fn new(property: PropertyPath, value: T) -> PropertyLock<T> {
        PropertyLock {
            property,
            value: Arc::new(tokio::sync::Mutex::new(value)),
        }
    }

    /// The property it locks.
    pub fn property(&self) -> &PropertyPath {
        &self.property
    }

    /// Waits for the lock.
    ///
    /// # Cancel safety
    ///
    /// As `tokio::sync::Mutex::lock`: dropped before it returns, it holds
    /// nothing and loses its place in the queue.
    pub async fn lock(&self) -> PropertyGuard<'_, T> {
        PropertyGuard {
            property: &self.property,
            value: self.value.lock().await,
        }
    }
}

impl<T> PropertyLock<T> {
    /// Waits for the lock, and holds it until the guard is dropped,
    /// wherever the guard goes: a task that outlives the caller (the
    /// replay of the log at start-up) keeps the property's ingests waiting
    /// until it is done.
    ///
    /// # Cancel safety
    ///
    /// As [`lock`](PropertyLock::lock).
    pub async fn lock_owned(&self) -> OwnedPropertyGuard<T> {
        OwnedPropertyGuard {
            value: self.value.clone().lock_owned().await,
        }
    }
}

/// A held [`PropertyLock`] that is not tied to the lock's lifetime
/// ([`PropertyLock::lock_owned`]).
#[derive(Debug)]
pub struct OwnedPropertyGuard<T> {
    value: tokio::sync::OwnedMutexGuard<T>,
}

impl<T> Deref for OwnedPropertyGuard<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.value
    }
}

impl<T> DerefMut for OwnedPropertyGuard<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.value
    }
}

/// A held [`PropertyLock`]: the lock is released when it is dropped.
#[derive(Debug)]
pub struct PropertyGuard<'a, T> {
    property: &'a PropertyPath,
    value: tokio::sync::MutexGuard<'a, T>,
}

impl<T> PropertyGuard<'_, T> {
    /// The property it holds.
    pub fn property(&self) -> &PropertyPath {
        self.property
    }
}

impl<T> Deref for PropertyGuard<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.value
    }
}

impl<T> DerefMut for PropertyGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.value
    }
}
