//! A network of the test's own for node agents: a bridge on the host with a private address
//! (where the controller listens), and each machine in its own Linux network namespace, joined
//! to the bridge by a veth pair. A partition is nftables dropping everything in a machine's
//! namespace; healing deletes that table. Needs root (CAP_NET_ADMIN), as CI has. Everything is
//! removed when dropped: stop the machines' processes first (declare the `Lan` before them).

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

/// Tells this process's networks apart; the PID tells them from other test processes'.
static NEXT: AtomicU32 = AtomicU32::new(0);

/// The rules that cut a machine off, in a table of their own.
const PARTITION: &str = "table inet einsora_partition {
    chain in { type filter hook input priority -300; policy drop; }
    chain out { type filter hook output priority -300; policy drop; }
}";

/// `sh -c` for [`Host::wrap_apart`]: `$1` the private directory, `$2` where the cgroups wait,
/// `$3` the namespace, then the command.
const APART: &str = r#"p=$1; s=$2; n=$3; shift 3
mount -t tmpfs -o mode=0755 einsora-apart "$p" && mount --rbind /sys/fs/cgroup "$s" &&
exec ip netns exec "$n" sh -c 'mount --rbind "$0" /sys/fs/cgroup && exec "$@"' "$s" "$@""#;

pub struct Lan {
    /// Short: interface names are at most 15 bytes.
    tag: String,
    /// The first three octets of its /24.
    prefix: String,
    hosts: AtomicU32,
}

/// One machine's namespace on the [`Lan`].
pub struct Host {
    pub netns: String,
    /// Its address on the bridge.
    pub address: String,
}

impl Lan {
    pub fn new() -> Lan {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let lan = Lan {
            tag: format!("{}{n}", pid % 100_000),
            prefix: format!("10.{}.{}", 100 + pid % 100, (pid / 100 % 16) * 16 + n % 16),
            hosts: AtomicU32::new(0),
        };
        let bridge = lan.bridge();
        ip(&["link", "add", &bridge, "type", "bridge"]);
        ip(&[
            "addr",
            "add",
            &format!("{}/24", lan.address()),
            "dev",
            &bridge,
        ]);
        ip(&["link", "set", &bridge, "up"]);
        lan
    }

    fn bridge(&self) -> String {
        format!("esb{}", self.tag)
    }

    /// The host's address on the bridge: what the controller listens on.
    pub fn address(&self) -> String {
        format!("{}.1", self.prefix)
    }

    /// A port on the host's address, held until dropped (see [`einsora_testkit::Port`]).
    pub fn port(&self) -> einsora_testkit::Port {
        einsora_testkit::Port::on(self.address().parse().unwrap())
    }

    /// A new namespace with its own address on the bridge.
    pub fn host(&self) -> Host {
        let i = self.hosts.fetch_add(1, Ordering::Relaxed);
        assert!(i < 250, "a /24 holds 250 hosts");
        let netns = format!("esn{}-{i}", self.tag);
        let veth = format!("esv{}x{i}", self.tag);
        ip(&["netns", "add", &netns]);
        let host = Host {
            netns,
            address: format!("{}.{}", self.prefix, i + 2),
        };
        ip(&[
            "link",
            "add",
            &veth,
            "type",
            "veth",
            "peer",
            "name",
            "eth0",
            "netns",
            &host.netns,
        ]);
        ip(&["link", "set", &veth, "master", &self.bridge(), "up"]);
        let addr = format!("{}/24", host.address);
        host.ip(&["addr", "add", &addr, "dev", "eth0"]);
        host.ip(&["link", "set", "eth0", "up"]);
        host.ip(&["link", "set", "lo", "up"]);
        host
    }
}

impl Drop for Lan {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["link", "del", &self.bridge()])
            .stderr(Stdio::null())
            .status();
    }
}

impl Host {
    /// `inner` (its program, arguments and environment; nothing else inherited) run in this
    /// namespace.
    pub fn wrap(&self, inner: &Command) -> Command {
        let mut command = Command::new("ip");
        command
            .args(["netns", "exec", &self.netns])
            .arg(inner.get_program())
            .args(inner.get_args())
            .env_clear()
            .envs(inner.get_envs().filter_map(|(k, v)| Some((k, v?))))
            .stdin(Stdio::null());
        command
    }

    /// [`Host::wrap`], with `private` (a directory) a tmpfs of this machine's own: nothing it
    /// puts there can be seen, let alone dialled, from the control host or another machine.
    /// `ip netns exec` mounts a `/sys` of the namespace's own, so the host's cgroups (v1 or v2)
    /// are bound aside first (`<private>.cgroup`, in this mount namespace only) and back
    /// into it.
    pub fn wrap_apart(&self, inner: &Command, private: &Path) -> Command {
        let stash = private.with_extension("cgroup");
        for dir in [private, &stash] {
            std::fs::create_dir_all(dir).unwrap();
        }
        let mut command = Command::new("unshare");
        command
            .args([
                "--mount",
                "--propagation",
                "private",
                "sh",
                "-c",
                APART,
                "sh",
            ])
            .arg(private)
            .arg(&stash)
            .arg(&self.netns)
            .arg(inner.get_program())
            .args(inner.get_args())
            .env_clear()
            .envs(inner.get_envs().filter_map(|(k, v)| Some((k, v?))))
            .stdin(Stdio::null());
        command
    }

    fn ip(&self, args: &[&str]) {
        let mut all = vec!["-n", &self.netns];
        all.extend_from_slice(args);
        ip(&all);
    }

    /// Drops every packet in and out of this machine.
    pub fn partition(&self) {
        let mut nft = Command::new("ip");
        nft.args(["netns", "exec", &self.netns, "nft", "-f", "-"]);
        let out = super::support::fed(nft, PARTITION);
        assert!(
            out.status.success(),
            "nft partition: {}",
            super::support::stderr(&out)
        );
    }

    pub fn heal(&self) {
        let args = [
            "netns",
            "exec",
            &self.netns,
            "nft",
            "delete",
            "table",
            "inet",
            "einsora_partition",
        ];
        assert!(
            Command::new("ip").args(args).status().unwrap().success(),
            "nft heal"
        );
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        // The veth pair goes with the namespace.
        let _ = Command::new("ip")
            .args(["netns", "del", &self.netns])
            .stderr(Stdio::null())
            .status();
    }
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "ip {}: {} (network namespaces need root)",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    );
}
