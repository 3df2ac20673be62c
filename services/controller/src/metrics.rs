//! What the controller measures (besides its gRPC servers' handling times and the store's):
//! reconcile passes, admissions, waiting workloads, and, every [`CENSUS_EVERY`] while it leads,
//! its region's workloads by state and machines by status. Gauges of a region are the
//! leader's: a standby's stay as its last lead left them, and `einsora_controller_leading`
//! says which controller's to read.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{LazyLock, Mutex, PoisonError};
use std::time::Duration;

use einsora_core::region::Region;
use einsora_runtime::metrics::{self, Counters, Gauges, Latencies};
use einsora_store::{Store, StoreError};

use crate::agents::Hub;

/// How often the leader counts its region's workloads and machines.
pub(crate) const CENSUS_EVERY: Duration = Duration::from_secs(15);

static PASSES: LazyLock<Latencies<2>> = LazyLock::new(|| {
    metrics::latencies(
        "einsora_reconcile_pass_duration_seconds",
        "Time a reconcile pass took, by region and result (ok, error).",
    )
});

static ADMISSIONS: LazyLock<Counters<2>> = LazyLock::new(|| {
    metrics::register(
        "einsora_admissions",
        "Workloads admitted (placed and moved to provisioning), by region and placed class.",
        Counters::default(),
    )
});

static WAITING: LazyLock<Tracked> = LazyLock::new(|| {
    Tracked::new(
        "einsora_workloads_waiting",
        "Workloads pending or queued after the latest pass, by region and requested class.",
        ["region", "class"],
    )
});

static WORKLOADS: LazyLock<Tracked> = LazyLock::new(|| {
    Tracked::new(
        "einsora_workloads",
        "The region's workloads by state (deleted ones left out), as the leader last counted.",
        ["region", "state"],
    )
});

static MACHINES: LazyLock<Tracked> = LazyLock::new(|| {
    Tracked::new(
        "einsora_machines",
        "The region's machines by status (online, offline), as the leader last counted.",
        ["region", "status"],
    )
});

static LEADING: LazyLock<Gauges<1>> = LazyLock::new(|| {
    metrics::register(
        "einsora_controller_leading",
        "1 while this controller holds its region's lease, else 0.",
        Gauges::default(),
    )
});

/// A gauge family set whole from a count each time: a label set counted before and not now is
/// set to 0, not left stale.
struct Tracked {
    family: Gauges<2>,
    keys: [&'static str; 2],
    seen: Mutex<BTreeSet<[String; 2]>>,
}

impl Tracked {
    fn new(name: &str, help: &str, keys: [&'static str; 2]) -> Tracked {
        Tracked {
            family: metrics::register(name, help, Gauges::default()),
            keys,
            seen: Mutex::default(),
        }
    }

    fn set_all(&self, now: &BTreeMap<[String; 2], i64>) {
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        let labels = |[a, b]: [String; 2]| [(self.keys[0], a), (self.keys[1], b)];
        for gone in seen.iter().filter(|k| !now.contains_key(*k)) {
            self.family.get_or_create(&labels(gone.clone())).set(0);
        }
        for (key, value) in now {
            self.family.get_or_create(&labels(key.clone())).set(*value);
            seen.insert(key.clone());
        }
    }
}

pub(crate) fn pass(region: &Region, ok: bool, elapsed: Duration) {
    let labels = [
        ("region", region.as_str().to_owned()),
        ("result", if ok { "ok" } else { "error" }.to_owned()),
    ];
    metrics::observe(&PASSES, labels, elapsed);
}

pub(crate) fn admitted(region: &Region, class: &str) {
    let labels = [
        ("region", region.as_str().to_owned()),
        ("class", class.to_owned()),
    ];
    ADMISSIONS.get_or_create(&labels).inc();
}

/// What still waits after a pass's admission, by requested class.
pub(crate) fn waiting<'c>(region: &Region, classes: impl Iterator<Item = &'c str>) {
    let mut now = BTreeMap::new();
    for class in classes {
        *now.entry([region.as_str().to_owned(), class.to_owned()])
            .or_default() += 1;
    }
    WAITING.set_all(&now);
}

pub(crate) fn leading(region: &Region, leads: bool) {
    LEADING
        .get_or_create(&[("region", region.as_str().to_owned())])
        .set(i64::from(leads));
}

/// Counts the region's workloads by state and, with agents, its machines by status.
pub(crate) async fn census(
    store: &dyn Store,
    region: &Region,
    hub: Option<&Hub>,
) -> Result<(), StoreError> {
    let by_state = store.census(region).await?;
    let now = by_state
        .into_iter()
        .map(|(state, n)| {
            let key = [region.as_str().to_owned(), state.as_str().to_owned()];
            (key, i64::try_from(n).unwrap_or(i64::MAX))
        })
        .collect();
    WORKLOADS.set_all(&now);
    if let Some(hub) = hub {
        let mut now: BTreeMap<[String; 2], i64> = ["online", "offline"]
            .map(|s| ([region.as_str().to_owned(), s.to_owned()], 0))
            .into();
        for record in store.machines_in(region).await? {
            let status = if hub.online(record.machine.id) {
                "online"
            } else {
                "offline"
            };
            *now.entry([region.as_str().to_owned(), status.to_owned()])
                .or_default() += 1;
        }
        MACHINES.set_all(&now);
    }
    Ok(())
}
