//! Validation of ZooKeeper paths, with precise errors.

use crate::error::{Error, Result};

/// Checks that `path` is a usable lock path: absolute, no empty, `.` or `..` segment, no
/// trailing `/`, no NUL or other control characters, and outside the reserved `/zookeeper` subtree.
///
/// ```
/// assert!(zklock::validate_path("/locks/a").is_ok());
/// assert!(zklock::validate_path("locks/a").is_err());
/// assert!(zklock::validate_path("/locks//a").is_err());
/// assert!(zklock::validate_path("/zookeeper/quota").is_err());
/// ```
pub fn validate_path(path: &str) -> Result<()> {
    if path.is_empty() {
        return Err(Error::invalid("path is empty"));
    }
    if !path.starts_with('/') {
        return Err(Error::invalid(format!(
            "path {path:?} is not absolute (must start with '/')"
        )));
    }
    if path == "/" {
        return Err(Error::invalid(
            "path \"/\" is the root: a lock needs its own node",
        ));
    }
    if path.ends_with('/') {
        return Err(Error::invalid(format!("path {path:?} ends with '/'")));
    }
    if let Some(c) = path
        .chars()
        .find(|c| c.is_control() || matches!(*c, '\u{fff0}'..='\u{ffff}'))
    {
        return Err(Error::invalid(format!(
            "path {path:?} contains the forbidden character {:?}",
            c
        )));
    }
    for seg in path[1..].split('/') {
        match seg {
            "" => {
                return Err(Error::invalid(format!(
                    "path {path:?} contains an empty segment (\"//\")"
                )))
            }
            "." | ".." => {
                return Err(Error::invalid(format!(
                    "path {path:?} contains a relative segment {seg:?}"
                )))
            }
            _ => {}
        }
    }
    if path == "/zookeeper" || path.starts_with("/zookeeper/") {
        return Err(Error::invalid(format!(
            "path {path:?} is inside the reserved /zookeeper subtree"
        )));
    }
    Ok(())
}

/// The parent of a valid path ("/" for a top-level node).
/// The last segment of a path.
pub(crate) fn name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or_default()
}

pub(crate) fn parent(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &path[..i],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_good_paths() {
        for p in ["/a", "/a/b", "/locks/x-1", "/zookeeperish", "/a/zookeeper"] {
            validate_path(p).unwrap();
        }
    }

    #[test]
    fn rejects_bad_paths_with_reason() {
        let cases = [
            ("", "empty"),
            ("a/b", "absolute"),
            ("/", "root"),
            ("/a/", "ends with"),
            ("/a//b", "empty segment"),
            ("/a/./b", "relative"),
            ("/a/..", "relative"),
            ("/a\0b", "forbidden"),
            ("/zookeeper", "reserved"),
            ("/zookeeper/config", "reserved"),
        ];
        for (p, why) in cases {
            let e = validate_path(p).unwrap_err().to_string();
            assert!(e.contains(why), "{p:?}: {e}");
        }
    }

    #[test]
    fn parent_of() {
        assert_eq!(parent("/a"), "/");
        assert_eq!(parent("/a/b/c"), "/a/b");
    }
}
