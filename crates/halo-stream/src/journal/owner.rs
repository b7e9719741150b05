//! The owner lock of a journal file: `FILE.lock` beside it, locked (`flock`) for as long as
//! a [`JsonlStore`](super::JsonlStore) has the journal open, and holding the owner's process
//! id for the message a second opener gets.

use std::fs::{File, OpenOptions};
use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
use std::path::{Path, PathBuf};

use fs4::{FileExt, TryLockError};
use halo_core::session::SessionError;

/// A held owner lock; dropping it removes the lock file and releases the lock.
#[derive(Debug)]
pub(super) struct Owner {
    path: PathBuf,
    /// Open for as long as the store lives: closing it releases the `flock`.
    _file: File,
}

/// The lock file of the journal at `journal`.
pub(super) fn lock_path(journal: &Path) -> PathBuf {
    let mut name = journal.file_name().unwrap_or_default().to_os_string();
    name.push(".lock");
    journal.with_file_name(name)
}

impl Owner {
    /// Takes the owner lock of `journal` for this process.
    ///
    /// # Errors
    /// [`SessionError::InUse`] naming the owner's process when another store (in this
    /// process or another) holds it; [`SessionError::Io`] when the lock file cannot be made
    /// (its folder is missing, say).
    pub(super) fn take(journal: &Path) -> Result<Owner, SessionError> {
        let path = lock_path(journal);
        let location = journal.display().to_string();
        let io = |what: &str, e: std::io::Error| SessionError::Io {
            location: location.clone(),
            message: format!("{what} {}: {e}", path.display()),
        };
        // A previous owner removes the file as it closes: a lock taken on a file that was
        // removed meanwhile protects nothing, so take it again on the new one.
        for _ in 0..8 {
            let mut file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)
                .map_err(|e| io("cannot open the lock file", e))?;
            match FileExt::try_lock(&file) {
                Ok(()) => {}
                Err(TryLockError::WouldBlock) => {
                    let mut text = String::new();
                    let _ = file.read_to_string(&mut text);
                    let holder = match text.trim().parse::<u32>() {
                        Ok(pid) => format!("process {pid}"),
                        Err(_) => "another process".to_string(),
                    };
                    return Err(SessionError::InUse {
                        location,
                        session: String::new(),
                        holder,
                        expires_at_ms: None,
                    });
                }
                Err(TryLockError::Error(e)) => return Err(io("cannot lock", e)),
            }
            if !still_at(&file, &path) {
                continue;
            }
            file.set_len(0)
                .and_then(|()| file.seek(SeekFrom::Start(0)))
                .and_then(|_| writeln!(file, "{}", std::process::id()))
                .map_err(|e| io("cannot write the owner into", e))?;
            return Ok(Owner { path, _file: file });
        }
        Err(io(
            "cannot take the lock (it was removed and made again eight times)",
            std::io::Error::other("busy"),
        ))
    }
}

impl Drop for Owner {
    fn drop(&mut self) {
        // Removed while still locked, so no other opener can lock this file after it is gone.
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Whether `path` still names the open `file`.
#[cfg(unix)]
fn still_at(file: &File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    match (file.metadata(), std::fs::metadata(path)) {
        (Ok(a), Ok(b)) => (a.dev(), a.ino()) == (b.dev(), b.ino()),
        _ => false,
    }
}

#[cfg(not(unix))]
fn still_at(_file: &File, path: &Path) -> bool {
    path.exists()
}
