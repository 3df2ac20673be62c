//! An evaluator of the SBPL that [`super::Profile::render`] writes, for judging a profile where
//! there is no `sandbox-exec` (Linux CI, the stand-in `sandbox-exec`): it parses the profile,
//! refusing any construct outside the subset the renderer uses, and answers whether an
//! operation on a target would be allowed. Apple's rule: everything starts at the `default`
//! rule, and of the rules that match an operation, the last one decides.
//!
//! This is a model of the sandbox, not the sandbox: it shows the rules say what they mean to.
//! Whether macOS enforces them so is `scripts/mac-check`'s to show, on a Mac. Its assumptions,
//! from Apple's profiles in `/System/Library/Sandbox/Profiles`, not checked here: `subpath`
//! matches whole path components; several filters in one rule match when any does; `ip`
//! covers TCP and UDP; a UDP socket's implicit bind is judged as its send (`network-outbound`).
//! And what it can't see: macOS judges the resolved path of a file (a hard link, a firmlink, a
//! symlinked environment, `/var` for `/private/var`), the model the text it is given; a TCP
//! `listen` without a `bind` (an ephemeral port) is left to `network-inbound`.

use std::path::Path;

/// What an operation is done to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target<'a> {
    /// A file or directory (`file-*`, `process-exec`).
    Path(&'a Path),
    /// A socket's own address (`network-bind`, `network-inbound`).
    Local(Addr<'a>),
    /// The address a socket sends to or connects to (`network-outbound`).
    Remote(Addr<'a>),
    /// A signal's or process inspection's target: a process of the same sandbox or not.
    Process { same_sandbox: bool },
    /// A `sysctl` by name (`sysctl-read`).
    Sysctl(&'a str),
    /// A new socket's domain, `AF_UNIX` or `AF_INET` (`system-socket`).
    SocketDomain(&'a str),
    /// An IOKit user client's class (`iokit-open`).
    IoKit(&'a str),
    /// A Mach service's name (`mach-lookup`).
    MachService(&'a str),
    /// An operation without a target (`process-fork`, `sysctl-read`).
    Nothing,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Addr<'a> {
    Tcp(Host, u16),
    Udp(Host, u16),
    Unix(&'a Path),
}

/// What SBPL can tell of an IP address: this machine's loopback, or anything else.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Host {
    Localhost,
    Elsewhere,
}

/// The operations a profile may name (a closed list: `sandbox-exec` refuses a name it doesn't
/// know, and so does this model).
const OPERATIONS: &[&str] = &[
    "default",
    "process-fork",
    "process-exec",
    "process-info*",
    "signal",
    "file-read*",
    "file-read-data",
    "file-read-metadata",
    "file-write*",
    "file-write-data",
    "file-write-create",
    "file-write-unlink",
    "file-map-executable",
    "sysctl-read",
    "ipc-posix-shm",
    "ipc-posix-sem",
    "system-socket",
    "network*",
    "network-bind",
    "network-inbound",
    "network-outbound",
    "mach-lookup",
    "iokit-open",
    "iokit-get-properties",
];

/// A parsed profile.
#[derive(Debug)]
pub struct Rules {
    default_allows: bool,
    rules: Vec<Rule>,
}

#[derive(Debug)]
struct Rule {
    allow: bool,
    operations: Vec<String>,
    filters: Vec<Filter>,
}

#[derive(Debug, Clone)]
enum Filter {
    Subpath(String),
    Literal(String),
    Socket { local: bool, kind: SocketKind },
    SameSandbox,
    IoKitClass(String),
    GlobalName(String),
    SysctlName(String),
    SysctlPrefix(String),
    SocketDomain(String),
}

#[derive(Debug, Clone)]
enum SocketKind {
    /// `ip`, `tcp` or `udp`; `localhost` or `*`; a port (`None`: `*`).
    Ip {
        tcp: bool,
        udp: bool,
        localhost_only: bool,
        port: Option<u16>,
    },
    Unix(Box<Filter>),
}

/// An s-expression.
#[derive(Debug, Clone, PartialEq)]
enum Sexp {
    List(Vec<Sexp>),
    Symbol(String),
    Str(String),
}

/// What is wrong with a profile's text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("profile: {0}")]
pub struct ParseError(String);

fn bad<T>(what: impl Into<String>) -> Result<T, ParseError> {
    Err(ParseError(what.into()))
}

impl Rules {
    pub fn parse(text: &str) -> Result<Rules, ParseError> {
        let forms = read_all(text)?;
        let mut forms = forms.into_iter();
        if forms.next() != Some(Sexp::List(vec![sym("version"), Sexp::Symbol("1".into())])) {
            return bad("the first form must be (version 1)");
        }
        let mut default_allows = None;
        let mut rules = Vec::new();
        for (index, form) in forms.enumerate() {
            let Sexp::List(items) = form else {
                return bad(format!("a rule must be a list: {form:?}"));
            };
            let mut items = items.into_iter();
            let allow = match items.next() {
                Some(Sexp::Symbol(s)) if s == "allow" => true,
                Some(Sexp::Symbol(s)) if s == "deny" => false,
                other => return bad(format!("a rule starts with allow or deny: {other:?}")),
            };
            let mut operations = Vec::new();
            let mut filters = Vec::new();
            for item in items {
                match item {
                    Sexp::Symbol(op) if filters.is_empty() => operations.push(op),
                    Sexp::List(filter) => filters.push(filter_of(filter)?),
                    other => return bad(format!("unexpected {other:?} in a rule")),
                }
            }
            if operations.is_empty() {
                return bad("a rule names at least one operation");
            }
            if let Some(unknown) = operations
                .iter()
                .find(|o| !OPERATIONS.contains(&o.as_str()))
            {
                return bad(format!("unknown operation {unknown}"));
            }
            // Anywhere but first, `default` would be a rule matching everything, deciding last.
            if operations.iter().any(|o| o == "default") {
                if index != 0 || operations.len() != 1 || !filters.is_empty() {
                    return bad("(allow default) or (deny default) only as the first rule");
                }
                default_allows = Some(allow);
                continue;
            }
            rules.push(Rule {
                allow,
                operations,
                filters,
            });
        }
        let Some(default_allows) = default_allows else {
            return bad("no (allow default) or (deny default)");
        };
        Ok(Rules {
            default_allows,
            rules,
        })
    }

    /// The paths allow rules for `operation` name (the `subpath` and `literal` filters of each
    /// rule naming it or an operation under it), each with whether it is a whole subtree: what a
    /// stand-in sandbox mounts. Whether each is allowed in the end is [`Rules::allows`]'s.
    pub fn paths(&self, operation: &str) -> Vec<(&Path, bool)> {
        let mut out = Vec::new();
        for rule in self.rules.iter().filter(|r| r.allow) {
            if !rule.operations.iter().any(|o| names(o, operation)) {
                continue;
            }
            for filter in &rule.filters {
                match filter {
                    Filter::Subpath(p) => out.push((Path::new(p.as_str()), true)),
                    Filter::Literal(p) => out.push((Path::new(p.as_str()), false)),
                    _ => {}
                }
            }
        }
        out
    }

    /// Whether `operation` on `target` is allowed.
    pub fn allows(&self, operation: &str, target: Target<'_>) -> bool {
        self.rules
            .iter()
            .rev()
            .filter(|r| r.operations.iter().any(|o| names(o, operation)))
            .find(|r| r.filters.is_empty() || r.filters.iter().any(|f| f.matches(target)))
            .map_or(self.default_allows, |r| r.allow)
    }
}

/// Whether a rule's operation `pattern` names `op`: itself, the operations under it
/// (`ipc-posix-shm` covers `ipc-posix-shm-read-data`), or with a `*` every one it begins
/// (`file-read*` covers `file-read-data` and `file-read-metadata`).
fn names(pattern: &str, op: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => op.starts_with(prefix),
        None => op == pattern || op.strip_prefix(pattern).is_some_and(|r| r.starts_with('-')),
    }
}

fn sym(s: &str) -> Sexp {
    Sexp::Symbol(s.into())
}

fn filter_of(items: Vec<Sexp>) -> Result<Filter, ParseError> {
    let mut items = items.into_iter();
    let Some(Sexp::Symbol(head)) = items.next() else {
        return bad("a filter starts with its name");
    };
    let rest: Vec<Sexp> = items.collect();
    let one_string = |rest: &[Sexp]| match rest {
        [Sexp::Str(s)] => Ok(s.clone()),
        _ => bad(format!("({head} …) takes one string")),
    };
    match head.as_str() {
        "subpath" => Ok(Filter::Subpath(one_string(&rest)?)),
        "literal" | "path-literal" => Ok(Filter::Literal(one_string(&rest)?)),
        "global-name" => Ok(Filter::GlobalName(one_string(&rest)?)),
        "sysctl-name" => Ok(Filter::SysctlName(one_string(&rest)?)),
        "sysctl-name-prefix" => Ok(Filter::SysctlPrefix(one_string(&rest)?)),
        "target" if rest == [sym("same-sandbox")] => Ok(Filter::SameSandbox),
        "iokit-user-client-class" => Ok(Filter::IoKitClass(one_string(&rest)?)),
        "socket-domain" => match rest.as_slice() {
            [Sexp::Symbol(domain)] if domain.starts_with("AF_") => {
                Ok(Filter::SocketDomain(domain.clone()))
            }
            _ => bad("(socket-domain …) takes an AF_ name"),
        },
        "local" | "remote" => {
            let local = head == "local";
            match rest.as_slice() {
                [Sexp::Symbol(kind), Sexp::Str(address)] => {
                    let (tcp, udp) = match kind.as_str() {
                        "ip" => (true, true),
                        "tcp" => (true, false),
                        "udp" => (false, true),
                        other => return bad(format!("unknown address kind {other}")),
                    };
                    let Some((host, port)) = address.rsplit_once(':') else {
                        return bad(format!("an address is host:port: {address}"));
                    };
                    let localhost_only = match host {
                        "*" => false,
                        "localhost" => true,
                        other => return bad(format!("a host is * or localhost: {other}")),
                    };
                    let port = match port {
                        "*" => None,
                        p => Some(p.parse::<u16>().or_else(|_| bad(format!("a port: {p}")))?),
                    };
                    Ok(Filter::Socket {
                        local,
                        kind: SocketKind::Ip {
                            tcp,
                            udp,
                            localhost_only,
                            port,
                        },
                    })
                }
                [Sexp::Symbol(kind), Sexp::List(path)] if kind == "unix-socket" => {
                    let path = filter_of(path.clone())?;
                    if !matches!(path, Filter::Subpath(_) | Filter::Literal(_)) {
                        return bad("a Unix socket's filter is a path");
                    }
                    Ok(Filter::Socket {
                        local,
                        kind: SocketKind::Unix(Box::new(path)),
                    })
                }
                _ => bad(format!("({head} …) takes an address")),
            }
        }
        other => bad(format!("unknown filter {other}")),
    }
}

impl Filter {
    fn matches(&self, target: Target<'_>) -> bool {
        match (self, target) {
            (Filter::Subpath(_) | Filter::Literal(_), Target::Path(path)) => self.path(path),
            (Filter::Socket { local, kind }, Target::Local(addr) | Target::Remote(addr)) => {
                *local == matches!(target, Target::Local(_)) && kind.matches(addr)
            }
            (Filter::SameSandbox, Target::Process { same_sandbox }) => same_sandbox,
            (Filter::IoKitClass(c), Target::IoKit(class)) => c == class,
            (Filter::GlobalName(name), Target::MachService(service)) => name == service,
            (Filter::SysctlName(name), Target::Sysctl(asked)) => name == asked,
            (Filter::SysctlPrefix(prefix), Target::Sysctl(asked)) => asked.starts_with(prefix),
            (Filter::SocketDomain(domain), Target::SocketDomain(asked)) => domain == asked,
            _ => false,
        }
    }

    fn path(&self, path: &Path) -> bool {
        match self {
            Filter::Subpath(dir) => path.starts_with(dir),
            Filter::Literal(file) => path == Path::new(file),
            _ => false,
        }
    }
}

impl SocketKind {
    fn matches(&self, addr: Addr<'_>) -> bool {
        match (self, addr) {
            (kind @ SocketKind::Ip { tcp: true, .. }, Addr::Tcp(host, port))
            | (kind @ SocketKind::Ip { udp: true, .. }, Addr::Udp(host, port)) => {
                kind.ip_matches(host, port)
            }
            (SocketKind::Unix(filter), Addr::Unix(path)) => filter.path(path),
            _ => false,
        }
    }
}

impl SocketKind {
    fn ip_matches(&self, host: Host, asked: u16) -> bool {
        let SocketKind::Ip {
            localhost_only,
            port,
            ..
        } = self
        else {
            return false;
        };
        (!localhost_only || host == Host::Localhost) && port.is_none_or(|p| p == asked)
    }
}

/// Every form in `text`; `;` starts a comment to the end of its line.
fn read_all(text: &str) -> Result<Vec<Sexp>, ParseError> {
    let mut chars = text.chars().peekable();
    let mut stack: Vec<Vec<Sexp>> = vec![Vec::new()];
    while let Some(c) = chars.next() {
        match c {
            ';' => while chars.next_if(|&c| c != '\n').is_some() {},
            '(' => stack.push(Vec::new()),
            ')' => {
                let list = stack.pop().filter(|_| !stack.is_empty());
                let (Some(list), Some(parent)) = (list, stack.last_mut()) else {
                    return bad("a ) with no (");
                };
                parent.push(Sexp::List(list));
            }
            '"' => {
                let mut s = String::new();
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => {
                            return bad("an escape in a string (the renderer writes none)");
                        }
                        Some(c) => s.push(c),
                        None => return bad("a string with no end"),
                    }
                }
                push(&mut stack, Sexp::Str(s))?;
            }
            c if c.is_whitespace() => {}
            c => {
                let mut s = String::from(c);
                while let Some(c) = chars.next_if(|&c| !c.is_whitespace() && !"()\";".contains(c)) {
                    s.push(c);
                }
                push(&mut stack, Sexp::Symbol(s))?;
            }
        }
    }
    match stack.as_slice() {
        [_] => Ok(stack.pop().unwrap_or_default()),
        _ => bad("a ( with no )"),
    }
}

fn push(stack: &mut [Vec<Sexp>], item: Sexp) -> Result<(), ParseError> {
    match stack {
        [_, .., top] => {
            top.push(item);
            Ok(())
        }
        _ => bad(format!("{item:?} outside any form")),
    }
}
