//! What a configured `log` directive holds once parsed (`setup.rs` reads the Corefile into it): the
//! names it logs, its format ([`COMMON_FORMAT`] by default) and the response classes; what the
//! observer (`handler.rs`) logs with.

use hickory_proto::op::ResponseCode;

/// CoreDNS's default (common) format.
pub const COMMON_FORMAT: &str = "{remote}:{port} - {>id} \"{type} {class} {name} {proto} {size} {>do} {>bufsize}\" {rcode} {>rflags} {rsize} {duration}";

/// Which answers are logged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Classes {
    /// NOERROR with records (and NODATA).
    pub success: bool,
    /// NXDOMAIN.
    pub denial: bool,
    /// Other rcodes.
    pub error: bool,
}

impl Classes {
    pub(super) const ALL: Self = Self {
        success: true,
        denial: true,
        error: true,
    };

    /// True when an answer with `rcode` is logged; `nodata` is a NOERROR without answer
    /// records, which CoreDNS classes as a denial.
    pub fn includes(&self, rcode: ResponseCode, nodata: bool) -> bool {
        match rcode {
            ResponseCode::NoError if nodata => self.denial,
            ResponseCode::NoError => self.success,
            ResponseCode::NXDomain => self.denial,
            _ => self.error,
        }
    }
}

/// `log` configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogConfig {
    /// Names (zones) whose queries are logged; empty means all.
    pub names: Vec<String>,
    /// The format, with CoreDNS placeholders.
    pub format: String,
    /// Which answers.
    pub classes: Classes,
}
