//! The MessagePack values kpack files hold, read in place with the `rmp` crate's decoder.
//!
//! `rmp` reads the markers, lengths and numbers; this module keeps the position (so that
//! every error and every value has its byte offset in the caller's buffer), hands strings
//! out as slices of the input, and skips values it is not asked about without recursion.

use rmp::decode::bytes::BytesReadError;
use rmp::decode::{self, Bytes, NumValueReadError, ValueReadError};
use rmp::Marker;

use crate::bytes::u64_of;
use crate::error::{Error, ErrorKind, Result};

/// One value's head: scalars whole, strings as slices, containers as their lengths (their
/// elements follow).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Head<'a> {
    /// `nil`.
    Nil,
    /// `true` / `false`.
    Bool(bool),
    /// A non-negative integer.
    Uint(u64),
    /// A negative integer.
    Int(i64),
    /// A float (its value is never needed).
    Float,
    /// A `str` (raw bytes; the C reader does not check UTF-8).
    Str(&'a [u8]),
    /// A `bin`.
    Bin(&'a [u8]),
    /// An `ext` value.
    Ext,
    /// An array of this many values.
    Array(u32),
    /// A map of this many key/value pairs.
    Map(u32),
}

/// A cursor over MessagePack data that starts at `base` in the caller's buffer.
#[derive(Clone, Debug)]
pub(crate) struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
    base: u64,
}

fn truncated(at: u64) -> Error {
    Error::new(
        ErrorKind::Truncated,
        at,
        "MessagePack value runs past the end of the data",
    )
}

fn read_error(e: ValueReadError<BytesReadError>, at: u64) -> Error {
    match e {
        ValueReadError::InvalidMarkerRead(_) | ValueReadError::InvalidDataRead(_) => truncated(at),
        ValueReadError::TypeMismatch(_) => Error::new(
            ErrorKind::Malformed,
            at,
            "MessagePack value of an unexpected type",
        ),
    }
}

fn num_error(e: NumValueReadError<BytesReadError>, at: u64) -> Error {
    match e {
        NumValueReadError::InvalidMarkerRead(_) | NumValueReadError::InvalidDataRead(_) => {
            truncated(at)
        }
        NumValueReadError::TypeMismatch(_) => Error::new(
            ErrorKind::Malformed,
            at,
            "MessagePack value of an unexpected type",
        ),
        NumValueReadError::OutOfRange => {
            Error::new(ErrorKind::Malformed, at, "MessagePack integer out of range")
        }
    }
}

impl<'a> Reader<'a> {
    /// A reader of `data`, whose first byte is at `base` in the caller's buffer.
    pub(crate) fn new(data: &'a [u8], base: u64) -> Self {
        Reader { data, pos: 0, base }
    }

    /// The offset of the next value in the caller's buffer.
    pub(crate) fn offset(&self) -> u64 {
        self.base.saturating_add(u64_of(self.pos))
    }

    /// Bytes of `data` consumed so far.
    pub(crate) fn consumed(&self) -> usize {
        self.pos
    }

    fn rest(&self) -> &'a [u8] {
        self.data.get(self.pos..).unwrap_or(&[])
    }

    /// Runs one `rmp` read on the rest of the data and advances past what it consumed.
    fn with<T>(&mut self, f: impl FnOnce(&mut Bytes<'a>) -> T) -> T {
        let rest = self.rest();
        let mut bytes = Bytes::new(rest);
        let out = f(&mut bytes);
        let used = rest.len().saturating_sub(bytes.remaining_slice().len());
        self.pos = self.pos.saturating_add(used);
        out
    }

    /// `n` bytes of payload in place.
    fn take(&mut self, n: u32, at: u64) -> Result<&'a [u8]> {
        let n = usize::try_from(n).map_err(|_| truncated(at))?;
        let rest = self.rest();
        let bytes = rest.get(..n).ok_or(truncated(at))?;
        self.pos = self.pos.saturating_add(n);
        Ok(bytes)
    }

    /// Reads the head of the next value: (its offset, the head).
    pub(crate) fn head(&mut self) -> Result<(u64, Head<'a>)> {
        let at = self.offset();
        let first = *self.rest().first().ok_or(truncated(at))?;
        let head = match Marker::from_u8(first) {
            Marker::Reserved => {
                return Err(Error::new(
                    ErrorKind::Malformed,
                    at,
                    "reserved MessagePack marker 0xc1",
                ))
            }
            Marker::Null => {
                self.with(decode::read_nil).map_err(|e| read_error(e, at))?;
                Head::Nil
            }
            Marker::True | Marker::False => Head::Bool(
                self.with(decode::read_bool)
                    .map_err(|e| read_error(e, at))?,
            ),
            Marker::FixNeg(_) | Marker::I8 | Marker::I16 | Marker::I32 | Marker::I64 => {
                let v: i64 = self.with(decode::read_int).map_err(|e| num_error(e, at))?;
                match u64::try_from(v) {
                    Ok(u) => Head::Uint(u),
                    Err(_) => Head::Int(v),
                }
            }
            Marker::FixPos(_) | Marker::U8 | Marker::U16 | Marker::U32 | Marker::U64 => {
                Head::Uint(self.with(decode::read_int).map_err(|e| num_error(e, at))?)
            }
            Marker::F32 => {
                self.with(decode::read_f32).map_err(|e| read_error(e, at))?;
                Head::Float
            }
            Marker::F64 => {
                self.with(decode::read_f64).map_err(|e| read_error(e, at))?;
                Head::Float
            }
            Marker::FixStr(_) | Marker::Str8 | Marker::Str16 | Marker::Str32 => {
                let n = self
                    .with(decode::read_str_len)
                    .map_err(|e| read_error(e, at))?;
                Head::Str(self.take(n, at)?)
            }
            Marker::Bin8 | Marker::Bin16 | Marker::Bin32 => {
                let n = self
                    .with(decode::read_bin_len)
                    .map_err(|e| read_error(e, at))?;
                Head::Bin(self.take(n, at)?)
            }
            Marker::FixExt1
            | Marker::FixExt2
            | Marker::FixExt4
            | Marker::FixExt8
            | Marker::FixExt16
            | Marker::Ext8
            | Marker::Ext16
            | Marker::Ext32 => {
                let meta = self
                    .with(decode::read_ext_meta)
                    .map_err(|e| read_error(e, at))?;
                self.take(meta.size, at)?;
                Head::Ext
            }
            Marker::FixArray(_) | Marker::Array16 | Marker::Array32 => Head::Array(
                self.with(decode::read_array_len)
                    .map_err(|e| read_error(e, at))?,
            ),
            Marker::FixMap(_) | Marker::Map16 | Marker::Map32 => Head::Map(
                self.with(decode::read_map_len)
                    .map_err(|e| read_error(e, at))?,
            ),
        };
        Ok((at, head))
    }

    /// Skips one whole value (containers with everything in them), without recursion: a
    /// count of values still to skip. Each value takes at least one byte, so a container
    /// that claims more elements than the data holds ends in [`ErrorKind::Truncated`].
    pub(crate) fn skip(&mut self) -> Result<()> {
        let mut pending: u64 = 1;
        while pending > 0 {
            pending = pending.saturating_sub(1);
            let (_, head) = self.head()?;
            match head {
                Head::Array(n) => pending = pending.saturating_add(u64::from(n)),
                Head::Map(n) => pending = pending.saturating_add(u64::from(n).saturating_mul(2)),
                _ => {}
            }
        }
        Ok(())
    }

    /// Skips the rest of a value whose head was just read.
    pub(crate) fn skip_rest(&mut self, head: Head<'a>) -> Result<()> {
        let n = match head {
            Head::Array(n) => u64::from(n),
            Head::Map(n) => u64::from(n).saturating_mul(2),
            _ => 0,
        };
        for _ in 0..n {
            self.skip()?;
        }
        Ok(())
    }

    /// Reads a non-negative integer; `what` describes the field.
    pub(crate) fn uint(&mut self, what: &'static str) -> Result<(u64, u64)> {
        let (at, head) = self.head()?;
        match head {
            Head::Uint(v) => Ok((at, v)),
            other => {
                self.skip_rest(other)?;
                Err(Error::new(ErrorKind::Malformed, at, what))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_and_offsets() {
        // {"a": [1, -2, "xy"], "b": nil}
        let data = [
            0x82, 0xa1, b'a', 0x93, 0x01, 0xfe, 0xa2, b'x', b'y', 0xa1, b'b', 0xc0,
        ];
        let mut r = Reader::new(&data, 100);
        assert_eq!(r.head().unwrap(), (100, Head::Map(2)));
        assert_eq!(r.head().unwrap(), (101, Head::Str(b"a")));
        assert_eq!(r.head().unwrap(), (103, Head::Array(3)));
        assert_eq!(r.head().unwrap(), (104, Head::Uint(1)));
        assert_eq!(r.head().unwrap(), (105, Head::Int(-2)));
        assert_eq!(r.head().unwrap(), (106, Head::Str(b"xy")));
        let mut s = Reader::new(&data, 0);
        s.skip().unwrap();
        assert_eq!(s.consumed(), data.len());
    }

    #[test]
    fn claims_beyond_the_data_are_truncated() {
        // array32 claiming 2^32 - 1 elements, then one element.
        let data = [0xdd, 0xff, 0xff, 0xff, 0xff, 0x01];
        let e = Reader::new(&data, 7).skip().unwrap_err();
        assert_eq!((e.kind(), e.offset()), (ErrorKind::Truncated, 13));
        let e = Reader::new(&[0xd9, 0x05, b'a'], 0).head().unwrap_err();
        assert_eq!((e.kind(), e.offset()), (ErrorKind::Truncated, 0));
        let e = Reader::new(&[0xc1], 3).head().unwrap_err();
        assert_eq!((e.kind(), e.offset()), (ErrorKind::Malformed, 3));
    }
}
