#!/bin/sh
# (Re)writes the node's credentials file and env file for the order's bucket, atomically
# (provisioning/storage/node.py). Secrets come in the environment, never in this text:
# AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, TRAINYARD_S3_ENDPOINT, TRAINYARD_S3_BUCKET,
# TRAINYARD_S3_REGION; TRAINYARD_ROOT (tests: a scratch root).
# Header: TRAINYARD_CREDENTIALS_FILE, TRAINYARD_ENV_FILE, TRAINYARD_PROFILE.
set -eu

root="${TRAINYARD_ROOT:-}"
mkdir -p "$root/etc/trainyard"
umask 077
tmp="$root$TRAINYARD_CREDENTIALS_FILE.new"
printf '[%s]\naws_access_key_id = %s\naws_secret_access_key = %s\n' \
  "$TRAINYARD_PROFILE" "$AWS_ACCESS_KEY_ID" "$AWS_SECRET_ACCESS_KEY" > "$tmp"
mv "$tmp" "$root$TRAINYARD_CREDENTIALS_FILE"
umask 022
cat > "$root$TRAINYARD_ENV_FILE" <<ENV
export AWS_SHARED_CREDENTIALS_FILE=$root$TRAINYARD_CREDENTIALS_FILE
export AWS_PROFILE=$TRAINYARD_PROFILE
export AWS_ENDPOINT_URL=$TRAINYARD_S3_ENDPOINT
export AWS_REGION=$TRAINYARD_S3_REGION
export TRAINYARD_BUCKET=$TRAINYARD_S3_BUCKET
ENV
echo "bucket $TRAINYARD_S3_BUCKET: key $AWS_ACCESS_KEY_ID written to $TRAINYARD_CREDENTIALS_FILE"
echo "settings written to $TRAINYARD_ENV_FILE"
