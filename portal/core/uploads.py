"""An upload handler that refuses a file larger than UPLOAD_MAX_BYTES while it streams in.

Django limits form fields (DATA_UPLOAD_MAX_MEMORY_SIZE) but not files: without this, a 2 GB
"config.json" would be written to a temporary file before any form saw it. The largest file a
page takes is a config.json (256 KB); a larger upload is a 400 before it is read to the end.
"""

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.core.files.uploadhandler import FileUploadHandler


class SizeLimitUploadHandler(FileUploadHandler):
    def handle_raw_input(self, input_data, META, content_length, boundary, encoding=None):
        limit = settings.UPLOAD_MAX_BYTES + settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        if content_length and content_length > limit:
            raise RequestDataTooBig(f"Upload of {content_length:,} bytes is larger than allowed.")

    def receive_data_chunk(self, raw_data, start):
        if start + len(raw_data) > settings.UPLOAD_MAX_BYTES:
            raise RequestDataTooBig(f"A file is larger than {settings.UPLOAD_MAX_BYTES:,} bytes.")
        return raw_data  # the next handler (memory or temporary file) keeps it

    def file_complete(self, file_size):
        return None
