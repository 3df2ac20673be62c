//! What a test's own process logs, kept for the test to read: that a secret never reaches a
//! log, that a caller is named in one.

use std::io;
use std::sync::{Arc, Mutex, OnceLock};

/// Log lines as the fmt layer writes them.
#[derive(Debug, Clone, Default)]
pub struct Captured(Arc<Mutex<Vec<u8>>>);

impl io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// How captured lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
}

impl Captured {
    /// Every line the process logs from the first call on, through the one global subscriber
    /// (every test's lines: a subscriber set for one thread misses callsites another test's
    /// thread saw first). The first call's `filter` and `format` hold for the process.
    pub fn global(filter: &str, format: Format) -> Captured {
        static GLOBAL: OnceLock<Captured> = OnceLock::new();
        GLOBAL
            .get_or_init(|| {
                let captured = Captured::default();
                let writer = captured.clone();
                let builder = tracing_subscriber::fmt()
                    .with_ansi(false)
                    .with_env_filter(filter)
                    .with_writer(move || writer.clone());
                match format {
                    Format::Text => builder.init(),
                    Format::Json => builder.json().init(),
                }
                captured
            })
            .clone()
    }

    /// What this thread logs while the guard lives (a current-thread runtime's tasks too).
    pub fn scoped(filter: &str) -> (Captured, tracing::subscriber::DefaultGuard) {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        (captured, tracing::subscriber::set_default(subscriber))
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}
