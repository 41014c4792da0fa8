"""The access policies a customer key gets: read and write objects of one bucket, nothing else
(no bucket settings, no other bucket, no deleting the bucket); or, for a terminated order's
retained bucket, list and read its objects only."""

from __future__ import annotations

BUCKET_ACTIONS = ("s3:ListBucket", "s3:ListBucketVersions", "s3:GetBucketLocation",
                  "s3:ListBucketMultipartUploads")
OBJECT_ACTIONS = ("s3:GetObject", "s3:GetObjectVersion", "s3:PutObject", "s3:DeleteObject",
                  "s3:DeleteObjectVersion", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts")


READ_ONLY_BUCKET_ACTIONS = ("s3:ListBucket", "s3:ListBucketVersions", "s3:GetBucketLocation")
READ_ONLY_OBJECT_ACTIONS = ("s3:GetObject", "s3:GetObjectVersion")


def bucket_policy(bucket: str, *, read_only: bool = False, partition: str = "aws") -> dict:
    bucket_actions = READ_ONLY_BUCKET_ACTIONS if read_only else BUCKET_ACTIONS
    object_actions = READ_ONLY_OBJECT_ACTIONS if read_only else OBJECT_ACTIONS
    return {
        "Version": "2012-10-17",
        "Statement": [
            {"Sid": "BucketLevel", "Effect": "Allow", "Action": list(bucket_actions),
             "Resource": [f"arn:{partition}:s3:::{bucket}"]},
            {"Sid": "ObjectLevel", "Effect": "Allow", "Action": list(object_actions),
             "Resource": [f"arn:{partition}:s3:::{bucket}/*"]},
        ],
    }
