//! The `timeouts` directive's Corefile syntax (see this folder's README), parsed into a
//! [`TimeoutsConfig`], and its [`Configured`] impl: what the configured directive sets for its
//! block.

use std::sync::Arc;
use std::time::Duration;

use crate::chain::{BlockSettings, Configured, SetupCtx, StreamTimeouts};
use crate::corefile::{CorefileError, Directive, parse_duration};

/// The shortest and the longest timeout CoreDNS accepts.
const SHORTEST: Duration = Duration::from_secs(1);
const LONGEST: Duration = Duration::from_secs(24 * 3600);

/// A block's `timeouts`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeoutsConfig(pub StreamTimeouts);

/// The `timeouts` directive's setup: a block of `read|write|idle DURATION` (1 s to 24 h; a bare
/// number is seconds) and `maxtcpqueries N` (a positive number, or -1 for unlimited), at least
/// one of them, once per server block.
pub fn setup(d: &Directive, ctx: &SetupCtx<'_>) -> Result<Arc<dyn Configured>, CorefileError> {
    ctx.refuse_twice(d)?;
    d.args().expect_none()?;
    let mut t = StreamTimeouts::default();
    for opt in &d.block {
        let arg = d.option_arg(opt)?;
        let name = opt.name.text.as_str();
        if name == "maxtcpqueries" {
            t.max_queries = match arg.text.parse::<i64>() {
                Ok(-1) => None,
                Ok(n) if n > 0 => Some(usize::try_from(n).unwrap_or(usize::MAX)),
                _ => {
                    return Err(d.error_at(
                        arg,
                        format!(
                            "maxtcpqueries: '{}' needs to be -1 (unlimited) or a positive number",
                            arg.text
                        ),
                    ));
                }
            };
            continue;
        }
        let slot = match name {
            "read" => &mut t.read,
            "write" => &mut t.write,
            "idle" => &mut t.idle,
            other => {
                return Err(d.error_at(
                    &opt.name,
                    format!("unknown option '{other}' (read, write, idle or maxtcpqueries)"),
                ));
            }
        };
        // CoreDNS reads a bare number as seconds.
        let text = if arg.text.bytes().all(|b| b.is_ascii_digit()) {
            format!("{}s", arg.text)
        } else {
            arg.text.clone()
        };
        match parse_duration(&text) {
            Some(v) if (SHORTEST..=LONGEST).contains(&v) => *slot = Some(v),
            Some(_) => {
                return Err(d.error_at(
                    arg,
                    format!("{name}: '{}' needs to be between 1 second and 24 hours", arg.text),
                ));
            }
            None => {
                return Err(d.error_at(
                    arg,
                    format!("{name}: '{}' is not a duration (e.g. 10s, 1m)", arg.text),
                ));
            }
        }
    }
    if d.block.is_empty() {
        return Err(d.error(
            "a timeouts block with no timeouts: set read, write, idle or maxtcpqueries, or remove it",
        ));
    }
    Ok(Arc::new(TimeoutsConfig(t)))
}

impl Configured for TimeoutsConfig {
    fn configure(&self, settings: &mut BlockSettings) {
        settings.listener.stream = Some(self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<StreamTimeouts, String> {
        let c = crate::chain::set_up(text, setup)?;
        let mut s = BlockSettings::default();
        c.configure(&mut s);
        Ok(s.listener.stream.unwrap())
    }

    #[test]
    fn options_bounds_and_errors() {
        let t = parse("timeouts {\n read 10s\n write 20\n idle 1m\n maxtcpqueries 128\n}").unwrap();
        assert_eq!(t.read, Some(Duration::from_secs(10)));
        assert_eq!(t.write, Some(Duration::from_secs(20)));
        assert_eq!(t.idle, Some(Duration::from_secs(60)));
        assert_eq!(t.max_queries, Some(128));
        assert_eq!(
            parse("timeouts {\n maxtcpqueries -1\n}").unwrap().max_queries,
            None
        );
        for (bad, says) in [
            (
                "timeouts",
                "Corefile:2: timeouts: a timeouts block with no timeouts",
            ),
            ("timeouts {\n}", "no timeouts"),
            (
                "timeouts {\n read 500ms\n}",
                "Corefile:3: timeouts: read: '500ms' needs to be between 1 second and 24 hours",
            ),
            ("timeouts {\n idle 25h\n}", "between 1 second and 24 hours"),
            ("timeouts {\n write soon\n}", "is not a duration"),
            (
                "timeouts {\n maxtcpqueries 0\n}",
                "-1 (unlimited) or a positive number",
            ),
            (
                "timeouts {\n maxtcpqueries -2\n}",
                "-1 (unlimited) or a positive number",
            ),
            (
                "timeouts {\n linger 5s\n}",
                "Corefile:3: timeouts: unknown option 'linger'",
            ),
            ("timeouts {\n read\n}", "read takes exactly one argument"),
            ("timeouts 5s {\n read 5s\n}", "Corefile:2"),
        ] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
