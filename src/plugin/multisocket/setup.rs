//! The `multisocket` directive's Corefile syntax (see this folder's README), parsed into a
//! [`MultisocketConfig`], and its [`Configured`] impl: what the configured directive sets for its
//! block.

use std::sync::Arc;

use crate::chain::{BlockSettings, Configured, SetupCtx};
use crate::corefile::{CorefileError, Directive};

/// The most sockets CoreDNS accepts.
pub const MAX_SOCKETS: usize = 1024;

/// A block's `multisocket`: the socket count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MultisocketConfig(pub usize);

/// `multisocket [NUM_SOCKETS]`: 1 to 1024; without it, one per CPU this process may use
/// (CoreDNS's GOMAXPROCS). Once per server block.
pub fn setup(d: &Directive, ctx: &SetupCtx<'_>) -> Result<Arc<dyn Configured>, CorefileError> {
    ctx.refuse_twice(d)?;
    d.expect_no_block()?;
    let mut args = d.args();
    let n = match args.next() {
        None => std::thread::available_parallelism().map_or(1, usize::from),
        Some(t) => t
            .text
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=MAX_SOCKETS).contains(n))
            .ok_or_else(|| {
                d.error_at(
                    t,
                    format!("'{}' is not a number of sockets from 1 to {MAX_SOCKETS}", t.text),
                )
            })?,
    };
    args.expect_none()?;
    Ok(Arc::new(MultisocketConfig(n)))
}

impl Configured for MultisocketConfig {
    fn configure(&self, settings: &mut BlockSettings) {
        settings.listener.udp_sockets = Some(self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Option<usize>, String> {
        let c = crate::chain::set_up(text, setup)?;
        let mut s = BlockSettings::default();
        c.configure(&mut s);
        Ok(s.listener.udp_sockets)
    }

    #[test]
    fn counts_and_errors() {
        assert_eq!(parse("multisocket 5"), Ok(Some(5)));
        assert_eq!(parse("multisocket 1024"), Ok(Some(1024)));
        let cpus = std::thread::available_parallelism().map_or(1, usize::from);
        assert_eq!(parse("multisocket"), Ok(Some(cpus)));
        for (text, want) in [
            (
                "multisocket 0",
                "Corefile:2: multisocket: '0' is not a number of sockets from 1 to 1024",
            ),
            ("multisocket 1025", "from 1 to 1024"),
            ("multisocket many", "'many'"),
            ("multisocket 2 3", "Corefile:2"),
            ("multisocket {\n}", "Corefile:2"),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.contains(want), "{text}: {e}");
        }
    }
}
