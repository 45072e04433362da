//! The allow-list of a PyTorch state dict's pickle, checked before the
//! pickle is handed to the reader (`pytorch-reader`).
//!
//! The reader executes nothing: it is a Rust stack machine that interprets a
//! few tensor-rebuild calls and keeps every other call as an inert value.
//! But it accepts *any* global silently (`os.system` becomes an opaque
//! object), and it reads a whole pickled `nn.Module` (globals from
//! `__main__`) as its state dict. specbound reads state dicts only, so every
//! global the pickle names must be one a state dict needs
//! (`ALLOWED_GLOBALS`); anything else is refused, naming the global, before
//! the reader runs.
//!
//! This is a scan of the opcode stream, not an unpickler: it builds no
//! objects. It knows every opcode's argument layout (protocols 0 to 5, the
//! same opcode set the reader implements; any other byte is refused), reads
//! the module and name of `GLOBAL` from its text arguments and those of
//! `STACK_GLOBAL` from the two string literals immediately pushed before it
//! (directly or from the memo), and refuses `STACK_GLOBAL` when its operands
//! are anything else, `INST`/`OBJ` (protocol 0 instance creation), the
//! extension registry (`EXT1/2/4`) and out-of-band buffers: the ways a
//! pickle can reach a callable other than a named global. Scanning and
//! reading see the same bytes (the same zip entry through the same `zip`
//! crate, the same file descriptor), so what is scanned is what is read.
//!
//! Caps: `MAX_PICKLE_BYTES` of pickle and
//! `MAX_PICKLE_OPS` opcodes per file, so
//! the reader's stack machine (about 100 bytes per value) stays bounded.

use std::collections::HashMap;
use std::io::Read;

/// The globals a `torch.save(model.state_dict())` pickle uses: the ordered
/// dict, the tensor and parameter rebuild functions, and the typed storage
/// classes named in persistent ids.
pub(crate) const ALLOWED_GLOBALS: &[(&str, &str)] = &[
    ("collections", "OrderedDict"),
    ("torch._utils", "_rebuild_tensor"),
    ("torch._utils", "_rebuild_tensor_v2"),
    ("torch._utils", "_rebuild_parameter"),
    ("torch", "FloatStorage"),
    ("torch", "DoubleStorage"),
    ("torch", "HalfStorage"),
    ("torch", "BFloat16Storage"),
    ("torch", "LongStorage"),
    ("torch", "IntStorage"),
    ("torch", "ShortStorage"),
    ("torch", "CharStorage"),
    ("torch", "ByteStorage"),
    ("torch", "BoolStorage"),
];

/// Why a pickle was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScanError {
    /// A global outside `ALLOWED_GLOBALS` (`module.name`), at a byte offset.
    Global {
        /// `module.name` as written in the pickle.
        name: String,
        /// Offset of the opcode in the pickle.
        offset: u64,
    },
    /// An opcode that reaches a callable other than through a named global,
    /// or one the reader does not implement.
    Opcode {
        /// What the opcode is.
        what: String,
        /// Offset of the opcode in the pickle.
        offset: u64,
    },
    /// Malformed or over a cap.
    Malformed(String),
}

impl std::fmt::Display for ScanError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ScanError::Global { name, offset } => write!(
                f,
                "refused: the pickle names the global '{}' (byte {offset}), which a state dict \
                 never needs; only collections.OrderedDict, torch._utils._rebuild_tensor(_v2), \
                 torch._utils._rebuild_parameter and torch.*Storage are accepted (nothing in the \
                 file was executed)",
                super::fmt_name(name)
            ),
            ScanError::Opcode { what, offset } => write!(
                f,
                "refused: the pickle uses {what} (byte {offset}), which a state dict never \
                 needs (nothing in the file was executed)"
            ),
            ScanError::Malformed(m) => write!(f, "malformed pickle: {m}"),
        }
    }
}

/// Whether `module.name` is a global a state dict needs.
pub(crate) fn allowed(module: &str, name: &str) -> bool {
    ALLOWED_GLOBALS
        .iter()
        .any(|&(m, n)| m == module && n == name)
}

/// The opcode-stream state shared by the pickles of one file (caps count
/// over all of them).
pub struct Scanner {
    ops: u64,
    bytes: u64,
    max_ops: u64,
    max_bytes: u64,
    /// The string literals pushed (directly or from the memo), when asked
    /// for: a legacy checkpoint's storage key list is a list of them.
    strings: Option<Vec<String>>,
}

/// What is known of the top two stack slots: string literals or unknown.
#[derive(Default)]
struct Top2 {
    below: Option<String>,
    top: Option<String>,
}

impl Top2 {
    fn push(&mut self, s: Option<String>) {
        self.below = self.top.take();
        self.top = s;
    }
    fn forget(&mut self) {
        self.below = None;
        self.top = None;
    }
}

impl Scanner {
    /// A scanner with the given caps (opcodes and bytes, over every pickle scanned).
    pub fn new(max_ops: u64, max_bytes: u64) -> Self {
        Self {
            ops: 0,
            bytes: 0,
            max_ops,
            max_bytes,
            strings: None,
        }
    }

    /// Starts (or stops) collecting the string literals pushed by the
    /// pickles scanned from now on; [`take_strings`](Self::take_strings)
    /// returns them.
    pub fn collect_strings(&mut self, on: bool) {
        self.strings = on.then(Vec::new);
    }

    /// The string literals collected since [`collect_strings`](Self::collect_strings).
    pub fn take_strings(&mut self) -> Vec<String> {
        self.strings.take().unwrap_or_default()
    }

    fn seen(&mut self, s: &Option<String>) {
        if let (Some(v), Some(s)) = (self.strings.as_mut(), s) {
            v.push(s.clone());
        }
    }

    fn take(&mut self, r: &mut impl Read, n: u64) -> Result<Vec<u8>, ScanError> {
        self.bytes = self.bytes.saturating_add(n);
        if self.bytes > self.max_bytes {
            return Err(ScanError::Malformed(format!(
                "pickle larger than the limit of {} bytes",
                self.max_bytes
            )));
        }
        // Bounded by the byte cap, so this allocation is too.
        let mut buf = Vec::with_capacity(n.min(1 << 16) as usize);
        r.by_ref()
            .take(n)
            .read_to_end(&mut buf)
            .map_err(|e| ScanError::Malformed(format!("cannot read the pickle: {e}")))?;
        if (buf.len() as u64) < n {
            return Err(ScanError::Malformed(format!(
                "truncated: {n} bytes expected, {} present",
                buf.len()
            )));
        }
        Ok(buf)
    }

    fn byte(&mut self, r: &mut impl Read) -> Result<u8, ScanError> {
        Ok(self.take(r, 1)?[0])
    }

    fn uint(&mut self, r: &mut impl Read, n: u64) -> Result<u64, ScanError> {
        let b = self.take(r, n)?;
        let mut v = [0u8; 8];
        v[..n as usize].copy_from_slice(&b);
        Ok(u64::from_le_bytes(v))
    }

    /// A text argument up to `\n` (protocol 0), at most 64 KiB.
    fn line(&mut self, r: &mut impl Read) -> Result<String, ScanError> {
        let mut out = Vec::new();
        loop {
            let b = self.byte(r)?;
            if b == b'\n' {
                break;
            }
            if out.len() >= 1 << 16 {
                return Err(ScanError::Malformed("text argument over 64 KiB".into()));
            }
            out.push(b);
        }
        if out.last() == Some(&b'\r') {
            out.pop();
        }
        Ok(String::from_utf8_lossy(&out).into_owned())
    }

    fn utf8(&mut self, r: &mut impl Read, n: u64) -> Result<Option<String>, ScanError> {
        Ok(String::from_utf8(self.take(r, n)?).ok())
    }

    /// Scans one pickle (up to and including its `STOP`) from `r`, whose
    /// first byte is at `base` in the stream (for messages); returns the
    /// number of bytes it consumed.
    pub fn scan(&mut self, r: &mut impl Read, base: u64) -> Result<u64, ScanError> {
        let mut memo = Memo::new();
        let mut top = Top2::default();
        let start = self.bytes;
        loop {
            let offset = base + (self.bytes - start);
            self.ops += 1;
            if self.ops > self.max_ops {
                return Err(ScanError::Malformed(format!(
                    "more than {} opcodes (about 30 per tensor in a real state dict)",
                    self.max_ops
                )));
            }
            let op = self.byte(r)?;
            match op {
                b'.' => return Ok(self.bytes - start),
                0x80 | 0x95 | 0x82..=0x84 | 0x97 | 0x98 => self.framing(op, r, offset)?,
                b'i' | b'o' | b'c' | 0x93 => self.global(op, r, offset, &mut top)?,
                b'p' | b'q' | b'r' | 0x94 | b'g' | b'h' | b'j' => {
                    self.memo(op, r, offset, &mut memo, &mut top)?
                }
                0x8c | b'X' | 0x8d => self.string_literal(op, r, &mut top)?,
                b'V' | b'I' | b'L' | b'F' | b'P' | b'J' | b'M' | b'K' | b'G' | b'U' | b'C'
                | 0x8a | b'T' | b'B' | 0x8b | 0x8e | 0x96 => self.other_value(op, r, &mut top)?,
                // No arguments: stack changes whose results are not strings.
                b'(' | b'0' | b'1' | b'2' | b'N' | b'R' | b'b' | b'd' | b'l' | b't' | b's'
                | b'a' | b')' | b']' | b'}' | b'e' | b'u' | b'Q' | 0x81 | 0x85 | 0x86 | 0x87
                | 0x88 | 0x89 | 0x8f | 0x90 | 0x91 | 0x92 => top.forget(),
                other => {
                    return Err(ScanError::Malformed(format!(
                        "unknown opcode 0x{other:02x} at byte {offset}"
                    )))
                }
            }
        }
    }

    /// PROTO and FRAME (checked, skipped); EXT1..4 and the out-of-band
    /// buffers (refused).
    fn framing(&mut self, op: u8, r: &mut impl Read, offset: u64) -> Result<(), ScanError> {
        match op {
            0x80 => {
                let v = self.byte(r)?;
                if v > 5 {
                    return Err(ScanError::Malformed(format!(
                        "pickle protocol {v} (0 to 5 exist)"
                    )));
                }
            }
            0x95 => {
                self.uint(r, 8)?;
            }
            0x82..=0x84 => return refuse("the extension registry (EXT1/EXT2/EXT4)", offset),
            0x97 | 0x98 => {
                return refuse("out-of-band buffers (NEXT_BUFFER/READONLY_BUFFER)", offset)
            }
            _ => unreachable!("scan dispatches only framing opcodes here"),
        }
        Ok(())
    }

    /// INST and OBJ (refused), GLOBAL and STACK_GLOBAL (only the allowed
    /// globals, and STACK_GLOBAL only of string literals just pushed).
    fn global(
        &mut self,
        op: u8,
        r: &mut impl Read,
        offset: u64,
        top: &mut Top2,
    ) -> Result<(), ScanError> {
        match op {
            b'i' => {
                let m = self.line(r)?;
                let n = self.line(r)?;
                return Err(ScanError::Global {
                    name: format!("{m}.{n}"),
                    offset,
                });
            }
            b'o' => return refuse("OBJ (protocol 0 instance creation)", offset),
            b'c' => {
                let m = self.line(r)?;
                let n = self.line(r)?;
                if !allowed(&m, &n) {
                    return Err(ScanError::Global {
                        name: format!("{m}.{n}"),
                        offset,
                    });
                }
                top.push(None);
            }
            0x93 => match (top.below.take(), top.top.take()) {
                (Some(m), Some(n)) => {
                    if !allowed(&m, &n) {
                        return Err(ScanError::Global {
                            name: format!("{m}.{n}"),
                            offset,
                        });
                    }
                    top.forget();
                }
                _ => {
                    return refuse(
                        "STACK_GLOBAL whose module and name are not string literals pushed \
                         just before it",
                        offset,
                    )
                }
            },
            _ => unreachable!("scan dispatches only global opcodes here"),
        }
        Ok(())
    }

    /// The memo: PUT keeps the stack; GET pushes what was stored.
    fn memo(
        &mut self,
        op: u8,
        r: &mut impl Read,
        offset: u64,
        memo: &mut Memo,
        top: &mut Top2,
    ) -> Result<(), ScanError> {
        let put = match op {
            b'p' => self
                .line(r)?
                .parse::<u32>()
                .map_err(|_| ScanError::Malformed(format!("bad PUT index at byte {offset}")))?,
            b'q' => self.uint(r, 1)? as u32,
            b'r' => self.uint(r, 4)? as u32,
            0x94 => memo.len() as u32,
            _ => {
                let get = match op {
                    b'g' => self.line(r)?.parse::<u32>().map_err(|_| {
                        ScanError::Malformed(format!("bad GET index at byte {offset}"))
                    })?,
                    b'h' => self.uint(r, 1)? as u32,
                    b'j' => self.uint(r, 4)? as u32,
                    _ => unreachable!("scan dispatches only memo opcodes here"),
                };
                let v = memo.get(&get).cloned().flatten();
                self.seen(&v);
                top.push(v);
                return Ok(());
            }
        };
        memo.insert(put, top.top.clone());
        Ok(())
    }

    /// String literals (UTF-8): known values for STACK_GLOBAL.
    fn string_literal(
        &mut self,
        op: u8,
        r: &mut impl Read,
        top: &mut Top2,
    ) -> Result<(), ScanError> {
        let width = match op {
            0x8c => 1,
            b'X' => 4,
            0x8d => 8,
            _ => unreachable!("scan dispatches only string literals here"),
        };
        let n = self.uint(r, width)?;
        let s = self.utf8(r, n)?;
        self.seen(&s);
        top.push(s);
        Ok(())
    }

    /// Other values with arguments: pushed, value not tracked.
    fn other_value(&mut self, op: u8, r: &mut impl Read, top: &mut Top2) -> Result<(), ScanError> {
        match op {
            b'V' => {
                let s = Some(self.line(r)?);
                self.seen(&s);
            }
            b'I' | b'L' | b'F' | b'P' => {
                self.line(r)?;
            }
            b'J' | b'M' | b'K' | b'G' => {
                let n = match op {
                    b'J' => 4,
                    b'M' => 2,
                    b'K' => 1,
                    _ => 8,
                };
                self.take(r, n)?;
            }
            // Length-prefixed bytes: the prefix's width by opcode.
            _ => {
                let width = match op {
                    b'U' | b'C' | 0x8a => 1,
                    b'T' | b'B' | 0x8b => 4,
                    0x8e | 0x96 => 8,
                    _ => unreachable!("scan dispatches only valued opcodes here"),
                };
                let n = self.uint(r, width)?;
                self.take(r, n)?;
            }
        }
        top.forget();
        Ok(())
    }
}

/// The memo of one pickle: index to the string literal stored, if known.
type Memo = HashMap<u32, Option<String>>;

/// An opcode a state dict never needs, refused at `offset`.
fn refuse(what: &str, offset: u64) -> Result<(), ScanError> {
    Err(ScanError::Opcode {
        what: what.to_string(),
        offset,
    })
}

/// Scans one whole pickle held in memory.
pub fn scan_bytes(pickle: &[u8], max_ops: u64) -> Result<(), ScanError> {
    // The slice bounds the bytes read: running past its end is reported as
    // a truncation, not as a byte cap (of the slice's own length).
    let mut s = Scanner::new(max_ops, u64::MAX);
    let mut r = pickle;
    s.scan(&mut r, 0)?;
    if !r.is_empty() {
        return Err(ScanError::Malformed(format!(
            "{} bytes after the STOP opcode",
            r.len()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(m: &str, n: &str) -> Vec<u8> {
        format!("c{m}\n{n}\n").into_bytes()
    }

    #[test]
    fn state_dict_globals_pass_and_others_are_named() {
        let mut p = vec![0x80, 2, b'}'];
        p.extend(g("collections", "OrderedDict"));
        p.extend(b")R.");
        assert_eq!(scan_bytes(&p, 100), Ok(()));
        let mut p = vec![0x80, 2];
        p.extend(g("os", "system"));
        p.extend(b"X\x02\0\0\0idR.");
        match scan_bytes(&p, 100) {
            Err(ScanError::Global { name, offset }) => {
                assert_eq!(name, "os.system");
                assert_eq!(offset, 2);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn stack_global_operands_are_tracked_through_the_memo() {
        // module, MEMOIZE, name, MEMOIZE, STACK_GLOBAL; then again via BINGET.
        let lit = |s: &str| {
            let mut v = vec![0x8c, s.len() as u8];
            v.extend(s.as_bytes());
            v
        };
        let mut p = vec![0x80, 4];
        p.extend(lit("collections"));
        p.push(0x94);
        p.extend(lit("OrderedDict"));
        p.push(0x94);
        p.push(0x93);
        p.extend([b'h', 0, b'h', 1, 0x93, b'.']);
        assert_eq!(scan_bytes(&p, 100), Ok(()));
        // builtins.eval through the memo: the module string is memoized first.
        let mut p = vec![0x80, 4];
        p.extend(lit("builtins"));
        p.push(0x94);
        p.extend(lit("eval"));
        p.extend([0x93, b'.']);
        assert!(
            matches!(scan_bytes(&p, 100), Err(ScanError::Global { name, .. }) if name == "builtins.eval")
        );
        // Operands that are not literals (a tuple in between) are refused.
        let mut p = vec![0x80, 4];
        p.extend(lit("collections"));
        p.extend(lit("OrderedDict"));
        p.extend([0x86, 0x93, b'.']);
        assert!(matches!(scan_bytes(&p, 100), Err(ScanError::Opcode { .. })));
        // A memo slot overwritten by a non-string is unknown again.
        let mut p = vec![0x80, 4];
        p.extend(lit("collections"));
        p.extend([b'q', 0]);
        p.push(b')');
        p.extend([b'q', 0]);
        p.extend(lit("OrderedDict"));
        p.extend([b'h', 0]);
        p.extend(lit("OrderedDict"));
        p.extend([0x93, b'.']);
        assert!(matches!(scan_bytes(&p, 100), Err(ScanError::Opcode { .. })));
    }

    #[test]
    fn string_literals_are_collected_when_asked() {
        // ] ( X"0" q0 X"1" h0 e . : the key list "0", "1", "0" (memo get).
        let mut p = vec![0x80, 2, b']', b'('];
        for k in ["0", "1"] {
            p.push(b'X');
            p.extend_from_slice(&1u32.to_le_bytes());
            p.extend_from_slice(k.as_bytes());
            if k == "0" {
                p.extend_from_slice(&[b'q', 0]);
            }
        }
        p.extend_from_slice(&[b'h', 0, b'e', b'.']);
        let mut s = Scanner::new(100, 1000);
        s.collect_strings(true);
        s.scan(&mut p.as_slice(), 0).unwrap();
        assert_eq!(s.take_strings(), ["0", "1", "0"]);
    }

    #[test]
    fn inst_ext_and_caps_are_refused() {
        let p = b"(ios\nsystem\n.".to_vec();
        assert!(
            matches!(scan_bytes(&p, 100), Err(ScanError::Global { name, .. }) if name == "os.system")
        );
        assert!(matches!(
            scan_bytes(&[0x80, 2, 0x82, 1, b'.'], 100),
            Err(ScanError::Opcode { .. })
        ));
        assert!(matches!(
            scan_bytes(&[b'N'; 200], 100),
            Err(ScanError::Malformed(m)) if m.contains("more than 100 opcodes")
        ));
        assert!(matches!(
            scan_bytes(&[b'X', 0xff, 0xff, 0xff, 0x7f], 100),
            Err(ScanError::Malformed(m)) if m.contains("truncated: 2147483647 bytes expected, 0 present")
        ));
        // An empty pickle is truncated, not "larger than the limit of 0 bytes".
        assert!(matches!(
            scan_bytes(&[], 100),
            Err(ScanError::Malformed(m)) if m.contains("truncated: 1 bytes expected, 0 present")
        ));
        assert!(matches!(
            scan_bytes(&[0xff], 100),
            Err(ScanError::Malformed(m)) if m.contains("unknown opcode 0xff")
        ));
    }
}
