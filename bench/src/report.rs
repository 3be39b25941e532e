//! Result files for the GPU binaries: a header (device, driver, commit, date) and a body,
//! written as markdown and as JSON side by side. Hand-written JSON: strings are escaped,
//! numbers are plain; no dependency needed.

use std::path::{Path, PathBuf};

/// Where and when a result was measured.
pub struct Meta {
    pub device: String,
    pub driver: String,
    pub commit: String,
    pub date: String,
}

impl Meta {
    /// `commit`: the `--commit` argument, else `BARO_COMMIT`, else "unknown" (the GPU
    /// machine has no git).
    pub fn new(device: String, driver: String, commit: Option<String>) -> Meta {
        let commit = commit
            .or_else(|| std::env::var("BARO_COMMIT").ok())
            .filter(|c| !c.is_empty())
            .unwrap_or_else(|| "unknown".into());
        Meta { device, driver, commit, date: utc_now() }
    }

    pub fn markdown_header(&self) -> String {
        format!(
            "- device: {}\n- driver: {}\n- commit: {}\n- date: {}\n",
            self.device, self.driver, self.commit, self.date
        )
    }

    pub fn json_fields(&self) -> String {
        format!(
            "\"device\": {}, \"driver\": {}, \"commit\": {}, \"date\": {}",
            json_str(&self.device),
            json_str(&self.driver),
            json_str(&self.commit),
            json_str(&self.date)
        )
    }
}

/// A JSON string literal.
pub fn json_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out += "\\\"",
            '\\' => out += "\\\\",
            '\n' => out += "\\n",
            c if (c as u32) < 0x20 => out += &format!("\\u{:04x}", c as u32),
            c => out.push(c),
        }
    }
    out + "\""
}

/// Writes `markdown` to `path` and `json` next to it (same stem, `.json`).
pub fn write_pair(path: &Path, markdown: &str, json: &str) -> std::io::Result<PathBuf> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, markdown)?;
    let json_path = path.with_extension("json");
    std::fs::write(&json_path, json)?;
    Ok(json_path)
}

/// The current UTC time as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn utc_now() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let (days, rem) = ((secs / 86400) as i64, secs % 86400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}
