//! Regions: every workload, machine and usage record has exactly one (the seeds' regions decision).

use std::fmt;
use std::str::FromStr;

/// A validated region name: 1–63 lowercase letters, digits and inner hyphens (a DNS label),
/// because region names end up in lease names and Kubernetes labels.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Region(String);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("region {name:?} is not valid: {problem}")]
pub struct InvalidRegion {
    pub name: String,
    pub problem: &'static str,
}

impl Region {
    /// The name of the lease the controller that reconciles this region holds (who leads it).
    pub fn controller_lease(&self) -> String {
        format!("controller:{self}")
    }

    pub fn new(name: &str) -> Result<Self, InvalidRegion> {
        let problem = if name.is_empty() {
            Some("it is empty")
        } else if name.len() > 63 {
            Some("it is longer than 63 characters")
        } else if !name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        {
            Some("use only lowercase letters, digits and hyphens")
        } else if name.starts_with('-') || name.ends_with('-') {
            Some("it must not start or end with a hyphen")
        } else {
            None
        };
        match problem {
            Some(problem) => Err(InvalidRegion {
                name: name.chars().take(80).collect(),
                problem,
            }),
            None => Ok(Region(name.to_owned())),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Region {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for Region {
    type Err = InvalidRegion;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Region::new(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_dns_labels_and_refuses_the_rest() {
        assert!(Region::new("local").is_ok());
        assert!(Region::new("eu-west-1").is_ok());
        for bad in ["", "Local", "-a", "a-", "a_b", "a b", &"x".repeat(64)] {
            assert!(Region::new(bad).is_err(), "{bad:?} accepted");
        }
    }
}
