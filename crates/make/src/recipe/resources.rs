//! `[resources]`: what a build needs of the machine (disk, memory, time).

use serde::Serialize;

use crate::diag::reader::{Sp, TableReader};
use crate::diag::{Diagnostic, Diagnostics};
use crate::units::parse_size;

#[derive(Debug, Clone, Copy, Serialize, schemars::JsonSchema)]
pub struct Resources {
    /// The most disk the build takes at once: its build directory and what it installs.
    pub disk_bytes: u64,
    /// What stays in the store once the build directory is gone (`installed`). Absent when the
    /// recipe does not say: then all of `disk_bytes` is counted as staying.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub installed_bytes: Option<u64>,
    /// Peak memory of one compile job.
    pub memory_bytes: u64,
    /// Build time on the reference machine (8 cores).
    pub hours: f64,
}

/// Resource hints as written: the keys a table left out are taken from elsewhere (the defaults,
/// or in a line's override the base recipe's values).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ResourceHints {
    pub disk_bytes: Option<u64>,
    pub installed_bytes: Option<u64>,
    pub memory_bytes: Option<u64>,
    pub hours: Option<f64>,
}

impl ResourceHints {
    pub fn over(self, base: Resources) -> Resources {
        Resources {
            disk_bytes: self.disk_bytes.unwrap_or(base.disk_bytes),
            // The base's figure goes with the base's disk: a line that measures its own disk
            // and says nothing of what stays does not inherit another build's split.
            installed_bytes: match self.disk_bytes {
                Some(_) => self.installed_bytes,
                None => self.installed_bytes.or(base.installed_bytes),
            },
            memory_bytes: self.memory_bytes.unwrap_or(base.memory_bytes),
            hours: self.hours.unwrap_or(base.hours),
        }
    }
}

impl Default for Resources {
    fn default() -> Self {
        Self {
            disk_bytes: 2 << 30,
            installed_bytes: None,
            memory_bytes: 2 << 30,
            hours: 0.5,
        }
    }
}

pub(super) fn read_resources(t: TableReader<'_, '_>, d: &mut Diagnostics) -> Resources {
    read_resource_hints(t, d).over(Resources::default())
}

/// The keys of a `[resources]` table that were given: a line's override changes only those.
pub(super) fn read_resource_hints(
    mut t: TableReader<'_, '_>,
    d: &mut Diagnostics,
) -> ResourceHints {
    let file = t.file().clone();
    let disk = t.opt_str("disk", d);
    let installed = t.opt_str("installed", d);
    let memory = t.opt_str("memory", d);
    let hours = t.opt_number("hours", d);
    t.finish(d);
    let size = |d: &mut Diagnostics, v: Option<Sp<String>>| {
        let s = v?;
        let parsed = parse_size(&s);
        if parsed.is_none() {
            d.push(
                Diagnostic::new(format!("malformed size \"{}\"", s.value))
                    .at(&file, s.span.clone(), "expected e.g. 8GiB or 512MiB")
                    .hint(
                        "sizes are a number and a unit: B, KiB, MiB, GiB, TiB (or KB, MB, GB, TB)",
                    ),
            );
        }
        parsed
    };
    let disk_bytes = size(d, disk.clone());
    let mut installed_bytes = size(d, installed.clone());
    let memory_bytes = size(d, memory);
    if let (Some(i), Some(total), Some(at), Some(whole)) = (
        installed_bytes,
        disk_bytes,
        installed.as_ref(),
        disk.as_ref(),
    ) && i > total
    {
        d.push(
            Diagnostic::new(format!(
                "installed = \"{}\" is more than disk = \"{}\"",
                at.value, whole.value
            ))
            .at(&file, at.span.clone(), "more than the whole build takes")
            .hint("disk is the most the build takes at once, what it installs included; installed is the part that stays"),
        );
        installed_bytes = None;
    }
    let hours = hours.and_then(|h| {
        if h.value >= 0.0 && h.value < 1000.0 {
            return Some(h.value);
        }
        d.push(
            Diagnostic::new(format!("hours = {} is out of range", h.value))
                .at(&file, h.span.clone(), "expected 0 to 1000")
                .hint("hours is the build time on an 8-core reference machine"),
        );
        None
    });
    ResourceHints {
        disk_bytes,
        installed_bytes,
        memory_bytes,
        hours,
    }
}
