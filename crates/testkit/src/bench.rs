//! What every bench prints: one Markdown report that opens with the commit, the date, the
//! machine's load and the exact command, then its tables as docs/benchmarks.md shows them. The
//! report goes to standard output and to `target/bench-results/<name>.md`, so the published
//! tables are pasted from it, never typed (a test compares them with docs/benchmarks/raw/).

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::Command;

/// A bench's report, built as the bench runs.
#[derive(Debug)]
pub struct Report {
    name: String,
    text: String,
}

impl Report {
    /// Starts the report of the bench `name` (its file name), run by `command` (`cargo bench …`):
    /// its first line is `scripts/bench-header`'s, the one every bench prints.
    pub fn start(name: &str, title: &str, command: &str) -> Report {
        let header = Command::new(workspace().join("scripts/bench-header"))
            .args([title, command])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim_end().to_owned())
            .unwrap_or_else(|| format!("{title}: (scripts/bench-header failed); `{command}`"));
        eprintln!("{header}");
        Report {
            name: name.to_owned(),
            text: format!("{header}\n"),
        }
    }

    /// A paragraph: a table's caption, or a line of what the run saw.
    pub fn say(&mut self, paragraph: impl AsRef<str>) {
        let _ = write!(self.text, "\n{}\n", paragraph.as_ref());
    }

    /// A block rendered elsewhere (a bench's own tables), appended as it is.
    pub fn markdown(&mut self, block: &str) {
        self.text.push_str(block);
    }

    pub fn table(&mut self, table: &Table) {
        let _ = write!(self.text, "\n{}", table.render());
    }

    /// Prints the report and writes it under `target/bench-results/`; returns its path.
    pub fn finish(self) -> anyhow::Result<PathBuf> {
        print!("{}", self.text);
        let dir = results_dir();
        std::fs::create_dir_all(&dir)?;
        let path = dir.join(format!("{}.md", self.name));
        std::fs::write(&path, &self.text)?;
        eprintln!("written to {}", path.display());
        Ok(path)
    }
}

/// A Markdown table: a head, then rows; columns after the first `left` are right-aligned.
#[derive(Debug)]
pub struct Table {
    head: Vec<String>,
    left: usize,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// `left` columns (from the first) are text, the rest figures.
    pub fn new(head: &[&str], left: usize) -> Table {
        Table {
            head: head.iter().map(|h| (*h).to_owned()).collect(),
            left,
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        assert_eq!(cells.len(), self.head.len(), "a row of {:?}", self.head);
        self.rows.push(cells);
    }

    pub fn render(&self) -> String {
        let line = |cells: &[String]| format!("| {} |\n", cells.join(" | "));
        let rule: Vec<String> = (0..self.head.len())
            .map(|i| if i < self.left { "---" } else { "---:" }.to_owned())
            .collect();
        let mut out = line(&self.head);
        out.push_str(&format!("|{}|\n", rule.join("|")));
        for row in &self.rows {
            out.push_str(&line(row));
        }
        out
    }
}

/// The bench setting `name` (`BENCH_ROUNDS=5`), or `default` when it isn't set; a value that
/// doesn't parse is an error naming the setting, never a silent default.
pub fn setting<T: std::str::FromStr>(name: &str, default: T) -> anyhow::Result<T> {
    match std::env::var(name) {
        Err(std::env::VarError::NotPresent) => Ok(default),
        Ok(v) => v
            .trim()
            .parse()
            .map_err(|_| anyhow::anyhow!("{name}={v:?}: not a {}", std::any::type_name::<T>())),
        Err(e) => anyhow::bail!("{name}: {e}"),
    }
}

/// The `q` quantile of sorted values (nearest rank); NaN when there are none.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    let i = ((sorted.len() as f64 * q).ceil() as usize).saturating_sub(1);
    sorted.get(i).copied().unwrap_or(f64::NAN)
}

pub fn median(values: impl IntoIterator<Item = f64>) -> f64 {
    let mut v: Vec<f64> = values.into_iter().collect();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// 12345 → "12,345".
pub fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The workspace's target directory's `bench-results`.
fn results_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target"))
        .join("bench-results")
}

fn workspace() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    root.canonicalize().unwrap_or(root)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_renders_as_markdown_with_text_left_and_figures_right() {
        let mut t = Table::new(&["engine", "p50", "p99"], 1);
        t.row(vec!["sqlite".into(), "1.2".into(), "3.4".into()]);
        assert_eq!(
            t.render(),
            "| engine | p50 | p99 |\n|---|---:|---:|\n| sqlite | 1.2 | 3.4 |\n"
        );
    }

    #[test]
    fn quantiles_take_the_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(quantile(&v, 0.5), 50.0);
        assert_eq!(quantile(&v, 0.99), 99.0);
        assert_eq!(quantile(&v, 1.0), 100.0);
        assert!(quantile(&[], 0.5).is_nan());
        assert_eq!(median([3.0, 1.0, 2.0, 10.0]), 2.5);
        assert_eq!(count(1_234_567), "1,234,567");
    }
}
