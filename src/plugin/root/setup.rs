//! The `root` directive's Corefile syntax (see this folder's README), parsed into a [`RootConfig`],
//! and its [`Configured`] impl: what the configured directive sets for its block.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::chain::{Configured, SetupCtx};
use crate::corefile::{CorefileError, Directive};

/// A block's `root`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RootConfig {
    /// The folder, as the server will read it.
    pub dir: PathBuf,
    /// Why it may not be what was meant (the folder does not exist yet), at its line.
    pub warning: Option<CorefileError>,
}

/// The `root` directive's setup: `root PATH`, once per server block, no block. A relative PATH
/// is read from the Corefile's folder.
pub fn setup(d: &Directive, ctx: &SetupCtx<'_>) -> Result<Arc<dyn Configured>, CorefileError> {
    ctx.refuse_twice(d)?;
    d.expect_no_block()?;
    let mut args = d.args();
    let path = args.expect("PATH, the folder relative file paths are read from")?;
    args.expect_none()?;
    let dir = if Path::new(&path.text).is_absolute() {
        PathBuf::from(&path.text)
    } else {
        ctx.dir.join(&path.text)
    };
    // As CoreDNS: a folder that does not exist (yet) is allowed, with a warning; one that
    // cannot be looked at is an error.
    let warning = match std::fs::metadata(&dir) {
        Ok(_) => None,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Some(d.error_at(path, format!("root path '{}' does not exist", dir.display())))
        }
        Err(e) => {
            return Err(d.error_at(
                path,
                format!("unable to access root path '{}': {e}", dir.display()),
            ));
        }
    };
    Ok(Arc::new(RootConfig { dir, warning }))
}

impl Configured for RootConfig {
    fn files_dir(&self) -> Option<&Path> {
        Some(&self.dir)
    }

    fn warnings(&self, _block: &[(&'static str, Arc<dyn Configured>)]) -> Vec<CorefileError> {
        self.warning.iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<RootConfig, String> {
        let c = crate::chain::set_up(text, setup)?;
        let any: &dyn std::any::Any = c.as_ref();
        Ok(any.downcast_ref::<RootConfig>().unwrap().clone())
    }

    #[test]
    fn the_folder_is_absolute_or_read_from_the_corefile_folder() {
        let tmp = std::env::temp_dir();
        let c = parse(&format!("root {}", tmp.display())).unwrap();
        assert_eq!(c.dir, tmp);
        assert_eq!(c.warning, None);
        let c = parse("root zones").unwrap();
        assert_eq!(c.dir, Path::new("./zones"));
        let w = c.warning.unwrap().to_string();
        assert!(
            w.contains("Corefile:2: root: root path './zones' does not exist"),
            "{w}"
        );
    }

    #[test]
    fn wrong_arguments_fail_at_their_line() {
        for (bad, says) in [
            ("root", "Corefile:2: root: expected PATH"),
            ("root /a /b", "Corefile:2: unexpected argument '/b' to 'root'"),
            ("root /tmp {\n}", "Corefile:2: root: takes no block"),
        ] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
