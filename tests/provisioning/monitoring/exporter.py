"""A stand-in for NVIDIA's dcgm-exporter on loopback (no GPUs here): the same metric names, help
texts, types and labels as the real one, with values a test sets.

Names and help texts: dcgm-exporter's etc/default-counters.csv; labels: the exposition template
internal/pkg/rendermetrics/render_metrics.go (gpu, UUID, pci_bus_id, device, modelName, hostname),
both of github.com/NVIDIA/dcgm-exporter at d5e5f510a1b6b393f39a43293ccd9dc985defc79.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# name: (type, help), as in default-counters.csv
COUNTERS = {
    "DCGM_FI_DEV_GPU_TEMP": ("gauge", "GPU temperature (in C)."),
    "DCGM_FI_DEV_POWER_USAGE": ("gauge", "Power draw (in W)."),
    "DCGM_FI_DEV_GPU_UTIL": ("gauge", "GPU utilization (in %)."),
    "DCGM_FI_DEV_XID_ERRORS": ("gauge", "Value of the last XID error encountered."),
    "DCGM_FI_DEV_FB_USED": ("gauge", "Framebuffer memory used (in MiB)."),
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": ("gauge", "Ratio of cycles the tensor (HMMA) pipe is active."),
}
IDLE = {"DCGM_FI_DEV_GPU_TEMP": 34, "DCGM_FI_DEV_POWER_USAGE": 71.5, "DCGM_FI_DEV_GPU_UTIL": 0,
        "DCGM_FI_DEV_XID_ERRORS": 0, "DCGM_FI_DEV_FB_USED": 0,
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": 0.0}


class DcgmExporter:
    """Serves /metrics for ``gpus`` GPUs of ``model`` on ``hostname`` at ``host``:``port``."""

    def __init__(self, *, host: str, port: int, hostname: str, gpus: int, model: str):
        self.hostname, self.model = hostname, model
        self.values = {gpu: dict(IDLE) for gpu in range(gpus)}
        self.lock = threading.Lock()
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                if self.path != "/metrics":
                    self.send_error(404)
                    return
                body = exporter.exposition().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer((host, port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def set(self, name: str, value: float, *, gpu: int | None = None) -> None:
        with self.lock:
            for index, values in self.values.items():
                if gpu is None or gpu == index:
                    values[name] = value

    def exposition(self) -> str:
        lines = []
        with self.lock:
            for name, (kind, help_text) in COUNTERS.items():
                lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
                for gpu, values in self.values.items():
                    uuid = f"GPU-{abs(hash((self.hostname, gpu))) % 10**8:08d}-0000-0000-0000-000000000000"
                    lines.append(
                        f'{name}{{gpu="{gpu}",UUID="{uuid}",pci_bus_id="00000000:{gpu + 0x18:02X}:00.0",'
                        f'device="nvidia{gpu}",modelName="{self.model}",hostname="{self.hostname}"}} '
                        f'{values[name]}')
        return "\n".join(lines) + "\n"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
