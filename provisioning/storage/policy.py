"""The one access policy a customer key gets: read and write objects of one bucket, nothing else
(no bucket settings, no other bucket, no deleting the bucket)."""

from __future__ import annotations

BUCKET_ACTIONS = ("s3:ListBucket", "s3:ListBucketVersions", "s3:GetBucketLocation",
                  "s3:ListBucketMultipartUploads")
OBJECT_ACTIONS = ("s3:GetObject", "s3:GetObjectVersion", "s3:PutObject", "s3:DeleteObject",
                  "s3:DeleteObjectVersion", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts")


def bucket_policy(bucket: str, *, partition: str = "aws") -> dict:
    return {
        "Version": "2012-10-17",
        "Statement": [
            {"Sid": "BucketLevel", "Effect": "Allow", "Action": list(BUCKET_ACTIONS),
             "Resource": [f"arn:{partition}:s3:::{bucket}"]},
            {"Sid": "ObjectLevel", "Effect": "Allow", "Action": list(OBJECT_ACTIONS),
             "Resource": [f"arn:{partition}:s3:::{bucket}/*"]},
        ],
    }
