//! The append-only span log: one file per (session, collection) segment, a sequence of frames
//! `[len: u32 LE][crc32 of payload: u32 LE][payload]`, each payload one OTLP
//! `ExportTraceServiceRequest` as acknowledged. A frame is acknowledged only after it was written
//! and the file fsynced; a crash can leave at most a torn last frame, which reading ignores and
//! reopening for append cuts off. Owns the file format only; the buffer decides what goes where.

use std::{
    fs::{File, OpenOptions},
    io::{self, BufReader, Read, Seek, SeekFrom, Write},
    path::Path,
};

/// Bytes before each payload.
pub const HEADER: usize = 8;
/// Largest payload a frame may carry (a sanity bound when reading a damaged file).
pub const MAX_FRAME: usize = 1 << 30;

/// `payload` framed for the log.
pub fn frame(payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + payload.len());
    out.extend_from_slice(
        &u32::try_from(payload.len())
            .unwrap_or(u32::MAX)
            .to_le_bytes(),
    );
    out.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
    out.extend_from_slice(payload);
    out
}

/// What reading a log found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Scanned {
    pub frames: u64,
    /// Length of the intact prefix.
    pub valid_len: u64,
    /// Bytes after it (a torn or damaged tail).
    pub torn: u64,
}

/// Reads frames in order, calling `each` with every intact payload; stops at the first torn or
/// damaged frame.
pub fn read(path: &Path, mut each: impl FnMut(&[u8])) -> io::Result<Scanned> {
    let file = File::open(path)?;
    let total = file.metadata()?.len();
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let mut scanned = Scanned::default();
    let mut payload = Vec::new();
    loop {
        let mut header = [0u8; HEADER];
        if read_full(&mut reader, &mut header)? < HEADER {
            break;
        }
        let (len, crc) = header.split_at(4);
        let len = u32::from_le_bytes(len.try_into().unwrap_or_default()) as usize;
        let crc = u32::from_le_bytes(crc.try_into().unwrap_or_default());
        if len > MAX_FRAME {
            break;
        }
        payload.resize(len, 0);
        if read_full(&mut reader, &mut payload)? < len || crc32fast::hash(&payload) != crc {
            break;
        }
        each(&payload);
        scanned.frames += 1;
        scanned.valid_len += (HEADER + len) as u64;
    }
    scanned.torn = total - scanned.valid_len;
    Ok(scanned)
}

fn read_full(reader: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match reader.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// A log open for appending.
#[derive(Debug)]
pub struct Appender {
    file: File,
    len: u64,
}

impl Appender {
    /// Opens (creating) the log at `path`; a torn tail is cut off. Returns what was found.
    pub fn open(path: &Path) -> io::Result<(Self, Scanned)> {
        let scanned = if path.exists() {
            read(path, |_| {})?
        } else {
            Scanned::default()
        };
        let mut file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(path)?;
        if scanned.torn > 0 {
            file.set_len(scanned.valid_len)?;
            file.sync_data()?;
        }
        file.seek(SeekFrom::Start(scanned.valid_len))?;
        Ok((
            Self {
                file,
                len: scanned.valid_len,
            },
            scanned,
        ))
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends one framed payload (not yet durable: see [`Appender::sync`]).
    pub fn append(&mut self, payload: &[u8]) -> io::Result<u64> {
        let framed = frame(payload);
        if let Err(e) = self.file.write_all(&framed) {
            self.rollback(self.len);
            return Err(e);
        }
        self.len += framed.len() as u64;
        Ok(framed.len() as u64)
    }

    /// Makes everything appended durable.
    pub fn sync(&mut self) -> io::Result<()> {
        self.file.sync_data()
    }

    /// Cuts the log back to `len` (after a failed write), best effort.
    pub fn rollback(&mut self, len: u64) {
        if self.file.set_len(len).is_ok() && self.file.seek(SeekFrom::Start(len)).is_ok() {
            self.len = len;
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    #[test]
    fn a_torn_tail_is_ignored_and_cut_on_reopen() {
        let dir = std::env::temp_dir().join(format!("otlp-log-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("a.log");
        let _ = std::fs::remove_file(&path);
        let (mut log, _) = Appender::open(&path).unwrap();
        log.append(b"one").unwrap();
        log.append(b"two").unwrap();
        log.sync().unwrap();
        // A crash in the middle of a third frame.
        let mut torn = frame(b"three");
        torn.truncate(torn.len() - 2);
        OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(&torn)
            .unwrap();
        let mut seen = Vec::new();
        let scanned = read(&path, |p| seen.push(p.to_vec())).unwrap();
        assert_eq!(seen, [b"one".to_vec(), b"two".to_vec()]);
        assert_eq!(scanned.torn, torn.len() as u64);
        let (mut log, found) = Appender::open(&path).unwrap();
        assert_eq!(found.frames, 2);
        log.append(b"four").unwrap();
        log.sync().unwrap();
        let mut seen = Vec::new();
        let scanned = read(&path, |p| seen.push(p.to_vec())).unwrap();
        assert_eq!(seen.len(), 3);
        assert_eq!(seen[2], b"four");
        assert_eq!(scanned.torn, 0);
        // A flipped byte ends the log at the damaged frame.
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[HEADER + 1] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(read(&path, |_| {}).unwrap().frames, 0);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
