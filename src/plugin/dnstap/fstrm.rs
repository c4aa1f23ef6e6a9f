//! Frame Streams (fstrm), the framing dnstap runs over, as a bidirectional writer speaks it:
//! READY (with the content type) -> the reader's ACCEPT -> START, then data frames (a 32-bit
//! big-endian length and the payload), then STOP -> the reader's FINISH. A control frame is an
//! escape (length 0), its own length, its type and its fields (CONTENT_TYPE: type 1, length,
//! bytes). Every read and write here is bounded in size and by its caller's timeout.

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Connect, handshake and write timeout (CoreDNS's `tcpTimeout`).
pub const IO_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(4);

/// dnstap's content type.
pub const CONTENT_TYPE: &[u8] = b"protobuf:dnstap.Dnstap";

/// Control frame types.
pub const ACCEPT: u32 = 0x01;
/// START.
pub const START: u32 = 0x02;
/// STOP.
pub const STOP: u32 = 0x03;
/// READY.
pub const READY: u32 = 0x04;
/// FINISH.
pub const FINISH: u32 = 0x05;
/// The CONTENT_TYPE control field.
const FIELD_CONTENT_TYPE: u32 = 0x01;
/// The largest control frame read (fstrm's own limit is 512 bytes).
const MAX_CONTROL: u32 = 512;

/// A control frame of `kind`, with the dnstap content type when `with_type`.
pub fn control(kind: u32, with_type: bool) -> Vec<u8> {
    let mut body = kind.to_be_bytes().to_vec();
    if with_type {
        body.extend_from_slice(&FIELD_CONTENT_TYPE.to_be_bytes());
        body.extend_from_slice(&(CONTENT_TYPE.len() as u32).to_be_bytes());
        body.extend_from_slice(CONTENT_TYPE);
    }
    let mut out = 0u32.to_be_bytes().to_vec();
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(&body);
    out
}

/// A data frame around `payload`, appended to `out`.
pub fn data(out: &mut Vec<u8>, payload: &[u8]) {
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    out.extend_from_slice(payload);
}

/// Reads one control frame: its type and whether it names the dnstap content type.
pub async fn read_control<R: AsyncRead + Unpin>(r: &mut R) -> std::io::Result<(u32, bool)> {
    let bad = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_owned());
    let escape = r.read_u32().await?;
    if escape != 0 {
        return Err(bad("expected a control frame, got a data frame"));
    }
    let len = r.read_u32().await?;
    if !(4..=MAX_CONTROL).contains(&len) {
        return Err(bad("control frame of a bad length"));
    }
    let mut body = vec![0u8; len as usize];
    r.read_exact(&mut body).await?;
    let kind = u32::from_be_bytes([body[0], body[1], body[2], body[3]]);
    let mut rest = &body[4..];
    let mut dnstap = false;
    while rest.len() >= 8 {
        let field = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]);
        let flen = u32::from_be_bytes([rest[4], rest[5], rest[6], rest[7]]) as usize;
        let Some(value) = rest.get(8..8 + flen) else {
            return Err(bad("control field longer than its frame"));
        };
        dnstap |= field == FIELD_CONTENT_TYPE && value == CONTENT_TYPE;
        rest = &rest[8 + flen..];
    }
    Ok((kind, dnstap))
}

/// The writer's side of the handshake: READY, the reader's ACCEPT (it must take dnstap), START.
pub async fn open<S: AsyncRead + AsyncWrite + Unpin>(s: &mut S) -> std::io::Result<()> {
    s.write_all(&control(READY, true)).await?;
    s.flush().await?;
    match read_control(s).await? {
        (ACCEPT, true) => {}
        (ACCEPT, false) => {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "the reader does not accept protobuf:dnstap.Dnstap",
            ));
        }
        (other, _) => {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("expected ACCEPT, got control frame type {other}"),
            ));
        }
    }
    s.write_all(&control(START, true)).await?;
    s.flush().await
}

/// The writer's end: STOP, then the reader's FINISH (read errors ignored: the stream ends
/// either way).
pub async fn close<S: AsyncRead + AsyncWrite + Unpin>(s: &mut S) {
    if s.write_all(&control(STOP, false)).await.is_ok() && s.flush().await.is_ok() {
        let _ = read_control(s).await;
    }
    let _ = s.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_handshake_and_a_frame_round_trip() {
        let (mut w, mut r) = tokio::io::duplex(4096);
        let reader = tokio::spawn(async move {
            assert_eq!(read_control(&mut r).await.unwrap(), (READY, true));
            r.write_all(&control(ACCEPT, true)).await.unwrap();
            assert_eq!(read_control(&mut r).await.unwrap(), (START, true));
            let len = r.read_u32().await.unwrap();
            let mut b = vec![0; len as usize];
            r.read_exact(&mut b).await.unwrap();
            assert_eq!(read_control(&mut r).await.unwrap(), (STOP, false));
            r.write_all(&control(FINISH, false)).await.unwrap();
            b
        });
        open(&mut w).await.unwrap();
        let mut out = Vec::new();
        data(&mut out, b"hello");
        w.write_all(&out).await.unwrap();
        close(&mut w).await;
        assert_eq!(reader.await.unwrap(), b"hello");
    }

    #[tokio::test]
    async fn a_reader_of_another_content_type_is_refused() {
        let (mut w, mut r) = tokio::io::duplex(4096);
        tokio::spawn(async move {
            let _ = read_control(&mut r).await;
            r.write_all(&control(ACCEPT, false)).await.unwrap();
        });
        assert!(open(&mut w).await.is_err());
    }
}
