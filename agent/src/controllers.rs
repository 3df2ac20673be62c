//! The region's controllers an agent dials (EINSORA_AGENT_CONTROLLER): one `host:port`, or
//! several separated by commas where a region has a standby. Only the controller leading the
//! region serves machines, so the agent tries them in turn until one does.

use std::fmt;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Controllers(Vec<String>);

impl Controllers {
    /// The one controller the machine joined through.
    pub fn joined(addr: String) -> Controllers {
        Controllers(vec![addr])
    }

    /// `host:port[,host:port…]`; the error names the entry that isn't one.
    pub fn parse(text: &str) -> Result<Controllers, String> {
        let mut all = Vec::new();
        for entry in text.split(',').map(str::trim) {
            let well_formed = match entry.rsplit_once(':') {
                _ if entry.parse::<std::net::SocketAddr>().is_ok() => true,
                Some((host, port)) => !host.is_empty() && port.parse::<u16>().is_ok(),
                None => false,
            };
            if !well_formed {
                return Err(format!("is not host:port[,host:port…] (`{entry}` isn't)"));
            }
            if !all.iter().any(|known| known == entry) {
                all.push(entry.to_owned());
            }
        }
        Ok(Controllers(all))
    }

    pub fn all(&self) -> &[String] {
        &self.0
    }

    /// The one after `at`, in turn.
    pub fn next_after(&self, at: usize) -> usize {
        (at + 1) % self.0.len().max(1)
    }
}

impl fmt::Display for Controllers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_is_read_in_order_once_each_and_a_bad_entry_is_named() {
        let list = Controllers::parse("ctl-a:7003, 10.0.0.2:7003,ctl-a:7003,[::1]:7003").unwrap();
        assert_eq!(list.all(), ["ctl-a:7003", "10.0.0.2:7003", "[::1]:7003"]);
        assert_eq!(list.next_after(0), 1);
        assert_eq!(list.next_after(2), 0);
        assert_eq!(list.to_string(), "ctl-a:7003,10.0.0.2:7003,[::1]:7003");
        for (bad, named) in [
            ("ctl-a", "`ctl-a`"),
            ("a:1,:7003", "`:7003`"),
            ("a:1,", "``"),
            ("b:99999", "`b:99999`"),
        ] {
            let why = Controllers::parse(bad).unwrap_err();
            assert!(why.contains(named), "{bad}: {why}");
        }
    }
}
