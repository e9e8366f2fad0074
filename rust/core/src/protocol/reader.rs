//! A cursor over big-endian, length-prefixed bytes, shared by the ROCKETMQ header codec and the
//! compressed register body.

/// What a [`Reader`] found wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    #[error("truncated: {field} needs {needed} bytes at offset {offset} of {len}")]
    Truncated {
        field: &'static str,
        needed: usize,
        offset: usize,
        len: usize,
    },
    #[error("{field} length {length} is negative")]
    NegativeLength { field: &'static str, length: i32 },
}

/// A cursor over big-endian, length-prefixed bytes (a ROCKETMQ header, a compressed register
/// body) that names what it was reading when the bytes ran out.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pub(crate) pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    /// An `i32` length that must not be negative.
    pub(crate) fn count(&mut self, field: &'static str) -> Result<usize, ReadError> {
        let n = self.i32(field)?;
        Self::len(n, field)
    }

    /// `i32 len | len bytes`.
    pub(crate) fn chunk(&mut self, field: &'static str) -> Result<&'a [u8], ReadError> {
        let n = self.count(field)?;
        self.take(n, field)
    }

    pub(crate) fn take(&mut self, n: usize, field: &'static str) -> Result<&'a [u8], ReadError> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len());
        let Some(end) = end else {
            return Err(ReadError::Truncated {
                field,
                needed: n,
                offset: self.pos,
                len: self.buf.len(),
            });
        };
        let out = &self.buf[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    pub(crate) fn array<const N: usize>(
        &mut self,
        field: &'static str,
    ) -> Result<[u8; N], ReadError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N, field)?);
        Ok(out)
    }

    pub(crate) fn i16(&mut self, field: &'static str) -> Result<i16, ReadError> {
        Ok(i16::from_be_bytes(self.array(field)?))
    }

    pub(crate) fn i32(&mut self, field: &'static str) -> Result<i32, ReadError> {
        Ok(i32::from_be_bytes(self.array(field)?))
    }

    pub(crate) fn len(len: i32, field: &'static str) -> Result<usize, ReadError> {
        usize::try_from(len).map_err(|_| ReadError::NegativeLength { field, length: len })
    }

    /// A string of a known byte length. Invalid UTF-8 is replaced, as Java's decoder does.
    pub(crate) fn text(&mut self, len: usize, field: &'static str) -> Result<String, ReadError> {
        Ok(String::from_utf8_lossy(self.take(len, field)?).into_owned())
    }
}
