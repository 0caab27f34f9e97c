//! GNU long names and PAX headers: read here rather than by the tar crate, which would read
//! each whole into memory, and capped at [`MAX_EXTENSION_BYTES`].

use std::io::{self, Read};

use super::{ExtractError, MAX_EXTENSION_BYTES, Names};

/// An entry with the long name and link that the extension headers before it gave it.
pub(super) struct Next<'a, R: Read> {
    pub(super) entry: tar::Entry<'a, R>,
    pub(super) name: Option<Vec<u8>>,
    pub(super) link: Option<Vec<u8>>,
}

/// The next entry that is not a long name or a PAX header, with the long name and link those
/// headers gave it.
pub(super) fn next_entry<'a, R: Read>(
    entries: &mut tar::Entries<'a, R>,
    names: &Names,
) -> Result<Option<Next<'a, R>>, ExtractError> {
    let mut long_name: Option<Vec<u8>> = None;
    let mut long_link: Option<Vec<u8>> = None;
    loop {
        let Some(e) = entries.next() else {
            if long_name.is_some() || long_link.is_some() {
                return Err(names.corrupt(io::Error::other(
                    "a long name or PAX header without the entry it describes",
                )));
            }
            return Ok(None);
        };
        let mut e = e.map_err(|e| names.corrupt(e))?;
        let kind = e.header().entry_type();
        let ext = kind.is_gnu_longname()
            || kind.is_gnu_longlink()
            || kind.is_pax_local_extensions()
            || kind.is_pax_global_extensions();
        if !ext {
            return Ok(Some(Next {
                entry: e,
                name: long_name,
                link: long_link,
            }));
        }
        if e.size() > MAX_EXTENSION_BYTES {
            return Err(ExtractError::Unsafe {
                artifact: names.artifact.clone(),
                path: format!("<{kind:?} header>"),
                reason: format!(
                    "{} bytes, more than the {MAX_EXTENSION_BYTES} a long name or PAX header may hold",
                    e.size()
                ),
            });
        }
        let mut buf = Vec::new();
        (&mut e)
            .take(MAX_EXTENSION_BYTES)
            .read_to_end(&mut buf)
            .map_err(|e| names.corrupt(e))?;
        let slot = if kind.is_gnu_longname() {
            &mut long_name
        } else if kind.is_gnu_longlink() {
            &mut long_link
        } else if kind.is_pax_local_extensions() {
            // rocforge's tarballs are GNU; PAX path and linkpath are honoured, a PAX size is
            // not (it would make this reader and tar(1) see different entries).
            for rec in pax_records(&buf).map_err(|e| names.corrupt(e))? {
                match rec.0.as_str() {
                    "path" => long_name = Some(rec.1),
                    "linkpath" => long_link = Some(rec.1),
                    "size" => {
                        return Err(ExtractError::Unsafe {
                            artifact: names.artifact.clone(),
                            path: "<PAX header>".into(),
                            reason: "a PAX size record (rocforge tarballs carry none)".into(),
                        });
                    }
                    _ => {}
                }
            }
            continue;
        } else {
            continue;
        };
        if slot.is_some() {
            return Err(names.corrupt(io::Error::other("two long names describing the same entry")));
        }
        if buf.last() == Some(&0) {
            buf.pop();
        }
        *slot = Some(buf);
    }
}

/// PAX records (`LEN KEY=VALUE\n`).
fn pax_records(mut buf: &[u8]) -> io::Result<Vec<(String, Vec<u8>)>> {
    let bad = || io::Error::other("a malformed PAX record");
    let mut out = Vec::new();
    while !buf.is_empty() {
        let sp = buf.iter().position(|&b| b == b' ').ok_or_else(bad)?;
        let len: usize = std::str::from_utf8(&buf[..sp])
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(bad)?;
        if len <= sp + 1 || len > buf.len() || buf[len - 1] != b'\n' {
            return Err(bad());
        }
        let rec = &buf[sp + 1..len - 1];
        let eq = rec.iter().position(|&b| b == b'=').ok_or_else(bad)?;
        out.push((
            String::from_utf8_lossy(&rec[..eq]).into_owned(),
            rec[eq + 1..].to_vec(),
        ));
        buf = &buf[len..];
    }
    Ok(out)
}
