//! The `view` directive's Corefile syntax: `view NAME { expr EXPRESSION ... }`, once per block;
//! every `expr` must hold.

use std::sync::Arc;

use super::expr::{Context, Expr};
use crate::chain::{BlockFilter, BlockSettings, Configured, SetupCtx};
use crate::corefile::{CorefileError, Directive};
use crate::proto::{Question, transport_label};

/// A block's `view`.
#[derive(Debug, Clone)]
pub struct ViewConfig {
    /// Its name.
    pub name: String,
    /// The expressions, all of which must hold.
    pub exprs: Vec<Expr>,
}

/// The `view` directive's setup.
pub fn setup(d: &Directive, ctx: &SetupCtx<'_>) -> Result<Arc<dyn Configured>, CorefileError> {
    ctx.refuse_twice(d)?;
    let mut args = d.args();
    let name = args.expect("a view name")?.text.clone();
    args.expect_none()?;
    let mut exprs = Vec::new();
    for opt in &d.block {
        match opt.name.text.as_str() {
            "expr" => {
                if opt.args.is_empty() {
                    return Err(opt.name.error("view: expr needs an expression"));
                }
                let text = opt
                    .args
                    .iter()
                    .map(|t| t.text.as_str())
                    .collect::<Vec<_>>()
                    .join(" ");
                exprs
                    .push(Expr::parse(&text).map_err(|e| opt.name.error(format!("view {name}: expr: {e}")))?);
            }
            other => {
                return Err(opt
                    .name
                    .error(format!("view: unknown option '{other}' (expected expr)")));
            }
        }
    }
    if exprs.is_empty() {
        return Err(d.error("view: expected a block with at least one 'expr EXPRESSION'"));
    }
    Ok(Arc::new(ViewConfig { name, exprs }))
}

impl BlockFilter for ViewConfig {
    fn admits(&self, q: &Question) -> bool {
        let name = q.name.to_string();
        let qtype = q.qtype.to_string();
        let ctx = Context {
            client_ip: q.client.ip(),
            port: q.client.port(),
            name: &name,
            qtype: &qtype,
            proto: transport_label(q.transport),
            metadata: q.metadata.as_ref(),
        };
        self.exprs.iter().all(|e| e.holds(&ctx))
    }

    fn name(&self) -> &str {
        &self.name
    }
}

impl Configured for ViewConfig {
    fn configure(&self, settings: &mut BlockSettings) {
        settings.filter = Some(Arc::new(self.clone()));
    }
}
