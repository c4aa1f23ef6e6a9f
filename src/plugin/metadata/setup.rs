//! The `metadata` directive's Corefile syntax, as CoreDNS 1.14.7 reads it: `metadata
//! [ZONES...]`, without a block, once per server block. Without zones, the block's own.

use std::sync::Arc;

use hickory_proto::rr::Name;

use crate::chain::{BlockSettings, Configured, SetupCtx};
use crate::corefile::{CorefileError, Directive, normalize_zone};

/// `metadata`, as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataConfig {
    /// The zones whose questions get metadata; empty: the block's zones.
    pub zones: Vec<Name>,
}

/// The `metadata` directive's setup (once per block).
pub fn setup(d: &Directive, ctx: &SetupCtx<'_>) -> Result<Arc<dyn Configured>, CorefileError> {
    ctx.refuse_twice(d)?;
    d.expect_no_block()?;
    let mut zones = Vec::with_capacity(d.args.len());
    for a in &d.args {
        let zone = normalize_zone(&a.text).map_err(|e| d.error_at(a, format!("metadata: {e}")))?;
        let name = Name::from_ascii(&zone)
            .map_err(|e| d.error_at(a, format!("metadata: '{}' is not a zone: {e}", a.text)))?;
        zones.push(name.to_lowercase());
    }
    Ok(Arc::new(MetadataConfig { zones }))
}

impl Configured for MetadataConfig {
    fn configure(&self, settings: &mut BlockSettings) {
        settings.metadata = Some(self.zones.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<MetadataConfig, String> {
        let c = crate::chain::set_up(text, setup)?;
        let any: &dyn std::any::Any = c.as_ref();
        Ok(any.downcast_ref::<MetadataConfig>().unwrap().clone())
    }

    #[test]
    fn zones_or_the_blocks() {
        assert!(parse("metadata").unwrap().zones.is_empty());
        assert_eq!(
            parse("metadata Cluster.Local 10.in-addr.arpa").unwrap().zones,
            [
                Name::from_ascii("cluster.local.").unwrap(),
                Name::from_ascii("10.in-addr.arpa.").unwrap()
            ]
        );
        let block = parse("metadata {\n zones x\n}").unwrap_err();
        assert!(block.contains("Corefile:2"), "{block}");
        let bad = parse("metadata ..").unwrap_err();
        assert!(bad.contains("Corefile:2"), "{bad}");
    }
}
