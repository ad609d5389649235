//! Permission normalisation.
//!
//! Stored data never keeps the permission bits it was built with: only the owner-exec bit
//! survives, and the rest comes from a [`Sharing`] policy. setuid, setgid and sticky bits
//! are always dropped (restores never create them).

/// Who may read what strata stores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sharing {
    /// Owner only: directories 0700, files 0600 (0700 with owner-exec). The artifact
    /// store's default.
    Private,
    /// World-readable, owner-writable: directories 0755, files 0644 (0755 with
    /// owner-exec). The L1 action cache's default, so a warmed cache can be shared
    /// read-only with other users.
    Shared,
}

impl Sharing {
    /// Mode for a regular file; `executable` is the owner-exec bit of the source.
    pub fn file_mode(self, executable: bool) -> u32 {
        match (self, executable) {
            (Sharing::Private, false) => 0o600,
            (Sharing::Private, true) => 0o700,
            (Sharing::Shared, false) => 0o644,
            (Sharing::Shared, true) => 0o755,
        }
    }

    /// Mode for a directory.
    pub fn dir_mode(self) -> u32 {
        match self {
            Sharing::Private => 0o700,
            Sharing::Shared => 0o755,
        }
    }
}

/// True if `mode` has the owner-exec bit.
pub fn is_owner_exec(mode: u32) -> bool {
    mode & 0o100 != 0
}

/// The process's file mode creation mask (`Umask:` of `/proc/self/status`, Linux 4.7 and
/// later), read once; `None` if it cannot be read. strata never changes its umask.
pub fn umask() -> Option<u32> {
    static UMASK: std::sync::OnceLock<Option<u32>> = std::sync::OnceLock::new();
    *UMASK.get_or_init(|| {
        let status = super::read_proc(std::path::Path::new("/proc/self/status")).ok()?;
        let line = status.lines().find_map(|l| l.strip_prefix("Umask:"))?;
        u32::from_str_radix(line.trim(), 8).ok()
    })
}

/// True if a file or directory created with permission bits `mode` (0o777 at most) gets
/// exactly `mode`: the umask is known and clears none of its bits. Then no `chmod` is
/// needed after the create (the caller knows that no setgid parent adds a bit).
pub fn umask_keeps(mode: u32) -> bool {
    mode & !0o777 == 0 && umask().is_some_and(|mask| mode & mask == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes() {
        assert_eq!(Sharing::Private.file_mode(true), 0o700);
        assert_eq!(Sharing::Shared.file_mode(false), 0o644);
        assert_eq!(Sharing::Shared.dir_mode(), 0o755);
        assert!(is_owner_exec(0o4755));
        assert!(!is_owner_exec(0o644));
    }

    #[test]
    fn the_umask_is_read_and_keeps_only_the_bits_it_does_not_clear() {
        let mask = umask().expect("Linux has Umask: in /proc/self/status");
        assert!(mask <= 0o777, "{mask:o}");
        assert_eq!(umask_keeps(0o755), 0o755 & mask == 0);
        assert!(!umask_keeps(0o4755), "special bits always need a chmod");
    }
}
