//! What a store can do beyond the core every backend has.
//!
//! The core ([`ObjectStore`]): head, get (whole, ranged, small), put-if-absent. A backend
//! may also have [`Capability::List`] ([`ListObjects`]), [`Capability::Delete`]
//! ([`DeleteObjects`]), [`Capability::ConditionalWrites`] (put-if-absent is refused by
//! the store itself, atomically, when a second writer races the first) and
//! [`Capability::Multipart`] (large uploads go up in parallel parts).
//!
//! A feature that needs a capability asks for it before it does anything
//! ([`listing`], [`deleting`], or [`StoreUse`] when the store is opened); a store without
//! it is [`Error::Unsupported`], which names the store, what it cannot do and what needed
//! it — never a failure halfway through a save or a gc.
//!
//! | backend | list | delete | conditional writes | multipart |
//! |---|---|---|---|---|
//! | `file://` | yes | yes | yes (`renameat2(RENAME_NOREPLACE)`) | no |
//! | `s3://` | yes | yes | yes (`If-None-Match: *`, where the server honours it) | yes |
//! | `http(s)://` | no | no | no (HEAD, then `PUT` with `If-None-Match: *`) | no |

use std::fmt;

use super::{Error, ObjectKey, ObjectMeta, ObjectStore};

/// One thing a backend may be able to do beyond the core.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Capability {
    /// List the objects under a key prefix ([`ListObjects`]).
    List,
    /// Delete objects ([`DeleteObjects`]).
    Delete,
    /// The store itself refuses a put-if-absent whose key another writer filled first,
    /// atomically; without it only a HEAD before the write protects the key.
    ConditionalWrites,
    /// Large uploads go up in parallel parts.
    Multipart,
}

impl Capability {
    /// Every capability, in a fixed order.
    pub const ALL: [Capability; 4] = [
        Capability::List,
        Capability::Delete,
        Capability::ConditionalWrites,
        Capability::Multipart,
    ];

    fn bit(self) -> u8 {
        match self {
            Capability::List => 1,
            Capability::Delete => 2,
            Capability::ConditionalWrites => 4,
            Capability::Multipart => 8,
        }
    }

    /// What a store with this capability can do: `list objects`, `delete objects`, …
    pub fn ability(self) -> &'static str {
        match self {
            Capability::List => "list objects",
            Capability::Delete => "delete objects",
            Capability::ConditionalWrites => "refuse a second writer of a key by itself",
            Capability::Multipart => "upload in parts",
        }
    }

    /// What to do instead, for a user whose store lacks the capability for `purpose`
    /// (`snapshot gc`, a restore by prefix; docs/transport.md "HTTP cache servers").
    pub fn instead(self, purpose: &str) -> &'static str {
        match self {
            Capability::List | Capability::Delete if purpose.contains("gc") => {
                "clean the store with its own tools instead (bazel-remote evicts by size; an \
                 nginx directory can be trimmed by age with find)"
            }
            Capability::List => {
                "look up exact keys instead (restore with --key and the producer's key, without \
                 --restore-key), or use such a store for snapshots"
            }
            Capability::Delete => {
                "clean the store with its own tools instead (bazel-remote evicts by size; an \
                 nginx directory can be trimmed by age with find)"
            }
            Capability::ConditionalWrites | Capability::Multipart => "use such a store",
        }
    }

    /// The capability as a noun: `listing`, `deletion`, `conditional writes`, `multipart
    /// uploads`.
    pub fn noun(self) -> &'static str {
        match self {
            Capability::List => "listing",
            Capability::Delete => "deletion",
            Capability::ConditionalWrites => "conditional writes",
            Capability::Multipart => "multipart uploads",
        }
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.noun())
    }
}

/// A set of [`Capability`]s.
///
/// ```
/// use strata::transport::{Capabilities, Capability};
/// let set = Capabilities::of(&[Capability::List, Capability::Delete]);
/// assert!(set.has(Capability::List) && !set.has(Capability::Multipart));
/// assert_eq!(set.to_string(), "listing, deletion");
/// assert_eq!(Capabilities::NONE.to_string(), "none");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Capabilities(u8);

impl Capabilities {
    /// No capability beyond the core.
    pub const NONE: Capabilities = Capabilities(0);

    /// The set holding `capabilities`.
    pub fn of(capabilities: &[Capability]) -> Self {
        Self(capabilities.iter().fold(0, |bits, c| bits | c.bit()))
    }

    /// True if `capability` is in the set.
    pub fn has(self, capability: Capability) -> bool {
        self.0 & capability.bit() != 0
    }

    /// The capabilities of the set, in [`Capability::ALL`] order.
    pub fn iter(self) -> impl Iterator<Item = Capability> {
        Capability::ALL.into_iter().filter(move |c| self.has(*c))
    }

    /// The first capability of `needs` this set lacks.
    pub fn first_missing(self, needs: Capabilities) -> Option<Capability> {
        needs.iter().find(|c| !self.has(*c))
    }
}

impl fmt::Display for Capabilities {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.iter().map(Capability::noun).collect();
        if names.is_empty() { f.write_str("none") } else { f.write_str(&names.join(", ")) }
    }
}

/// A use a store is opened for: what it is (for messages, e.g. `snapshot gc`) and the
/// capabilities it needs beyond the core.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreUse {
    /// What the store is opened for, e.g. `snapshot gc` or `--restore-key`.
    pub purpose: &'static str,
    /// What it needs.
    pub needs: Capabilities,
}

impl StoreUse {
    /// A use that needs the core only.
    pub fn core(purpose: &'static str) -> Self {
        Self { purpose, needs: Capabilities::NONE }
    }

    /// A use that needs `needs`.
    pub fn needing(purpose: &'static str, needs: &[Capability]) -> Self {
        Self { purpose, needs: Capabilities::of(needs) }
    }
}

/// Listing: the objects under a key prefix.
pub trait ListObjects: Send + Sync {
    /// Every object whose key starts with `prefix` (plain string prefix, `""` for all),
    /// following all pages, sorted by key.
    ///
    /// # Errors
    /// Network, permission and I/O errors.
    fn list(&self, prefix: &str) -> Result<Vec<ObjectMeta>, Error>;
}

/// Deletion of objects.
pub trait DeleteObjects: Send + Sync {
    /// Deletes `key`; deleting a missing object succeeds.
    ///
    /// # Errors
    /// [`Error::MissingCredentials`] for an S3 store without credentials; network,
    /// permission and I/O errors.
    fn delete(&self, key: &ObjectKey) -> Result<(), Error>;
}

/// [`Error::Unsupported`] for `store`, which lacks `capability` that `purpose` needs.
pub(crate) fn unsupported(store: String, capability: Capability, purpose: &str) -> Error {
    Error::Unsupported { store, capability, purpose: purpose.to_owned() }
}

/// The listing of `store`, which `purpose` (e.g. `snapshot gc`) needs.
///
/// # Errors
/// [`Error::Unsupported`] if the store cannot list.
pub fn listing<'a>(
    store: &'a dyn ObjectStore,
    purpose: &str,
) -> Result<&'a dyn ListObjects, Error> {
    store.listing().ok_or_else(|| unsupported(store.describe(), Capability::List, purpose))
}

/// The deletion of `store`, which `purpose` needs.
///
/// # Errors
/// [`Error::Unsupported`] if the store cannot delete.
pub fn deleting<'a>(
    store: &'a dyn ObjectStore,
    purpose: &str,
) -> Result<&'a dyn DeleteObjects, Error> {
    store.deleting().ok_or_else(|| unsupported(store.describe(), Capability::Delete, purpose))
}
