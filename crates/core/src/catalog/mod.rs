//! The catalog: regions, compute classes, images and the drivers an installation enables.
//!
//! `catalog/catalog.yaml` at the repository root is built into the binary
//! ([`Catalog::builtin`]); an operator can replace it with their own file ([`Catalog::load`]).
//! The YAML is parsed into private serde types and validated into the plain domain types below,
//! so nothing outside this module depends on the file's shape.

mod error;
mod model;
mod raw;
mod validate;

#[cfg(test)]
mod tests;

use std::path::Path;

pub use error::{CatalogError, Problem};
pub use model::{ComputeClass, DEFAULT_DISK_GIB, DriverRef, Image, Runtime};

use crate::driver::DriverInfo;
use crate::region::Region;

const BUILTIN: &str = include_str!("../../../../catalog/catalog.yaml");

/// A validated catalog: every name it references exists, and every lookup below is unambiguous.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Catalog {
    regions: Vec<Region>,
    drivers: Vec<&'static DriverInfo>,
    classes: Vec<ComputeClass>,
    images: Vec<Image>,
}

impl Catalog {
    /// The catalog built into the binary. A unit test loads it, so it cannot fail at run time.
    pub fn builtin() -> Catalog {
        match Catalog::from_yaml(BUILTIN) {
            Ok(catalog) => catalog,
            Err(e) => panic!("the built-in catalog is invalid: {e}"),
        }
    }

    /// Parses and validates a catalog document.
    pub fn from_yaml(text: &str) -> Result<Catalog, CatalogError> {
        let raw: raw::RawCatalog =
            serde_yaml_ng::from_str(text).map_err(|e| CatalogError::Malformed {
                path: None,
                message: e.to_string(),
            })?;
        validate::validate(raw).map_err(|problems| CatalogError::Invalid {
            path: None,
            problems,
        })
    }

    /// Reads, parses and validates the catalog file at `path`; errors name the file.
    pub fn load(path: &Path) -> Result<Catalog, CatalogError> {
        let text = std::fs::read_to_string(path).map_err(|cause| CatalogError::Read {
            path: path.to_owned(),
            cause,
        })?;
        Catalog::from_yaml(&text).map_err(|e| e.at(path.to_owned()))
    }

    /// Every region, the default first.
    pub fn regions(&self) -> &[Region] {
        &self.regions
    }

    /// The region of workloads created without one.
    pub fn default_region(&self) -> &Region {
        &self.regions[0]
    }

    pub fn has_region(&self, region: &Region) -> bool {
        self.regions.contains(region)
    }

    /// The catalog's region called `name`, if it has one.
    pub fn region(&self, name: &str) -> Option<&Region> {
        self.regions.iter().find(|r| r.as_str() == name)
    }

    /// The drivers this installation enables, in catalog order.
    pub fn drivers(&self) -> &[&'static DriverInfo] {
        &self.drivers
    }

    /// The enabled driver called `name`; `None` for drivers Einsora has but this catalog
    /// doesn't enable.
    pub fn driver(&self, name: &str) -> Option<&'static DriverInfo> {
        self.drivers.iter().copied().find(|d| d.name == name)
    }

    pub fn classes(&self) -> &[ComputeClass] {
        &self.classes
    }

    pub fn class(&self, name: &str) -> Option<&ComputeClass> {
        self.classes.iter().find(|c| c.name() == name)
    }

    /// The classes offered in `region`, in catalog order; none for a region not in the catalog.
    pub fn classes_in<'a>(&'a self, region: &'a Region) -> impl Iterator<Item = &'a ComputeClass> {
        let known = self.has_region(region);
        self.classes
            .iter()
            .filter(move |c| known && c.offered_in(region))
    }

    pub fn images(&self) -> &[Image] {
        &self.images
    }

    pub fn image(&self, name: &str) -> Option<&Image> {
        self.images.iter().find(|i| i.name() == name)
    }

    /// The class of a Mac's GPU: the largest Apple class whose unified-memory tier the Mac's
    /// `unified_memory_bytes` holds.
    pub fn class_for_apple_memory(&self, unified_memory_bytes: u64) -> Option<&ComputeClass> {
        self.classes
            .iter()
            .filter_map(|c| Some((c, c.unified_memory_bytes()?)))
            .filter(|&(_, tier)| tier <= unified_memory_bytes)
            .max_by_key(|&(_, tier)| tier)
            .map(|(c, _)| c)
    }

    /// The NVIDIA or AMD class whose device models include `model`, as an agent reports it.
    /// Validation makes sure no two classes list the same model.
    pub fn class_for_device_model(&self, model: &str) -> Option<&ComputeClass> {
        self.classes.iter().find(|c| c.matches_device_model(model))
    }
}
