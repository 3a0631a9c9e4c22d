//! Record framing for the raft files under a group's directory: every record is
//! `len: u32 LE | crc32c(payload): u32 LE | payload`, so a torn tail (a crash in the
//! middle of an append) is told apart from corruption inside the file. Also the
//! atomic whole-file write (temp file, fsync, rename, fsync of the directory) used for
//! the vote and the snapshot.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;

/// CRC-32C (Castagnoli), with the CPU's instruction where there is one (the stream
/// store's; the table-driven `crc` crate cost a few percent of a replicated 1 KiB publish).
use crate::jetstream::store::file::record::{crc32c, crc32c_append};
pub(crate) const HEADER: usize = 8;
/// Larger records are refused on write and taken as corruption on read: no bad length
/// field can make us allocate without bound.
pub(crate) const MAX_RECORD: usize = 256 * 1024 * 1024;

/// Appends one framed record to `out`.
pub(crate) fn encode(out: &mut Vec<u8>, payload: &[u8]) -> io::Result<()> {
    check_len(payload.len())?;
    let at = open_record(out);
    out.extend_from_slice(payload);
    seal(out, at, &[])
}

/// Refuses a record over [`MAX_RECORD`] bytes.
fn check_len(len: usize) -> io::Result<()> {
    if len > MAX_RECORD {
        return Err(io::Error::other(format!(
            "raft record of {len} bytes is over the {MAX_RECORD} byte limit"
        )));
    }
    Ok(())
}

/// Starts a record in `out` whose bytes will be what is appended to `out` after this call,
/// then `tail` (see [`seal`]); returns where its header is.
pub(crate) fn open_record(out: &mut Vec<u8>) -> usize {
    let at = out.len();
    out.extend_from_slice(&[0; HEADER]);
    at
}

/// Completes the record opened at `at` by [`open_record`]: its bytes are `out[at + HEADER..]`
/// followed by `tail`, which the caller writes right after them (without copying it here).
pub(crate) fn seal(out: &mut [u8], at: usize, tail: &[u8]) -> io::Result<()> {
    let head = &out[at + HEADER..];
    let len = head.len() + tail.len();
    check_len(len)?;
    let crc = crc32c_append(crc32c(head), tail);
    out[at..at + 4].copy_from_slice(&(len as u32).to_le_bytes());
    out[at + 4..at + HEADER].copy_from_slice(&crc.to_le_bytes());
    Ok(())
}

/// What a file of records holds.
pub(crate) struct Decoded<'a> {
    pub records: Vec<&'a [u8]>,
    /// Bytes of whole, valid records from the start; a torn tail starts here.
    pub valid_len: usize,
    /// The file ended inside its last record (or that last record fails its crc):
    /// the write that crashed was never acknowledged, so it is dropped.
    pub torn_tail: bool,
}

/// Splits `buf` into records, as [`scan`] reads a file. A bad record that is not the last
/// one in the file is corruption and an error naming its offset.
pub(crate) fn decode_all(buf: &[u8]) -> Result<Decoded<'_>, String> {
    let mut places = Vec::new();
    let scanned = scan_from(buf, buf.len() as u64, |at, rec| {
        places.push((at as usize + HEADER, rec.len()));
        Ok(())
    })?;
    Ok(Decoded {
        records: places.iter().map(|&(at, n)| &buf[at..at + n]).collect(),
        valid_len: scanned.valid_len as usize,
        torn_tail: scanned.torn_tail,
    })
}

/// How far [`scan`] got.
pub(crate) struct Scanned {
    /// Bytes of whole, valid records from the start; a torn tail starts here.
    pub valid_len: u64,
    /// As [`Decoded::torn_tail`].
    pub torn_tail: bool,
}

/// Reads the records of `file` in order without holding the file in memory: `each` gets
/// every valid record's offset and payload. A record cut short by the end of the file, or
/// the last one failing its crc, is a torn tail (reported, not an error); any other bad
/// record is corruption and an error naming its offset.
pub(crate) fn scan(
    file: &File,
    each: impl FnMut(u64, &[u8]) -> Result<(), String>,
) -> Result<Scanned, String> {
    let size = file.metadata().map_err(|e| e.to_string())?.len();
    scan_from(io::BufReader::with_capacity(1 << 20, file), size, each)
}

/// [`scan`] over `size` bytes read from `r`.
fn scan_from(
    mut r: impl Read,
    size: u64,
    mut each: impl FnMut(u64, &[u8]) -> Result<(), String>,
) -> Result<Scanned, String> {
    let mut payload = Vec::new();
    let mut pos = 0u64;
    let torn = |pos| {
        Ok(Scanned {
            valid_len: pos,
            torn_tail: true,
        })
    };
    while pos < size {
        let mut head = [0u8; HEADER];
        if size - pos < HEADER as u64 {
            return torn(pos);
        }
        r.read_exact(&mut head).map_err(|e| e.to_string())?;
        let len = u32::from_le_bytes([head[0], head[1], head[2], head[3]]) as usize;
        let crc = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
        if len > MAX_RECORD {
            return Err(format!(
                "record at offset {pos} claims {len} bytes (limit {MAX_RECORD})"
            ));
        }
        let end = pos + (HEADER + len) as u64;
        if end > size {
            return torn(pos);
        }
        payload.resize(len, 0);
        r.read_exact(&mut payload).map_err(|e| e.to_string())?;
        if crc32c(&payload) != crc {
            if end == size {
                return torn(pos);
            }
            return Err(format!(
                "record at offset {pos} ({len} bytes) fails its crc"
            ));
        }
        each(pos, &payload)?;
        pos = end;
    }
    Ok(Scanned {
        valid_len: pos,
        torn_tail: false,
    })
}

/// The payload of the record of `len` bytes at offset `at` of `file`, checked against its
/// header and crc.
pub(crate) fn read_at(file: &File, at: u64, len: u32) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; HEADER + len as usize];
    file.read_exact_at(&mut buf, at)?;
    let bad = |why: &str| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("record at offset {at}: {why}"),
        )
    };
    if buf[..4] != len.to_le_bytes() {
        return Err(bad("its length is not the one recorded"));
    }
    let crc = u32::from_le_bytes([buf[4], buf[5], buf[6], buf[7]]);
    buf.drain(..HEADER);
    if crc32c(&buf) != crc {
        return Err(bad("fails its crc"));
    }
    Ok(buf)
}

/// Fsyncs a directory so a rename or a new file in it survives a crash.
pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Replaces `path` with one framed record holding `payload`, durably: after this returns
/// a crash leaves either the old or the new content, never a mix.
pub(crate) fn write_atomic(path: &Path, payload: &[u8]) -> io::Result<()> {
    let mut buf = Vec::with_capacity(payload.len() + HEADER);
    encode(&mut buf, payload)?;
    write_atomic_raw(path, &buf)
}

/// Replaces `path` with `bytes` (already framed), durably.
pub(crate) fn write_atomic_raw(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_atomic_with(path, |w| w.write_all(bytes))
}

/// Replaces `path` with what `fill` writes, durably (as [`write_atomic_raw`], without
/// holding the whole content in memory).
pub(crate) fn write_atomic_with(
    path: &Path,
    fill: impl FnOnce(&mut BufWriter<File>) -> io::Result<()>,
) -> io::Result<()> {
    let tmp = path.with_extension("tmp");
    {
        let f = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .open(&tmp)?;
        let mut w = BufWriter::with_capacity(1 << 20, f);
        fill(&mut w)?;
        let f = w.into_inner().map_err(|e| e.into_error())?;
        f.sync_all()?;
    }
    fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        sync_dir(dir)?;
    }
    Ok(())
}

/// Reads a file written by [`write_atomic`]: `None` when it does not exist. A file
/// that is not exactly one valid record is an error (an atomic write never tears).
pub(crate) fn read_single(path: &Path) -> io::Result<Option<Vec<u8>>> {
    let buf = match fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io::Error::new(e.kind(), format!("{}: {e}", path.display()))),
    };
    let bad = |why: String| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: {why}", path.display()),
        )
    };
    let d = decode_all(&buf).map_err(bad)?;
    if d.torn_tail || d.records.len() != 1 {
        return Err(bad(format!(
            "expected one whole record, found {} and {} stray bytes",
            d.records.len(),
            buf.len() - d.valid_len
        )));
    }
    Ok(Some(d.records[0].to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The checksum is CRC-32C as the `crc` crate computed it before (files written then
    /// still verify): its check value, and agreement at lengths around the 8-byte steps.
    #[test]
    fn checksum_is_standard_crc32c() {
        use crc::{Crc, CRC_32_ISCSI};
        let table = Crc::<u32>::new(&CRC_32_ISCSI);
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        let data: Vec<u8> = (0..100u8).map(|i| i.wrapping_mul(37)).collect();
        for n in 0..data.len() {
            assert_eq!(crc32c(&data[..n]), table.checksum(&data[..n]), "{n} bytes");
        }
    }

    #[test]
    fn torn_tail_and_corruption_are_told_apart() {
        let mut buf = Vec::new();
        encode(&mut buf, b"one").unwrap();
        encode(&mut buf, b"two").unwrap();
        let whole = buf.len();
        let d = decode_all(&buf).unwrap();
        assert_eq!(d.records, vec![&b"one"[..], &b"two"[..]]);
        assert!(!d.torn_tail);
        // Cut inside the last record: torn tail, first record kept.
        let d = decode_all(&buf[..whole - 1]).unwrap();
        assert_eq!(d.records.len(), 1);
        assert!(d.torn_tail);
        // Flip a byte in the first record: corruption.
        let mut bad = buf.clone();
        bad[HEADER] ^= 0xff;
        assert!(decode_all(&bad).is_err());
        // A huge length is refused, not allocated.
        let mut huge = Vec::new();
        huge.extend_from_slice(&u32::MAX.to_le_bytes());
        huge.extend_from_slice(&[0; 12]);
        assert!(decode_all(&huge).is_err());
    }

    /// Reading a file record by record, cut at every length: the whole records before the
    /// cut at their offsets, a torn tail exactly when the cut is inside a record, and each
    /// record reads back alone from its offset; a damaged record before the last is an error.
    #[test]
    fn scanning_a_file_cut_anywhere_finds_its_whole_records() {
        let dir = std::env::temp_dir().join(format!("natsd-frame-scan-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f");
        let payloads = [&b"one"[..], b"", &[9u8; 3000][..], b"four"];
        let mut buf = Vec::new();
        let mut places = Vec::new();
        for p in payloads {
            places.push(buf.len() as u64);
            encode(&mut buf, p).unwrap();
        }
        let scan_file = |bytes: &[u8]| {
            std::fs::write(&path, bytes).unwrap();
            let f = File::open(&path).unwrap();
            let mut got = Vec::new();
            let res = scan(&f, |at, p| {
                got.push((at, p.to_vec()));
                Ok(())
            });
            (f, res, got)
        };
        for n in 0..=buf.len() {
            let (f, res, got) = scan_file(&buf[..n]);
            let s = res.expect("a cut file scans");
            let whole: Vec<(u64, Vec<u8>)> = places
                .iter()
                .zip(payloads)
                .filter(|(at, p)| **at as usize + HEADER + p.len() <= n)
                .map(|(at, p)| (*at, p.to_vec()))
                .collect();
            let valid = whole
                .last()
                .map_or(0, |(at, p)| *at as usize + HEADER + p.len());
            assert_eq!(got, whole, "cut at {n}");
            assert_eq!((s.valid_len as usize, s.torn_tail), (valid, valid != n));
            for (at, p) in &got {
                assert_eq!(&read_at(&f, *at, p.len() as u32).unwrap(), p);
            }
        }
        let mut flipped = buf.clone();
        flipped[HEADER] ^= 0xff;
        let (_, res, _) = scan_file(&flipped);
        assert!(
            res.is_err_and(|e| e.contains("offset 0")),
            "a damaged first record"
        );
        std::fs::write(&path, &buf).unwrap();
        let f = File::open(&path).unwrap();
        assert!(read_at(&f, 0, 4).is_err(), "a wrong length is refused");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
