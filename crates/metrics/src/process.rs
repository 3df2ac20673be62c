//! The process's own CPU time, memory, open files and start time, under the names every
//! Prometheus client uses (`process_*`), read from `/proc/self` on each scrape. Elsewhere than
//! Linux there are none.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

#[derive(Debug)]
pub(super) struct Process;

impl Collector for Process {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let Some(now) = Sample::read() else {
            return Ok(());
        };
        let cpu = ConstCounter::new(now.cpu_seconds);
        cpu.encode(encoder.encode_descriptor(
            "process_cpu_seconds",
            "User and system CPU time spent, in seconds",
            None,
            cpu.metric_type(),
        )?)?;
        let gauges = [
            (
                "process_resident_memory_bytes",
                "Resident memory size in bytes",
                now.resident_bytes,
            ),
            (
                "process_open_fds",
                "Number of open file descriptors",
                now.open_fds,
            ),
            (
                "process_max_fds",
                "Maximum number of open file descriptors",
                now.max_fds,
            ),
            (
                "process_start_time_seconds",
                "Start time of the process since the Unix epoch, in seconds",
                now.start_time_seconds,
            ),
        ];
        for (name, help, value) in gauges {
            let gauge = ConstGauge::new(value);
            gauge.encode(encoder.encode_descriptor(name, help, None, gauge.metric_type())?)?;
        }
        Ok(())
    }
}

// Read from /proc: never made elsewhere than Linux.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
#[derive(Debug, Clone, Copy, PartialEq)]
struct Sample {
    cpu_seconds: f64,
    resident_bytes: f64,
    open_fds: f64,
    max_fds: f64,
    start_time_seconds: f64,
}

impl Sample {
    #[cfg(target_os = "linux")]
    fn read() -> Option<Sample> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
        let boot = std::fs::read_to_string("/proc/stat").ok()?;
        let open_fds = std::fs::read_dir("/proc/self/fd").ok()?.count();
        let max_fds = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
        parse(&stat, &statm, &boot, open_fds, max_fds)
    }

    #[cfg(not(target_os = "linux"))]
    fn read() -> Option<Sample> {
        None
    }
}

/// A sample from `/proc/self/stat`, `/proc/self/statm` and `/proc/stat`'s `btime`.
#[cfg(target_os = "linux")]
fn parse(
    stat: &str,
    statm: &str,
    boot: &str,
    open_fds: usize,
    max_fds: Option<u64>,
) -> Option<Sample> {
    // The command name is in parentheses and may hold spaces: fields count from after it.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
    let ticks = rustix::param::clock_ticks_per_second() as f64;
    let (utime, stime, started) = (field(14)?, field(15)?, field(22)?);
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    let btime: u64 = boot
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    Some(Sample {
        cpu_seconds: (utime + stime) as f64 / ticks,
        resident_bytes: (pages * rustix::param::page_size() as u64) as f64,
        open_fds: open_fds as f64,
        max_fds: max_fds.map_or(f64::INFINITY, |m| m as f64),
        start_time_seconds: btime as f64 + started as f64 / ticks,
    })
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn a_sample_reads_from_procs_own_files() {
        let stat = "4242 (a (strange) name) S 1 4242 4242 0 -1 4194560 1 0 0 0 250 50 0 0 20 0 \
                    8 0 1000 0 0";
        let statm = "1000 300 100 1 0 200 0";
        let boot = "cpu  1 2 3\nbtime 1700000000\nprocesses 9\n";
        let sample = parse(stat, statm, boot, 12, Some(1024)).unwrap();
        let ticks = rustix::param::clock_ticks_per_second() as f64;
        assert_eq!(sample.cpu_seconds, 300.0 / ticks);
        assert_eq!(
            sample.resident_bytes,
            300.0 * rustix::param::page_size() as f64
        );
        assert_eq!(sample.start_time_seconds, 1_700_000_000.0 + 1000.0 / ticks);
        assert_eq!((sample.open_fds, sample.max_fds), (12.0, 1024.0));
        assert!(parse("garbage", statm, boot, 0, None).is_none());
        assert!(
            Sample::read().unwrap().cpu_seconds >= 0.0,
            "this process's own"
        );
    }
}
