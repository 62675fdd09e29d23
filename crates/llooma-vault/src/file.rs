//! The instance secret file: read it, create it on first start, replace it
//! when rotating. Files are written with mode 0600 and never half-written.

use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read as _, Write as _};
use std::path::{Path, PathBuf};

use zeroize::Zeroizing;

use crate::vault::to_hex;
use crate::{InstanceSecret, MIN_INSTANCE_SECRET_LEN, VaultError};

/// A secret file holds one line of text; anything larger is a wrong path.
const MAX_FILE_LEN: u64 = 4096;

/// The secret file can be read by users other than its owner. Returned, not
/// logged: the caller decides how to report it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PermissionWarning {
    /// The file.
    pub path: PathBuf,
    /// Its permission bits (e.g. `0o644`).
    pub mode: u32,
}

impl fmt::Display for PermissionWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the instance secret file {} has mode {:03o}, so other users can read it; \
             restrict it with `chmod 600 {}`",
            self.path.display(),
            self.mode,
            self.path.display()
        )
    }
}

/// What [`load_or_create_secret_file`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretFileStatus {
    /// There was no file; a new secret was generated and written with mode 0600.
    Created,
    /// The file existed and was read.
    Loaded {
        /// Set when the file is readable by group or others.
        warning: Option<PermissionWarning>,
    },
}

/// Reads the instance secret from `path` (surrounding whitespace ignored).
/// The second value is set when the file is readable by group or others.
pub fn read_secret_file(
    path: &Path,
) -> Result<(InstanceSecret, Option<PermissionWarning>), VaultError> {
    let file = File::open(path).map_err(io_error("read", path))?;
    read_open_file(path, file)
}

/// Reads the instance secret file, or on first start creates it with mode
/// 0600 holding a new random secret ([`InstanceSecret::generate`]).
///
/// Creation is atomic: the content is written to a temporary file that is then
/// linked into place only if `path` still does not exist, so a crash never
/// leaves a partial file, and two processes starting at once agree on one
/// secret. The directory must exist.
pub fn load_or_create_secret_file(
    path: &Path,
) -> Result<(InstanceSecret, SecretFileStatus), VaultError> {
    match File::open(path) {
        Ok(file) => read_open_file(path, file).map(loaded),
        Err(err) if err.kind() == io::ErrorKind::NotFound => create_secret_file(path),
        Err(err) => Err(io_error("read", path)(err)),
    }
}

/// Writes `secret` to `path`, replacing any existing file atomically (temporary
/// file with mode 0600, then rename), e.g. to install a rotated secret.
pub fn write_secret_file(path: &Path, secret: &InstanceSecret) -> Result<(), VaultError> {
    let tmp = temp_path(path)?;
    create_new_private(&tmp, &file_contents(secret)).map_err(io_error("write", path))?;
    if let Err(err) = fs::rename(&tmp, path) {
        remove_best_effort(&tmp);
        return Err(io_error("replace", path)(err));
    }
    sync_parent_dir(path);
    Ok(())
}

fn loaded(
    (secret, warning): (InstanceSecret, Option<PermissionWarning>),
) -> (InstanceSecret, SecretFileStatus) {
    (secret, SecretFileStatus::Loaded { warning })
}

fn create_secret_file(path: &Path) -> Result<(InstanceSecret, SecretFileStatus), VaultError> {
    let secret = InstanceSecret::generate()?;
    let contents = file_contents(&secret);
    let tmp = temp_path(path)?;
    create_new_private(&tmp, &contents).map_err(io_error("create", path))?;
    // `hard_link` fails if `path` exists: an atomic "create if absent" of a
    // file that is already complete.
    let linked = fs::hard_link(&tmp, path);
    remove_best_effort(&tmp);
    let result = match linked {
        Ok(()) => Ok(()),
        Err(err) if err.kind() == io::ErrorKind::AlreadyExists => Err(err),
        // No hard links on this file system: create in place instead.
        Err(_) => create_new_private(path, &contents),
    };
    match result {
        Ok(()) => {
            sync_parent_dir(path);
            Ok((secret, SecretFileStatus::Created))
        }
        // Another process created it first: use its secret.
        Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {
            read_secret_file(path).map(loaded)
        }
        Err(err) => Err(io_error("create", path)(err)),
    }
}

fn read_open_file(
    path: &Path,
    file: File,
) -> Result<(InstanceSecret, Option<PermissionWarning>), VaultError> {
    let metadata = file.metadata().map_err(io_error("read", path))?;
    let warning = permission_warning(path, &metadata);

    let mut contents = Zeroizing::new(Vec::new());
    file.take(MAX_FILE_LEN + 1).read_to_end(&mut contents).map_err(io_error("read", path))?;
    if contents.len() as u64 > MAX_FILE_LEN {
        return Err(invalid(
            path,
            format!("it is larger than {MAX_FILE_LEN} bytes; it should hold one line of text"),
        ));
    }
    let text = std::str::from_utf8(&contents)
        .map_err(|_| invalid(path, "it is not UTF-8 text".to_owned()))?;
    let secret = InstanceSecret::from_env_value(text).map_err(|err| match err {
        VaultError::InstanceSecretTooShort { len } => invalid(
            path,
            format!(
                "it holds {len} bytes but an instance secret needs at least \
                 {MIN_INSTANCE_SECRET_LEN}; restore the file from backup, or if no secrets \
                 were stored yet, delete it so a new one is generated"
            ),
        ),
        other => other,
    })?;
    Ok((secret, warning))
}

#[cfg(unix)]
fn permission_warning(path: &Path, metadata: &fs::Metadata) -> Option<PermissionWarning> {
    use std::os::unix::fs::PermissionsExt as _;
    let mode = metadata.permissions().mode() & 0o777;
    (mode & 0o077 != 0).then(|| PermissionWarning { path: path.to_owned(), mode })
}

#[cfg(not(unix))]
fn permission_warning(_path: &Path, _metadata: &fs::Metadata) -> Option<PermissionWarning> {
    None
}

/// The file holds the secret's text and a newline.
fn file_contents(secret: &InstanceSecret) -> Zeroizing<Vec<u8>> {
    let bytes = secret.as_bytes();
    let mut contents = Zeroizing::new(Vec::with_capacity(bytes.len() + 1));
    contents.extend_from_slice(bytes);
    contents.push(b'\n');
    contents
}

/// Creates `path` (failing if it exists) with mode 0600 and writes `contents`
/// durably. On a write error the file is removed again.
fn create_new_private(path: &Path, contents: &[u8]) -> io::Result<()> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    if let Err(err) = file.write_all(contents).and_then(|()| file.sync_all()) {
        drop(file);
        remove_best_effort(path);
        return Err(err);
    }
    Ok(())
}

/// A fresh name next to `path`, so a rename stays on one file system.
fn temp_path(path: &Path) -> Result<PathBuf, VaultError> {
    let Some(name) = path.file_name() else {
        return Err(invalid(path, "the path has no file name".to_owned()));
    };
    let mut random = [0u8; 8];
    getrandom::fill(&mut random).map_err(VaultError::Random)?;
    let tmp_name = format!(".{}.{}.tmp", name.to_string_lossy(), to_hex(&random));
    Ok(path.with_file_name(tmp_name))
}

/// Cleanup of a temporary file; failing to remove it changes nothing about
/// the outcome, so the error is not reported.
fn remove_best_effort(path: &Path) {
    let _ignored = fs::remove_file(path);
}

/// Makes a rename or link in the directory durable. Best effort: the file
/// itself is already complete, and some platforms cannot sync a directory.
fn sync_parent_dir(path: &Path) {
    #[cfg(unix)]
    {
        let parent = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        if let Ok(dir) = File::open(parent) {
            let _ignored = dir.sync_all();
        }
    }
    #[cfg(not(unix))]
    let _ = path;
}

fn io_error(action: &'static str, path: &Path) -> impl FnOnce(io::Error) -> VaultError {
    move |error| VaultError::SecretFileIo { action, path: path.to_owned(), error }
}

fn invalid(path: &Path, reason: String) -> VaultError {
    VaultError::InvalidSecretFile { path: path.to_owned(), reason }
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    #[test]
    fn group_readable_file_yields_a_warning_with_advice() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret");
        fs::write(&path, "a".repeat(40)).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o640)).unwrap();

        let (_, status) = load_or_create_secret_file(&path).unwrap();
        let SecretFileStatus::Loaded { warning: Some(warning) } = status else {
            panic!("expected a warning, got {status:?}");
        };
        assert_eq!(warning.mode, 0o640);
        assert!(warning.to_string().contains("chmod 600"), "{warning}");
    }

    #[test]
    fn private_file_yields_no_warning() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret");
        fs::write(&path, "a".repeat(40)).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
        let (_, warning) = read_secret_file(&path).unwrap();
        assert_eq!(warning, None);
    }

    #[test]
    fn short_or_binary_files_are_refused_without_echoing_content() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret");

        fs::write(&path, "hunter2\n").unwrap();
        let msg = read_secret_file(&path).unwrap_err().to_string();
        assert!(msg.contains("at least 32"), "{msg}");
        assert!(!msg.contains("hunter2"), "{msg}");

        fs::write(&path, [0xffu8; 40]).unwrap();
        let err = read_secret_file(&path).unwrap_err();
        assert!(matches!(err, VaultError::InvalidSecretFile { .. }), "{err}");

        fs::write(&path, vec![b'a'; 5000]).unwrap();
        let err = read_secret_file(&path).unwrap_err();
        assert!(err.to_string().contains("larger than"), "{err}");
    }

    #[test]
    fn missing_directory_is_an_io_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("no-such-dir").join("secret");
        let err = load_or_create_secret_file(&path).unwrap_err();
        assert!(matches!(err, VaultError::SecretFileIo { .. }), "{err}");
        assert!(err.to_string().contains("no-such-dir"), "{err}");
    }

    #[test]
    fn creation_leaves_no_temporary_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret");
        load_or_create_secret_file(&path).unwrap();
        write_secret_file(&path, &InstanceSecret::generate().unwrap()).unwrap();
        let names: Vec<_> =
            fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, vec![std::ffi::OsString::from("secret")]);
    }
}
