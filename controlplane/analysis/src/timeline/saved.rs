//! An index on disk, so that a restarted service does not read the report again: the track
//! tree, the names and each track's columns (little-endian, versioned); rows and pyramids are
//! rebuilt from the columns on load (a fraction of reading SQLite). A file that does not read
//! back exactly is ignored and the report is indexed again.
//!
//! ```text
//!  "NSTI" v1 | start end top | names | notes | tracks (JSON) | per track: n, start[n] end[n]
//!  name[n] row[n] source[n] rowid[n]
//! ```

use std::{
    io::{self, BufReader, BufWriter, Read, Write},
    path::Path,
};

use nsight_contracts::timeline::Track;

use super::index::{Index, Source, TrackEvents};

const MAGIC: [u8; 4] = *b"NSTI";
const VERSION: u32 = 1;
const SOURCES: [Source; 6] = [
    Source::Nvtx,
    Source::Runtime,
    Source::Osrt,
    Source::Kernel,
    Source::Memcpy,
    Source::Memset,
];

fn bad(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_owned())
}

fn put_str(w: &mut impl Write, s: &str) -> io::Result<()> {
    w.write_all(&(s.len() as u64).to_le_bytes())?;
    w.write_all(s.as_bytes())
}

/// Writes `index` to `path` (through a temporary file, renamed when complete).
pub fn save(index: &Index, path: &Path) -> io::Result<()> {
    let tmp = path.with_extension("index.partial");
    {
        let mut w = BufWriter::new(std::fs::File::create(&tmp)?);
        w.write_all(&MAGIC)?;
        w.write_all(&VERSION.to_le_bytes())?;
        w.write_all(&index.start_ns.to_le_bytes())?;
        w.write_all(&index.end_ns.to_le_bytes())?;
        w.write_all(&[index.top_level])?;
        for list in [&index.names, &index.notes] {
            w.write_all(&(list.len() as u64).to_le_bytes())?;
            for s in list {
                put_str(&mut w, s)?;
            }
        }
        let tracks = serde_json::to_string(&index.tracks).map_err(io::Error::other)?;
        put_str(&mut w, &tracks)?;
        for ev in &index.events {
            w.write_all(&(ev.len() as u64).to_le_bytes())?;
            for v in &ev.start {
                w.write_all(&v.to_le_bytes())?;
            }
            for v in &ev.end {
                w.write_all(&v.to_le_bytes())?;
            }
            for v in &ev.name {
                w.write_all(&v.to_le_bytes())?;
            }
            for v in &ev.row {
                w.write_all(&v.to_le_bytes())?;
            }
            for s in &ev.source {
                let code = SOURCES.iter().position(|x| x == s).unwrap_or(0) as u8;
                w.write_all(&[code])?;
            }
            for v in &ev.rowid {
                w.write_all(&v.to_le_bytes())?;
            }
        }
        w.flush()?;
        w.get_ref().sync_all()?;
    }
    std::fs::rename(&tmp, path)
}

struct Reader<R> {
    r: R,
    left: u64,
}

impl<R: Read> Reader<R> {
    fn bytes<const N: usize>(&mut self) -> io::Result<[u8; N]> {
        let mut b = [0u8; N];
        self.r.read_exact(&mut b)?;
        self.left = self.left.saturating_sub(N as u64);
        Ok(b)
    }

    /// A count of items of at least `item` bytes, refused when the file cannot hold them.
    fn count(&mut self, item: u64) -> io::Result<usize> {
        let n = u64::from_le_bytes(self.bytes()?);
        if n.saturating_mul(item) > self.left {
            return Err(bad("a count larger than the file"));
        }
        Ok(n as usize)
    }

    fn string(&mut self) -> io::Result<String> {
        let n = self.count(1)?;
        let mut b = vec![0u8; n];
        self.r.read_exact(&mut b)?;
        self.left = self.left.saturating_sub(n as u64);
        String::from_utf8(b).map_err(|_| bad("a name is not UTF-8"))
    }

    fn column<T, const N: usize>(&mut self, n: usize, f: fn([u8; N]) -> T) -> io::Result<Vec<T>> {
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            out.push(f(self.bytes()?));
        }
        Ok(out)
    }
}

/// Reads what [`save`] wrote; an error when the file is not one, or not whole.
pub fn load(path: &Path) -> io::Result<Index> {
    let file = std::fs::File::open(path)?;
    let left = file.metadata()?.len();
    let mut r = Reader {
        r: BufReader::new(file),
        left,
    };
    if r.bytes::<4>()? != MAGIC || u32::from_le_bytes(r.bytes()?) != VERSION {
        return Err(bad("not a saved timeline index of this version"));
    }
    let start_ns = i64::from_le_bytes(r.bytes()?);
    let end_ns = i64::from_le_bytes(r.bytes()?);
    let top_level = r.bytes::<1>()?[0];
    let mut lists = Vec::new();
    for _ in 0..2 {
        let n = r.count(8)?;
        lists.push((0..n).map(|_| r.string()).collect::<io::Result<Vec<_>>>()?);
    }
    let notes = lists.pop().unwrap_or_default();
    let names = lists.pop().unwrap_or_default();
    let tracks: Vec<Track> =
        serde_json::from_str(&r.string()?).map_err(|e| bad(&format!("the tracks: {e}")))?;
    let mut events = Vec::with_capacity(tracks.len());
    for _ in &tracks {
        let n = r.count(31)?;
        let mut ev = TrackEvents {
            start: r.column(n, i64::from_le_bytes)?,
            end: r.column(n, i64::from_le_bytes)?,
            name: r.column(n, u32::from_le_bytes)?,
            row: r.column(n, u16::from_le_bytes)?,
            source: r.column(n, |[b]: [u8; 1]| {
                SOURCES.get(usize::from(b)).copied().unwrap_or(Source::Nvtx)
            })?,
            rowid: r.column(n, i64::from_le_bytes)?,
            rows: Vec::new(),
        };
        ev.rows = super::index::rows_of(&ev, start_ns, top_level);
        events.push(ev);
    }
    if r.left != 0 {
        return Err(bad("bytes after the last track"));
    }
    Ok(Index {
        start_ns,
        end_ns,
        top_level,
        tracks,
        events,
        names,
        notes,
    })
}

#[cfg(test)]
mod tests {
    use nsight_contracts::timeline::TrackKind;

    use super::super::index::{RawEvent, TrackSource};
    use super::*;

    #[test]
    fn an_index_reads_back_with_the_same_tiles_and_a_cut_file_is_refused() {
        let events: Vec<RawEvent> = (0..5000)
            .map(|i| RawEvent {
                start: i * 100,
                end: i * 100 + 10 + (i % 90),
                name: (i % 3) as u32,
                source: if i % 2 == 0 {
                    Source::Kernel
                } else {
                    Source::Memcpy
                },
                rowid: 7 * i,
            })
            .chain([RawEvent {
                start: 50,
                end: 400_000,
                name: 2,
                source: Source::Nvtx,
                rowid: 1,
            }])
            .collect();
        let index = Index::build(
            vec![
                TrackSource {
                    kind: TrackKind::Gpu,
                    label: "GPU 0".into(),
                    parent: None,
                    events: vec![],
                },
                TrackSource {
                    kind: TrackKind::Stream,
                    label: "Stream 7".into(),
                    parent: Some(0),
                    events,
                },
            ],
            vec!["a".into(), "b".into(), "ç".into()],
            vec!["a note".into()],
        );
        let dir = std::env::temp_dir().join(format!("nsti-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("x.index");
        save(&index, &path).unwrap();
        let back = load(&path).unwrap();
        assert_eq!(back.tracks, index.tracks);
        assert_eq!(
            (back.names.clone(), back.notes.clone()),
            (index.names.clone(), index.notes.clone())
        );
        assert_eq!(back.events[1].rowid, index.events[1].rowid);
        assert_eq!(back.events[1].source, index.events[1].source);
        for level in [0, 5, 9, index.top_level] {
            let tiles = ((index.end_ns - index.start_ns) >> level) / 512 + 1;
            for i in 0..tiles as u64 {
                assert_eq!(
                    back.tile(1, level, i),
                    index.tile(1, level, i),
                    "level {level} tile {i}"
                );
            }
        }
        let bytes = std::fs::read(&path).unwrap();
        for cut in [0, 3, 20, bytes.len() / 2, bytes.len() - 1] {
            std::fs::write(&path, &bytes[..cut]).unwrap();
            assert!(load(&path).is_err(), "cut at {cut} accepted");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
