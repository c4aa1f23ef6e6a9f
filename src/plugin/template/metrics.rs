//! CoreDNS's template families: `coredns_template_matches_total{server,zone,view,class,type}`,
//! `coredns_template_template_failures_total{server,zone,view,class,type,section,template}` and
//! `coredns_template_rr_failures_total{...same}`. Every label comes from the Corefile (the
//! template's zone, class, type and text), never from the question.

use prometheus::{IntCounterVec, Opts, Registry};

/// The template families. Cheap to clone.
#[derive(Debug, Clone)]
pub struct TemplateMetrics {
    /// Questions a template answered.
    pub matches: IntCounterVec,
    /// Templates that failed to render.
    pub template_failures: IntCounterVec,
    /// Rendered lines that are not records.
    pub rr_failures: IntCounterVec,
}

impl crate::telemetry::Families for TemplateMetrics {
    fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        let failure_labels = ["server", "zone", "view", "class", "type", "section", "template"];
        let matches = IntCounterVec::new(
            Opts::new(
                "coredns_template_matches_total",
                "Counter of template regex matches.",
            ),
            &["server", "zone", "view", "class", "type"],
        )?;
        let template_failures = IntCounterVec::new(
            Opts::new(
                "coredns_template_template_failures_total",
                "Counter of go template failures.",
            ),
            &failure_labels,
        )?;
        let rr_failures = IntCounterVec::new(
            Opts::new(
                "coredns_template_rr_failures_total",
                "Counter of mis-templated RRs.",
            ),
            &failure_labels,
        )?;
        crate::telemetry::register_all(
            registry,
            vec![
                Box::new(matches.clone()),
                Box::new(template_failures.clone()),
                Box::new(rr_failures.clone()),
            ],
        )?;
        Ok(Self {
            matches,
            template_failures,
            rr_failures,
        })
    }
}
