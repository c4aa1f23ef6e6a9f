//! The tests of the `errors` observer (`handler.rs`), on configurations its setup (`setup.rs`)
//! parses: a file of their own, so that the handler itself never imports the setup.

use std::path::Path;

use super::super::setup::parse;
use super::*;
use crate::corefile::Corefile;
use crate::corefile::CorefileError;

fn cfg(body: &str) -> Result<ErrorsConfig, CorefileError> {
    let cf = Corefile::parse_str(&format!(".:53 {{\n{body}\n}}\n"), Path::new("Corefile"))?;
    parse(&cf.blocks[0].directives[0])
}

#[test]
fn syntax() {
    assert!(cfg(" errors").unwrap().consolidate.is_empty());
    let c = cfg(
        " errors {\n  stacktrace\n  consolidate 30s \"^2 .* no upstream\" warning\n  consolidate 5m .*\n }",
    )
    .unwrap();
    assert_eq!(c.consolidate.len(), 2);
    assert_eq!(c.consolidate[0].level, Level::Warning);
    assert_eq!(c.consolidate[1].period, Duration::from_secs(300));
    assert!(!c.consolidate[0].show_first);
    let c = cfg(" errors {\n  consolidate 5m \".* i/o timeout$\" warning show_first\n  consolidate 30s x show_first\n }")
        .unwrap();
    assert!(c.consolidate[0].show_first && c.consolidate[0].level == Level::Warning);
    assert!(c.consolidate[1].show_first && c.consolidate[1].level == Level::Error);
    for (bad, want) in [
        (" errors extra", "Corefile:2"),
        (" errors {\n  consolidate soon .*\n }", "Corefile:3"),
        (
            " errors {\n  consolidate 30s (\n }",
            "not a valid regular expression",
        ),
        (" errors {\n  consolidate 30s .* loud\n }", "not a level"),
        (
            " errors {\n  consolidate 30s .* show_first warning\n }",
            "unexpected argument 'warning'",
        ),
        (
            " errors {\n  consolidate 30s .* error show_first x\n }",
            "Corefile:3",
        ),
        (" errors {\n  frob\n }", "unknown property"),
    ] {
        let e = cfg(bad).unwrap_err().to_string();
        assert!(e.contains(want), "{bad}: {e}");
    }
    assert_eq!(humantime_secs(Duration::from_secs(300)), "5m0s");
}

#[test]
fn consolidated_failures_are_counted_not_logged() {
    let log = ErrorLog::new(&cfg(" errors {\n  consolidate 30s \"no upstream\"\n }").unwrap());
    let name = Name::from_ascii("example.org.").unwrap();
    log.report(
        ResponseCode::ServFail,
        &name,
        RecordType::A,
        "no upstream answered",
    );
    log.report(
        ResponseCode::ServFail,
        &name,
        RecordType::A,
        "no upstream answered",
    );
    log.report(
        ResponseCode::Refused,
        &name,
        RecordType::A,
        "too many queries in flight",
    );
    assert_eq!(log.pending(), [2]);
}
