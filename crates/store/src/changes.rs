//! The change signal the controller waits on instead of polling the tables.

use tokio::sync::watch;

/// A subscription to "something changed". Cheap to clone; each clone sees every change after
/// it was made (changes in between are folded into one wake-up).
#[derive(Debug, Clone)]
pub struct ChangeSignal(watch::Receiver<u64>);

impl ChangeSignal {
    pub(crate) fn new(rx: watch::Receiver<u64>) -> Self {
        ChangeSignal(rx)
    }

    /// Waits for the next change. Returns `false` once the store is gone.
    pub async fn changed(&mut self) -> bool {
        self.0.changed().await.is_ok()
    }
}

/// The sending side, held by a store and its watcher task.
#[derive(Debug)]
pub(crate) struct ChangeSender(watch::Sender<u64>);

impl ChangeSender {
    pub(crate) fn new() -> Self {
        ChangeSender(watch::Sender::new(0))
    }

    pub(crate) fn bump(&self) {
        self.0.send_modify(|n| *n = n.wrapping_add(1));
    }

    pub(crate) fn subscribe(&self) -> ChangeSignal {
        ChangeSignal::new(self.0.subscribe())
    }
}
