//! `einsora backup` and `einsora restore`: everything an installation needs, in one owner-only
//! archive, taken while it runs and restored into SQLite or Postgres either way round.
//!
//! The archive is JSON lines, in this order:
//! - a head: `{"einsora_backup": 1, "schema": <store schema version>, "einsora": <version>,
//!   "taken_at": <RFC 3339>}`;
//! - its files: `{"file": "pki/<name>", "content": <bytes>}` for the certificate directory
//!   (the installation CA and the agents CA with their keys, the roles' certificates), and
//!   `{"file": "catalog.yaml", …}` where the installation runs a catalog of its own;
//! - the store (`einsora_store::backup`): `{"table": <name>, "columns": [...]}`, then each row
//!   as an array of values;
//! - an end: `{"end": {"tables": <n>, "rows": <n>}}`. An archive without it is torn, and
//!   refused.
//!
//! It holds secrets: the CAs' private keys, and the hashes of passwords, sessions and tokens.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use einsora_runtime::grpc::InternalTls;
use einsora_runtime::settings::Settings;
use einsora_store::DatabaseUrl;
use einsora_store::backup::{self, BackupError, Item, Value};
use serde_json::{Value as Json, json};

/// The archive format this einsora writes, and the newest it reads.
const FORMAT: u64 = 1;
const PKI: &str = "pki/";
const CATALOG: &str = "catalog.yaml";
/// Left in the certificate directory: a lock only.
const NOT_KEPT: &[&str] = &[".lock"];

pub fn backup(settings: &Settings, to: &Path) -> anyhow::Result<()> {
    let url = DatabaseUrl::from_settings(settings)?;
    let pki = InternalTls::from_settings(settings)?.dir().to_owned();
    let catalog = custom_catalog(settings)?;
    if to.exists() {
        bail!("{} exists already: name a new file", to.display());
    }
    let partial = PathBuf::from(format!("{}.partial", to.display()));
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&partial)
        .with_context(|| format!("creating {}", partial.display()))?;
    let written = write_archive(BufWriter::new(file), &url, &pki, catalog.as_deref());
    let (files, counts) = match written {
        Ok(done) => done,
        Err(e) => {
            let _ = std::fs::remove_file(&partial);
            return Err(e);
        }
    };
    std::fs::rename(&partial, to).with_context(|| format!("naming {}", to.display()))?;
    let rows: u64 = counts.values().sum();
    eprintln!(
        "backed up {} tables ({rows} rows) of {url} and {files} files to {}: it holds the \
         installation's CA keys, keep it private",
        counts.len(),
        to.display()
    );
    Ok(())
}

/// The catalog file the installation runs, if not the built-in one.
fn custom_catalog(settings: &Settings) -> anyhow::Result<Option<PathBuf>> {
    let setting = einsora_runtime::catalog::CATALOG;
    if settings.string(setting, "")?.is_empty() {
        return Ok(None);
    }
    Ok(Some(settings.path(setting, Path::new(""))?))
}

fn write_archive(
    mut out: BufWriter<File>,
    url: &DatabaseUrl,
    pki: &Path,
    catalog: Option<&Path>,
) -> anyhow::Result<(usize, backup::Counts)> {
    let head = json!({
        "einsora_backup": FORMAT,
        "schema": backup::schema_version(url),
        "einsora": env!("CARGO_PKG_VERSION"),
        "taken_at": time::OffsetDateTime::now_utc()
            .format(&time::format_description::well_known::Rfc3339)?,
    });
    line(&mut out, &head)?;
    let mut files = Vec::new();
    for entry in std::fs::read_dir(pki).with_context(|| format!("reading {}", pki.display()))? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if entry.file_type()?.is_file() && !NOT_KEPT.contains(&name.as_str()) {
            files.push((format!("{PKI}{name}"), entry.path()));
        }
    }
    files.sort();
    if let Some(catalog) = catalog {
        files.push((CATALOG.to_owned(), catalog.to_owned()));
    }
    for (name, path) in &files {
        let content = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        line(
            &mut out,
            &json!({ "file": name, "content": Value::Bytes(content).to_json() }),
        )?;
    }
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    let counts = runtime.block_on(backup::dump(url, &mut |item| {
        let json = match item {
            Item::Table { name, columns } => json!({ "table": name, "columns": columns }),
            Item::Row(values) => Json::Array(values.iter().map(Value::to_json).collect()),
        };
        line(&mut out, &json).map_err(|e| BackupError::Order(format!("writing the archive: {e}")))
    }))?;
    let rows: u64 = counts.values().sum();
    line(
        &mut out,
        &json!({ "end": { "tables": counts.len(), "rows": rows } }),
    )?;
    let file = out.into_inner().context("writing the archive")?;
    file.sync_all().context("writing the archive")?;
    Ok((files.len(), counts))
}

fn line(out: &mut impl Write, json: &Json) -> std::io::Result<()> {
    serde_json::to_writer(&mut *out, json)?;
    out.write_all(b"\n")
}

pub fn restore(settings: &Settings, from: &Path) -> anyhow::Result<()> {
    let url = DatabaseUrl::from_settings(settings)?;
    let pki = InternalTls::from_settings(settings)?.dir().to_owned();
    let data_dir = settings.data_dir()?;
    let file = File::open(from).with_context(|| format!("opening {}", from.display()))?;
    let mut archive = Archive {
        lines: BufReader::new(file).lines(),
        number: 0,
        from: from.to_owned(),
    };
    let schema = archive.head()?;
    let (files, first) = archive.files()?;
    // Everything is checked before anything is written: the target's certificates first.
    refuse_unless_empty(&pki)?;
    let catalog = data_dir.join(CATALOG);
    let has_catalog = files.iter().any(|(name, _)| name == CATALOG);
    if has_catalog && catalog.exists() {
        bail!(
            "{} exists already: the backup's catalog would replace it",
            catalog.display()
        );
    }
    if let DatabaseUrl::Sqlite { path } = &url
        && path.parent() == Some(data_dir.as_path())
    {
        crate::migrate::create_private_dir(&data_dir)?;
    }
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    let mut items = Items {
        archive: &mut archive,
        next: first,
        rows: 0,
        done: false,
    };
    let counts = runtime.block_on(backup::load(&url, schema, &mut items))?;
    crate::migrate::create_private_dir(&pki)?;
    for (name, content) in &files {
        let path = match name.strip_prefix(PKI) {
            Some(file) => pki.join(file),
            None => catalog.clone(),
        };
        write_private(&path, content)?;
    }
    let rows: u64 = counts.values().sum();
    eprintln!(
        "restored {} tables ({rows} rows) into {url} and {} files into {}",
        counts.len(),
        files.len(),
        pki.display()
    );
    if has_catalog {
        eprintln!(
            "the installation ran a catalog of its own, now at {}: set EINSORA_CATALOG={0}",
            catalog.display()
        );
    }
    Ok(())
}

/// A restore never mixes its certificates with another installation's.
fn refuse_unless_empty(pki: &Path) -> anyhow::Result<()> {
    let Ok(entries) = std::fs::read_dir(pki) else {
        return Ok(());
    };
    for entry in entries {
        let name = entry?.file_name().to_string_lossy().into_owned();
        if !NOT_KEPT.contains(&name.as_str()) {
            bail!(
                "the certificate directory {} isn't empty (it has {name}): restore only into a \
                 new installation",
                pki.display()
            );
        }
    }
    Ok(())
}

fn write_private(path: &Path, content: &[u8]) -> anyhow::Result<()> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("writing {}", path.display()))?;
    file.write_all(content)
        .and_then(|()| file.sync_all())
        .with_context(|| format!("writing {}", path.display()))
}

/// A file of the archive: its name there (`pki/<name>`, `catalog.yaml`) and its content.
type ArchivedFile = (String, Vec<u8>);

/// The archive, read a line at a time; errors name the line.
struct Archive {
    lines: std::io::Lines<BufReader<File>>,
    number: usize,
    from: PathBuf,
}

impl Archive {
    fn next(&mut self) -> anyhow::Result<Option<Json>> {
        let Some(text) = self.lines.next() else {
            return Ok(None);
        };
        self.number += 1;
        let text = text.with_context(|| format!("reading {}", self.from.display()))?;
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| self.bad(format!("isn't JSON ({e})")))
    }

    fn bad(&self, problem: impl std::fmt::Display) -> anyhow::Error {
        anyhow::anyhow!("{} line {}: {problem}", self.from.display(), self.number)
    }

    /// The schema version its store was dumped at, once its format is one this einsora reads.
    fn head(&mut self) -> anyhow::Result<i64> {
        let head = self.next()?.unwrap_or(Json::Null);
        let Some(format) = head.get("einsora_backup").and_then(Json::as_u64) else {
            bail!("{} is not an einsora backup", self.from.display());
        };
        if format > FORMAT {
            bail!(
                "{} is a backup of format {format}, newer than this einsora reads ({FORMAT}): \
                 restore it with a newer einsora",
                self.from.display()
            );
        }
        head.get("schema")
            .and_then(Json::as_i64)
            .ok_or_else(|| self.bad("the head names no schema version"))
    }

    /// Its files, and the first line after them.
    fn files(&mut self) -> anyhow::Result<(Vec<ArchivedFile>, Option<Json>)> {
        let mut files = Vec::new();
        loop {
            let next = self.next()?;
            let Some(name) = next
                .as_ref()
                .and_then(|j| j.get("file"))
                .and_then(Json::as_str)
            else {
                return Ok((files, next));
            };
            let name = name.to_owned();
            let safe = match name.strip_prefix(PKI) {
                Some(file) => !file.is_empty() && !file.contains('/') && !file.starts_with('.'),
                None => name == CATALOG,
            };
            if !safe {
                return Err(self.bad(format!("{name:?} is not a file a backup holds")));
            }
            let content = next
                .as_ref()
                .and_then(|j| j.get("content"))
                .map(Value::from_json);
            match content {
                Some(Ok(Value::Bytes(bytes))) => files.push((name, bytes)),
                _ => return Err(self.bad(format!("{name}'s content isn't bytes"))),
            }
        }
    }
}

/// The store's part of the archive, as `backup::load` takes it; the end line checks that every
/// row arrived.
struct Items<'a> {
    archive: &'a mut Archive,
    next: Option<Json>,
    rows: u64,
    done: bool,
}

impl Items<'_> {
    fn item(&mut self, json: Json) -> Result<Option<Item>, BackupError> {
        let bad = |archive: &Archive, problem: String| {
            BackupError::Order(archive.bad(problem).to_string())
        };
        match json {
            Json::Array(values) => {
                let values = values
                    .iter()
                    .map(Value::from_json)
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|why| bad(self.archive, why))?;
                self.rows += 1;
                Ok(Some(Item::Row(values)))
            }
            Json::Object(o) if o.contains_key("table") => {
                let name = o["table"].as_str().unwrap_or_default().to_owned();
                let columns: Option<Vec<String>> = o
                    .get("columns")
                    .and_then(Json::as_array)
                    .and_then(|c| c.iter().map(|c| c.as_str().map(str::to_owned)).collect());
                let columns =
                    columns.ok_or_else(|| bad(self.archive, format!("{name} lists no columns")))?;
                Ok(Some(Item::Table { name, columns }))
            }
            Json::Object(o) if o.contains_key("end") => {
                self.done = true;
                let said = o["end"].get("rows").and_then(Json::as_u64);
                if said != Some(self.rows) {
                    return Err(bad(
                        self.archive,
                        format!("the end says {said:?} rows, {} came", self.rows),
                    ));
                }
                Ok(None)
            }
            _ => Err(bad(
                self.archive,
                "is neither a table, a row nor the end".into(),
            )),
        }
    }
}

impl Iterator for Items<'_> {
    type Item = Result<Item, BackupError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let json = match self.next.take() {
            Some(json) => json,
            None => match self.archive.next() {
                Ok(Some(json)) => json,
                Ok(None) => {
                    self.done = true;
                    let torn = format!(
                        "{} ends without its end line: the backup is torn",
                        self.archive.from.display()
                    );
                    return Some(Err(BackupError::Order(torn)));
                }
                Err(e) => {
                    self.done = true;
                    return Some(Err(BackupError::Order(e.to_string())));
                }
            },
        };
        self.item(json).transpose()
    }
}
