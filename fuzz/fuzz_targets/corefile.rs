//! The Corefile parser and configuration checks on arbitrary text: errors, never panics.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let path = Path::new("/nonexistent-fuzz-dir/Corefile");
        if let Ok(cf) = cluster_dns::corefile::Corefile::parse_str(text, path) {
            let _ = cluster_dns::config::Config::from_corefile(&cf, path, 53);
        }
    }
});
