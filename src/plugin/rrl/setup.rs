//! The `rrl` directive's Corefile syntax (errors at file:line), parsed into an [`RrlConfig`]
//! (`config.rs`), and its [`Configured`] impl: what the configured directive builds.
//!
//! ```text
//! rrl [ZONES...] {
//!     window SECONDS
//!     ipv4-prefix-length LENGTH
//!     ipv6-prefix-length LENGTH
//!     responses-per-second ALLOWANCE
//!     nodata-per-second ALLOWANCE
//!     nxdomains-per-second ALLOWANCE
//!     referrals-per-second ALLOWANCE
//!     errors-per-second ALLOWANCE
//!     slip-ratio N
//!     requests-per-second ALLOWANCE
//!     max-table-size SIZE
//!     report-only
//! }
//! ```

use std::sync::Arc;

use hickory_proto::rr::Name;

use super::config::RrlConfig;
use super::handler::Rrl;
use super::metrics::RrlMetrics;
use crate::chain::{BuildCtx, Built, Configured, SetupCtx};
use crate::corefile::{CorefileError, Directive, Token};

/// The largest `max-table-size` accepted: each account is about 60 bytes, so 10 million is
/// well under a gigabyte.
pub const MAX_TABLE_SIZE: usize = 10_000_000;

/// The largest `slip-ratio` (BIND's bound).
pub const MAX_SLIP: u32 = 10;

/// The longest `window`, in seconds (BIND's bound).
pub const MAX_WINDOW: u32 = 3600;

fn number<T: std::str::FromStr + PartialOrd + std::fmt::Display>(
    d: &Directive,
    opt: &Directive,
    range: (T, T),
) -> Result<T, CorefileError> {
    let t: &Token = d.option_arg(opt)?;
    match t.text.parse::<T>() {
        Ok(v) if v >= range.0 && v <= range.1 => Ok(v),
        _ => Err(d.error_at(
            t,
            format!(
                "{} '{}': expected a whole number from {} to {}",
                opt.name.text, t.text, range.0, range.1
            ),
        )),
    }
}

/// The `rrl` directive's setup. Once per block; every option at most once.
pub fn setup(d: &Directive, ctx: &SetupCtx<'_>) -> Result<Arc<dyn Configured>, CorefileError> {
    ctx.refuse_twice(d)?;
    let mut c = RrlConfig::default();
    let zones: Vec<String> = if d.args.is_empty() {
        ctx.zones.to_vec()
    } else {
        d.args
            .iter()
            .map(|t| crate::corefile::normalize_zone_or_cidr(&t.text).map_err(|e| d.error_at(t, e)))
            .collect::<Result<_, _>>()?
    };
    if !zones.is_empty() {
        c.zones = zones
            .iter()
            .map(|z| {
                Name::from_ascii(z)
                    .map(|n| n.to_lowercase())
                    .map_err(|_| d.error(format!("'{z}' is not a zone")))
            })
            .collect::<Result<_, _>>()?;
    }
    // Per-category allowances not written default to responses-per-second.
    let mut written: [Option<u32>; 6] = [None; 6];
    let mut seen: Vec<&str> = Vec::new();
    for opt in &d.block {
        let name = opt.name.text.as_str();
        if seen.contains(&name) {
            return Err(d.error_at(&opt.name, format!("{name} is given twice")));
        }
        let rate = |slot: usize, written: &mut [Option<u32>; 6]| -> Result<(), CorefileError> {
            written[slot] = Some(number(d, opt, (0, u32::MAX))?);
            Ok(())
        };
        match name {
            "window" => c.window = number(d, opt, (1, MAX_WINDOW))?,
            "ipv4-prefix-length" => c.ipv4_prefix = number(d, opt, (1, 32))?,
            "ipv6-prefix-length" => c.ipv6_prefix = number(d, opt, (1, 128))?,
            "responses-per-second" => rate(0, &mut written)?,
            "nodata-per-second" => rate(1, &mut written)?,
            "nxdomains-per-second" => rate(2, &mut written)?,
            "referrals-per-second" => rate(3, &mut written)?,
            "errors-per-second" => rate(4, &mut written)?,
            "requests-per-second" => rate(5, &mut written)?,
            "slip-ratio" => c.slip = number(d, opt, (0, MAX_SLIP))?,
            "max-table-size" => c.max_table = number(d, opt, (1, MAX_TABLE_SIZE))?,
            "report-only" => {
                if let Some(t) = opt.args.first() {
                    return Err(
                        d.error_at(t, format!("report-only takes no arguments, but has '{}'", t.text))
                    );
                }
                c.report_only = true;
            }
            other => {
                return Err(d.error_at(
                    &opt.name,
                    format!(
                        "unknown property '{other}' (expected window, ipv4-prefix-length, ipv6-prefix-length, responses-per-second, nodata-per-second, nxdomains-per-second, referrals-per-second, errors-per-second, slip-ratio, requests-per-second, max-table-size or report-only)"
                    ),
                ));
            }
        }
        if opt.has_block {
            return Err(d.error_at(&opt.name, format!("{name} takes no block")));
        }
        seen.push(name);
    }
    let responses = written[0].unwrap_or(0);
    for (slot, w) in written.iter().enumerate() {
        // requests-per-second has its own default (0), the others follow responses-per-second.
        c.rates[slot] = w.unwrap_or(if slot == 5 { 0 } else { responses });
    }
    Ok(Arc::new(c))
}

impl Configured for RrlConfig {
    fn build(&self, ctx: &BuildCtx<'_>) -> Built {
        let metrics = ctx.metrics.and_then(|m| m.families::<RrlMetrics>().ok());
        Built::Plugin(Arc::new(Rrl::new(self.clone(), metrics.as_ref(), ctx.server)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chain::set_up;

    fn config(text: &str) -> Result<RrlConfig, String> {
        set_up(text, setup).map(|c| {
            (c.as_ref() as &dyn std::any::Any)
                .downcast_ref::<RrlConfig>()
                .expect("an RrlConfig")
                .clone()
        })
    }

    #[test]
    fn defaults_follow_the_external_plugin() {
        let c = config("rrl").unwrap();
        assert_eq!(c, RrlConfig::default());
        assert_eq!(
            (c.window, c.ipv4_prefix, c.ipv6_prefix, c.max_table),
            (15, 24, 56, 100_000)
        );
        let c = config(
            "rrl example.org {\n responses-per-second 10\n errors-per-second 3\n requests-per-second 50\n}",
        )
        .unwrap();
        assert_eq!(c.rates, [10, 10, 10, 10, 3, 50]);
        assert_eq!(c.zones, vec![Name::from_ascii("example.org.").unwrap()]);
    }

    #[test]
    fn bad_options_name_their_line() {
        for (text, want) in [
            ("rrl {\n window 0\n}", "Corefile:3: rrl: window '0'"),
            ("rrl {\n slip-ratio 11\n}", "Corefile:3: rrl: slip-ratio '11'"),
            ("rrl {\n ipv4-prefix-length 33\n}", "ipv4-prefix-length '33'"),
            ("rrl {\n responses-per-second -1\n}", "responses-per-second '-1'"),
            ("rrl {\n max-table-size 0\n}", "max-table-size '0'"),
            ("rrl {\n bogus 1\n}", "Corefile:3: rrl: unknown property 'bogus'"),
            (
                "rrl {\n window 5\n window 6\n}",
                "Corefile:4: rrl: window is given twice",
            ),
            ("rrl {\n report-only yes\n}", "report-only takes no arguments"),
            (
                "rrl {\n window\n}",
                "Corefile:3: rrl: window takes exactly one argument",
            ),
        ] {
            let e = config(text).unwrap_err();
            assert!(e.contains(want), "{text}: {e}");
        }
    }
}
