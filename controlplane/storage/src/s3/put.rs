//! The upload path of [`super::S3Store`]: one PUT for bodies up to the multipart threshold, else
//! a multipart upload that holds one part in memory at a time, sends each part's SHA-256, and
//! aborts (best effort) when a part or the completion fails.

use aws_sdk_s3::{
    primitives::ByteStream,
    types::{ChecksumAlgorithm, CompletedMultipartUpload, CompletedPart},
};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncRead, AsyncReadExt};

use super::{strip_quotes, to_usize, S3Store};
use crate::{digest, error::Cause, key::validate_key, s3_error::classify, PutOutcome};

/// Reads from `body` until `buf` holds `limit` bytes or the body ends; true at the end.
async fn fill<R: AsyncRead + Unpin>(
    body: &mut R,
    buf: &mut Vec<u8>,
    limit: usize,
) -> Result<bool, Cause> {
    let want = limit.saturating_sub(buf.len());
    let got = body
        .take(want as u64)
        .read_to_end(buf)
        .await
        .map_err(Cause::Source)?;
    Ok(got < want)
}

fn to_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl S3Store {
    pub(super) async fn put_inner<R>(&self, key: &str, mut body: R) -> Result<PutOutcome, Cause>
    where
        R: AsyncRead + Unpin + Send,
    {
        validate_key(key)?;
        self.bucket_checked.get_or_try_init(|| self.probe()).await?;
        let threshold = to_usize(self.settings.multipart_threshold);
        let mut buf = Vec::new();
        fill(&mut body, &mut buf, threshold.saturating_add(1)).await?;
        if buf.len() <= threshold {
            return self.put_single(key, buf).await;
        }
        self.put_multipart(key, body, buf).await
    }

    async fn put_single(&self, key: &str, buf: Vec<u8>) -> Result<PutOutcome, Cause> {
        let digest: [u8; 32] = Sha256::digest(&buf).into();
        let size = buf.len();
        let out = self
            .client
            .put_object()
            .bucket(self.bucket())
            .key(key)
            .content_length(to_i64(size))
            .checksum_sha256(digest::base64(&digest))
            .body(ByteStream::from(buf))
            .send()
            .await
            .map_err(|e| classify(&self.ctx, e))?;
        Ok(PutOutcome {
            key: key.to_owned(),
            size: size as u64,
            sha256: hex::encode(digest),
            parts: 0,
            composite_sha256: None,
            etag: out.e_tag().map(strip_quotes),
        })
    }

    async fn put_multipart<R>(&self, key: &str, body: R, buf: Vec<u8>) -> Result<PutOutcome, Cause>
    where
        R: AsyncRead + Unpin + Send,
    {
        let created = self
            .client
            .create_multipart_upload()
            .bucket(self.bucket())
            .key(key)
            .checksum_algorithm(ChecksumAlgorithm::Sha256)
            .send()
            .await
            .map_err(|e| classify(&self.ctx, e))?;
        let upload_id = created
            .upload_id()
            .ok_or_else(|| Cause::Server {
                endpoint: self.ctx.endpoint.clone(),
                status: 200,
                code: "(none)".into(),
                message: "CreateMultipartUpload returned no upload id".into(),
            })?
            .to_owned();
        match self.upload_parts(key, &upload_id, body, buf).await {
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

    async fn upload_parts<R>(
        &self,
        key: &str,
        upload_id: &str,
        mut body: R,
        mut buf: Vec<u8>,
    ) -> Result<PutOutcome, Cause>
    where
        R: AsyncRead + Unpin + Send,
    {
        let part_size = to_usize(self.settings.part_size);
        let mut whole = Sha256::new();
        let mut digests: Vec<[u8; 32]> = Vec::new();
        let mut parts = Vec::new();
        let mut size = 0u64;
        let mut eof = false;
        loop {
            if !eof && buf.len() < part_size {
                eof = fill(&mut body, &mut buf, part_size).await?;
            }
            if buf.is_empty() {
                break;
            }
            let rest = buf.split_off(part_size.min(buf.len()));
            let chunk = std::mem::replace(&mut buf, rest);
            let digest: [u8; 32] = Sha256::digest(&chunk).into();
            whole.update(&chunk);
            size += chunk.len() as u64;
            let number = i32::try_from(parts.len() + 1).unwrap_or(i32::MAX);
            let checksum = digest::base64(&digest);
            let out = self
                .client
                .upload_part()
                .bucket(self.bucket())
                .key(key)
                .upload_id(upload_id)
                .part_number(number)
                .content_length(to_i64(chunk.len()))
                .checksum_sha256(&checksum)
                .body(ByteStream::from(chunk))
                .send()
                .await
                .map_err(|e| classify(&self.ctx, e))?;
            parts.push(
                CompletedPart::builder()
                    .part_number(number)
                    .set_e_tag(out.e_tag().map(str::to_owned))
                    .checksum_sha256(checksum)
                    .build(),
            );
            digests.push(digest);
            if eof && buf.is_empty() {
                break;
            }
        }
        let done = self
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
            sha256: hex::encode(whole.finalize()),
            parts: u32::try_from(digests.len()).unwrap_or(u32::MAX),
            composite_sha256: Some(digest::composite(&digests)),
            etag: done.e_tag().map(strip_quotes),
        })
    }
}
