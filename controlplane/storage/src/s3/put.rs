//! The upload path of [`super::S3Store`]: one PUT for bodies up to the multipart threshold, else
//! a multipart upload with a few parts in flight at once (`upload_concurrency`), each part
//! carrying its SHA-256, aborted (best effort) when a part or the completion fails.
//!
//! ```text
//! body --read one part--> whole-object SHA-256 --spawn--> [part task: SHA-256, UploadPart] x N
//!  ^   (waits while N tasks run)                           |   --all done--> check expected digest
//!  +---- the part's buffer, once its request has ended ----+   --> CompleteMultipartUpload
//! ```
//!
//! Part buffers are reused: at most `upload_concurrency` of them exist at once, so memory stays
//! flat whatever the body's size (allocating and freeing a fresh 8 MiB buffer per part made the
//! allocator keep freed buffers around, and the peak RSS varied by 10 MB from run to run).
//!
//! An expected digest ([`PutOptions::sha256`]) is stored as user metadata and checked against
//! the bytes read before the object is completed, so a body that changed is never visible.
//!
//! Bodies are sent with `UNSIGNED-PAYLOAD`: their integrity is carried by the signed
//! `x-amz-checksum-sha256` header, which the server checks; signing the payload as well would
//! hash every byte once more on both sides.

use std::collections::VecDeque;

use aws_sdk_s3::{
    primitives::ByteStream,
    types::{ChecksumAlgorithm, CompletedMultipartUpload, CompletedPart},
};
use bytes::{Bytes, BytesMut};
use sha2::{Digest, Sha256};
use tokio::{
    io::{AsyncRead, AsyncReadExt},
    task::JoinSet,
};

use super::{strip_quotes, to_usize, S3Store};
use crate::{
    digest, error::Cause, key::validate_key, s3_error::classify, PutOptions, PutOutcome,
    SHA256_METADATA,
};

/// Reads up to `limit` bytes from `body` into a buffer of exactly that capacity; shorter only at
/// the end of the body.
async fn read_part<R: AsyncRead + Unpin>(body: &mut R, limit: usize) -> Result<BytesMut, Cause> {
    let mut buf = BytesMut::with_capacity(limit);
    top_up(body, &mut buf, limit).await?;
    Ok(buf)
}

/// Reads into `buf` until it holds `limit` bytes or the body ends (no reallocation when `buf`
/// already has the capacity: reads stop at `limit`).
async fn top_up<R: AsyncRead + Unpin>(
    body: &mut R,
    buf: &mut BytesMut,
    limit: usize,
) -> Result<(), Cause> {
    while buf.len() < limit {
        let want = (limit - buf.len()) as u64;
        let n = (&mut *body)
            .take(want)
            .read_buf(buf)
            .await
            .map_err(Cause::Source)?;
        if n == 0 {
            break;
        }
    }
    Ok(())
}

/// The body cut into parts of `part_size` (the last one shorter), starting with parts already
/// read while deciding between a single PUT and a multipart upload.
struct Parts<R> {
    ready: VecDeque<BytesMut>,
    body: R,
    part_size: usize,
    eof: bool,
    /// Empty buffers of parts already sent, for the next parts.
    spare: Vec<BytesMut>,
}

impl<R: AsyncRead + Unpin> Parts<R> {
    /// `read` is the start of the body; `eof` whether the body already ended.
    fn new(read: Vec<BytesMut>, body: R, part_size: usize, eof: bool) -> Self {
        let aligned = read.iter().all(|p| p.len() == part_size)
            || (read.len() == 2 && read[0].len() == part_size);
        let ready = if aligned {
            read.into_iter().filter(|p| !p.is_empty()).collect()
        } else {
            // A threshold different from the part size: re-cut what was read.
            let all = read.concat();
            all.chunks(part_size).map(BytesMut::from).collect()
        };
        Self {
            ready,
            body,
            part_size,
            eof,
            spare: Vec::new(),
        }
    }

    /// Takes back the buffer of a part whose request has ended, if nothing else holds it.
    fn recycle(&mut self, sent: Bytes) {
        if let Ok(mut buf) = sent.try_into_mut() {
            if buf.capacity() >= self.part_size {
                buf.clear();
                self.spare.push(buf);
            }
        }
    }

    async fn next(&mut self) -> Result<Option<BytesMut>, Cause> {
        if let Some(mut part) = self.ready.pop_front() {
            if part.len() < self.part_size && !self.eof && self.ready.is_empty() {
                part.reserve(self.part_size - part.len());
                top_up(&mut self.body, &mut part, self.part_size).await?;
                self.eof = part.len() < self.part_size;
            }
            return Ok(Some(part));
        }
        if self.eof {
            return Ok(None);
        }
        let mut part = self
            .spare
            .pop()
            .unwrap_or_else(|| BytesMut::with_capacity(self.part_size));
        top_up(&mut self.body, &mut part, self.part_size).await?;
        self.eof = part.len() < self.part_size;
        Ok((!part.is_empty()).then_some(part))
    }
}

fn to_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// One uploaded part: its number, what CompleteMultipartUpload needs, its raw SHA-256.
type PartDone = (i32, CompletedPart, [u8; 32]);

/// A part task's result: the part, and its buffer (to reuse).
type PartSent = (PartDone, Bytes);

impl S3Store {
    pub(super) async fn put_inner<R>(
        &self,
        key: &str,
        mut body: R,
        options: &PutOptions,
    ) -> Result<PutOutcome, Cause>
    where
        R: AsyncRead + Unpin + Send,
    {
        validate_key(key)?;
        self.bucket_checked.get_or_try_init(|| self.probe()).await?;
        let threshold = to_usize(self.settings.multipart_threshold);
        let part_size = to_usize(self.settings.part_size);
        let first = read_part(&mut body, threshold).await?;
        if first.len() < threshold {
            return self.put_single(key, first, options).await;
        }
        let second = read_part(&mut body, part_size).await?;
        if second.is_empty() {
            return self.put_single(key, first, options).await;
        }
        let eof = second.len() < part_size;
        let parts = Parts::new(vec![first, second], body, part_size, eof);
        self.put_multipart(key, parts, options).await
    }

    async fn put_single(
        &self,
        key: &str,
        buf: BytesMut,
        options: &PutOptions,
    ) -> Result<PutOutcome, Cause> {
        let digest: [u8; 32] = Sha256::digest(&buf).into();
        let size = buf.len();
        let sha256 = hex::encode(digest);
        options.check(size as u64, &sha256)?;
        let out = self
            .client
            .put_object()
            .bucket(self.bucket())
            .key(key)
            .content_length(to_i64(size))
            .checksum_sha256(digest::base64(&digest))
            .metadata(SHA256_METADATA, &sha256)
            .body(ByteStream::from(buf.freeze()))
            .customize()
            .disable_payload_signing()
            .send()
            .await
            .map_err(|e| classify(&self.ctx, e))?;
        Ok(PutOutcome {
            key: key.to_owned(),
            size: size as u64,
            sha256,
            parts: 0,
            composite_sha256: None,
            etag: out.e_tag().map(strip_quotes),
        })
    }

    async fn put_multipart<R>(
        &self,
        key: &str,
        parts: Parts<R>,
        options: &PutOptions,
    ) -> Result<PutOutcome, Cause>
    where
        R: AsyncRead + Unpin + Send,
    {
        let mut create = self
            .client
            .create_multipart_upload()
            .bucket(self.bucket())
            .key(key)
            .checksum_algorithm(ChecksumAlgorithm::Sha256);
        if let Some(sha256) = &options.sha256 {
            create = create.metadata(SHA256_METADATA, sha256);
        }
        let created = create.send().await.map_err(|e| classify(&self.ctx, e))?;
        let upload_id = created
            .upload_id()
            .ok_or_else(|| Cause::Server {
                endpoint: self.ctx.endpoint.clone(),
                status: 200,
                code: "(none)".into(),
                message: "CreateMultipartUpload returned no upload id".into(),
            })?
            .to_owned();
        match self.upload_parts(key, &upload_id, parts, options).await {
            Ok(outcome) => Ok(outcome),
            Err(e) => {
                // Best effort: parts of an aborted upload are never visible, and a server that is
                // down keeps them until its lifecycle rule for incomplete uploads removes them.
                let _ = self
                    .client
                    .abort_multipart_upload()
                    .bucket(self.bucket())
                    .key(key)
                    .upload_id(&upload_id)
                    .send()
                    .await;
                Err(e)
            }
        }
    }

    /// Sends one part (run as its own task, which hands the buffer back when the request ends).
    fn spawn_part(
        &self,
        tasks: &mut JoinSet<Result<PartSent, Cause>>,
        key: &str,
        upload_id: &str,
        number: i32,
        chunk: Bytes,
    ) {
        let client = self.client.clone();
        let ctx = self.ctx.clone();
        let (bucket, key, upload_id) = (
            self.bucket().to_owned(),
            key.to_owned(),
            upload_id.to_owned(),
        );
        tasks.spawn(async move {
            let digest: [u8; 32] = Sha256::digest(&chunk).into();
            let checksum = digest::base64(&digest);
            let out = client
                .upload_part()
                .bucket(bucket)
                .key(key)
                .upload_id(upload_id)
                .part_number(number)
                .content_length(to_i64(chunk.len()))
                .checksum_sha256(&checksum)
                .body(ByteStream::from(chunk.clone()))
                .customize()
                .disable_payload_signing()
                .send()
                .await
                .map_err(|e| classify(&ctx, e))?;
            let part = CompletedPart::builder()
                .part_number(number)
                .set_e_tag(out.e_tag().map(str::to_owned))
                .checksum_sha256(checksum)
                .build();
            Ok(((number, part, digest), chunk))
        });
    }

    async fn upload_parts<R>(
        &self,
        key: &str,
        upload_id: &str,
        mut source: Parts<R>,
        options: &PutOptions,
    ) -> Result<PutOutcome, Cause>
    where
        R: AsyncRead + Unpin + Send,
    {
        let in_flight = self.settings.upload_concurrency.max(1);
        let mut whole = Sha256::new();
        let mut done: Vec<PartDone> = Vec::new();
        let mut tasks = JoinSet::new();
        let mut size = 0u64;
        let mut number = 0i32;
        let joined = |r: Result<Result<PartSent, Cause>, tokio::task::JoinError>| {
            r.map_err(|e| Cause::Client(Box::new(e)))?
        };
        loop {
            while tasks.len() >= in_flight {
                if let Some(r) = tasks.join_next().await {
                    let (part, buf) = joined(r)?;
                    source.recycle(buf);
                    done.push(part);
                }
            }
            let Some(chunk) = source.next().await? else {
                break;
            };
            whole.update(&chunk);
            size += chunk.len() as u64;
            number = number.checked_add(1).ok_or_else(|| {
                Cause::InvalidArgument("more than 10000 parts: raise part_size".into())
            })?;
            self.spawn_part(&mut tasks, key, upload_id, number, chunk.freeze());
        }
        while let Some(r) = tasks.join_next().await {
            done.push(joined(r)?.0);
        }
        let sha256 = hex::encode(whole.finalize());
        options.check(size, &sha256)?;
        done.sort_by_key(|(n, _, _)| *n);
        let digests: Vec<[u8; 32]> = done.iter().map(|(_, _, d)| *d).collect();
        let parts: Vec<CompletedPart> = done.into_iter().map(|(_, p, _)| p).collect();
        let completed = self
            .client
            .complete_multipart_upload()
            .bucket(self.bucket())
            .key(key)
            .upload_id(upload_id)
            .multipart_upload(
                CompletedMultipartUpload::builder()
                    .set_parts(Some(parts))
                    .build(),
            )
            .send()
            .await
            .map_err(|e| classify(&self.ctx, e))?;
        Ok(PutOutcome {
            key: key.to_owned(),
            size,
            sha256,
            parts: u32::try_from(digests.len()).unwrap_or(u32::MAX),
            composite_sha256: Some(digest::composite(&digests)),
            etag: completed.e_tag().map(strip_quotes),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn cut(data: &[u8], threshold: usize, part: usize) -> Vec<usize> {
        let mut body = data;
        let first = read_part(&mut body, threshold).await.unwrap();
        let second = read_part(&mut body, part).await.unwrap();
        let eof = second.len() < part;
        let mut parts = Parts::new(vec![first, second], body, part, eof);
        let mut sizes = Vec::new();
        while let Some(p) = parts.next().await.unwrap() {
            sizes.push(p.len());
        }
        sizes
    }

    #[tokio::test]
    async fn bodies_are_cut_into_full_parts_and_a_short_last_one() {
        let data = vec![1u8; 100];
        assert_eq!(cut(&data, 10, 10).await, vec![10; 10]);
        assert_eq!(
            cut(&data[..95], 10, 10).await,
            [vec![10; 9], vec![5]].concat()
        );
        // A threshold different from the part size is re-cut to the part size.
        assert_eq!(cut(&data, 16, 10).await, vec![10; 10]);
        assert_eq!(cut(&data[..25], 7, 10).await, vec![10, 10, 5]);
        assert_eq!(cut(&data[..12], 10, 10).await, vec![10, 2]);
    }

    #[tokio::test]
    async fn a_sent_part_s_buffer_is_reused_for_the_next_part_unless_still_shared() {
        let data: Vec<u8> = (0..50u8).collect();
        let mut parts = Parts::new(Vec::new(), &data[..], 10, false);
        let first = parts.next().await.unwrap().unwrap().freeze();
        let at = first.as_ptr();
        parts.recycle(first);
        let second = parts.next().await.unwrap().unwrap();
        assert_eq!(
            second.as_ptr(),
            at,
            "the first part's buffer holds the second"
        );
        assert_eq!(&second[..], &data[10..20]);
        // A buffer something else still reads (a request being retried) is not reused.
        let second = second.freeze();
        let held = second.clone();
        parts.recycle(second);
        let third = parts.next().await.unwrap().unwrap();
        assert_ne!(third.as_ptr(), held.as_ptr());
        assert_eq!(&third[..], &data[20..30]);
        assert_eq!(&held[..], &data[10..20]);
    }
}
