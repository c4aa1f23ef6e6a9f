//! [`Fallthrough`]: which names a plugin's `fallthrough [ZONES...]` hands to the next plugin
//! (`hosts`, `file`), as CoreDNS's `fall` does: none without the option, every name with it
//! bare, the names in its zones otherwise.

use hickory_proto::rr::Name;

/// A plugin's `fallthrough` zones.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fallthrough(Option<Vec<Name>>);

impl Fallthrough {
    /// From the option as parsed: `None` off; an empty list for every name. Zones that are not
    /// names are left out (setup has checked them).
    pub fn new(zones: Option<&[String]>) -> Self {
        Self(zones.map(|zs| {
            zs.iter()
                .filter_map(|z| Name::from_ascii(z).ok())
                .map(|n| n.to_lowercase())
                .collect()
        }))
    }

    /// True when `name` goes to the next plugin.
    pub fn covers(&self, name: &Name) -> bool {
        match &self.0 {
            None => false,
            Some(zones) => zones.is_empty() || zones.iter().any(|z| z.zone_of(name)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_every_name_or_its_zones() {
        let n = |s: &str| Name::from_ascii(s).unwrap();
        assert!(!Fallthrough::new(None).covers(&n("a.example.")));
        assert!(Fallthrough::new(Some(&[])).covers(&n("a.example.")));
        let f = Fallthrough::new(Some(&["Example.".to_owned()]));
        assert!(f.covers(&n("a.EXAMPLE.")) && !f.covers(&n("a.example.net.")));
    }
}
