//! Turns the raw catalog into domain types, collecting every problem rather than stopping at the
//! first, so an operator fixes a broken file in one pass.

mod class;
mod image;

use std::fmt::Display;
use std::str::FromStr;

use super::Catalog;
use super::error::Problem;
use super::raw::RawCatalog;
use crate::driver::{self, DriverInfo};
use crate::region::Region;
use crate::words::UnknownWord;

pub(super) fn validate(raw: RawCatalog) -> Result<Catalog, Vec<Problem>> {
    let mut p = Problems::default();
    let regions = regions(&raw.regions, &mut p);
    let drivers = drivers(&raw.drivers, &mut p);
    let class_names: Vec<String> = raw.classes.iter().map(|c| c.name.clone()).collect();
    let classes = class::classes(raw.classes, &regions, &mut p);
    let images = image::images(raw.images, &drivers, &class_names, &classes, &mut p);
    if p.0.is_empty() {
        Ok(Catalog {
            regions,
            drivers,
            classes,
            images,
        })
    } else {
        Err(p.0)
    }
}

fn regions(raw: &[String], p: &mut Problems) -> Vec<Region> {
    if raw.is_empty() {
        p.add(
            "regions",
            "lists no regions; the catalog needs at least one, and the first is the default",
        );
    }
    let mut out: Vec<Region> = Vec::new();
    for name in raw {
        match Region::new(name) {
            Err(e) => p.add(
                &entry("region", name),
                format!("is not a valid region name: {}", e.problem),
            ),
            Ok(region) if out.contains(&region) => {
                p.add(&entry("region", name), "is listed more than once")
            }
            Ok(region) => out.push(region),
        }
    }
    out
}

fn drivers(raw: &[String], p: &mut Problems) -> Vec<&'static DriverInfo> {
    let mut out: Vec<&'static DriverInfo> = Vec::new();
    for name in raw {
        match driver::lookup(name) {
            None => p.add(&entry("driver", name), unknown_driver()),
            Some(d) if out.contains(&d) => {
                p.add(&entry("driver", name), "is listed more than once")
            }
            Some(d) => out.push(d),
        }
    }
    out
}

fn unknown_driver() -> String {
    let known: Vec<&str> = driver::all().iter().map(|d| d.name).collect();
    format!("is not a driver Einsora has (it has: {})", known.join(", "))
}

#[derive(Debug, Default)]
pub(super) struct Problems(Vec<Problem>);

impl Problems {
    pub(super) fn add(&mut self, entry: &str, problem: impl Into<String>) {
        self.0.push(Problem {
            entry: entry.to_owned(),
            problem: problem.into(),
        });
    }

    pub(super) fn count(&self) -> usize {
        self.0.len()
    }
}

/// `class "l40s-48gb"`: the way problems name an entry, bounded so a hostile file can't make
/// an error message arbitrarily long.
pub(super) fn entry(what: &str, name: &str) -> String {
    let name: String = name.chars().take(64).collect();
    format!("{what} {name:?}")
}

/// Names of classes, images and runtimes: they end up in reasons, labels and object names.
pub(super) fn check_name(p: &mut Problems, entry: &str, what: &str, name: &str) {
    let ok = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    if !ok {
        p.add(
            entry,
            format!(
                "{what} name {:?} is not valid: use 1 to 63 lowercase letters, digits, dots and \
                 hyphens, starting and ending with a letter or digit",
                name.chars().take(64).collect::<String>()
            ),
        );
    }
}

/// Parses a non-empty list of vocabulary words (kinds, accelerators), refusing repeats.
pub(super) fn words<T>(p: &mut Problems, entry: &str, field: &str, raw: &[String]) -> Vec<T>
where
    T: FromStr<Err = UnknownWord> + PartialEq + Display,
{
    if raw.is_empty() {
        p.add(entry, format!("{field} is empty"));
    }
    let mut out: Vec<T> = Vec::new();
    for word in raw {
        match word.parse::<T>() {
            Err(e) => p.add(entry, format!("{field}: {e}")),
            Ok(w) if out.contains(&w) => p.add(entry, format!("{field} lists {w} twice")),
            Ok(w) => out.push(w),
        }
    }
    out
}

pub(super) fn join<T: Display>(items: &[T]) -> String {
    let items: Vec<String> = items.iter().map(T::to_string).collect();
    items.join(", ")
}
