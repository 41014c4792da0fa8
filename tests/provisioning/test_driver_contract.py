"""One contract, every node driver: what the pipeline may rely on, whoever does the I/O.

Each driver comes as a "case" that knows how to build it for a healthy node, a node that
cannot be reached right now (transient) and a node that refuses our credentials (permanent).
The ssh case runs against a real OpenSSH sshd on loopback (tests/provisioning/sshd.py).
"""

import threading

import pytest
from django.conf import settings

from provisioning.drivers import driver_class, driver_names
from provisioning.drivers.base import (
    DriverError,
    ExecutionStopped,
    Fence,
    HealthReport,
    NodeDriver,
    NodeTarget,
    RunResult,
)
from tests.conftest import missing_service
from tests.provisioning.maas_recorded import RecordedMaas
from tests.provisioning.sshd import SshdUnavailable, free_port, generate_ed25519, start_sshd


class SimulatedCase:
    name = "simulated"

    def __init__(self, request, tmp_path):
        self.state_dir = tmp_path / "simulated"

    def driver(self, hostname: str = "sim-node", fence=None, **options) -> NodeDriver:
        base = {"delay_scale": 0, "state_dir": str(self.state_dir), **options}
        return driver_class("simulated")(NodeTarget(hostname=hostname, address="10.0.0.1",
                                                    gpu_count=8, gpu_name="H100", options=base,
                                                    fence=fence))

    def failing(self, name: str, exit_status: int) -> NodeDriver:
        return self.driver(exit_status={name: exit_status})

    def unreachable(self) -> NodeDriver:
        return self.driver(fail={"run": {"transient": 1}, "health": {"transient": 1}})

    def refusing(self) -> NodeDriver:
        return self.driver(fail={"run": {"permanent": "authentication refused"},
                                 "health": {"permanent": "authentication refused"}})


class SshCase:
    name = "ssh"

    def __init__(self, request, tmp_path):
        self.build = request.getfixturevalue("ssh_driver_for")

    def driver(self, **options) -> NodeDriver:
        return self.build(**options)

    def failing(self, name: str, exit_status: int) -> NodeDriver:
        return self.build()  # the script itself exits non-zero

    def unreachable(self) -> NodeDriver:
        return self.build(address=f"127.0.0.1:{free_port()}")  # nothing listens: refused

    def refusing(self) -> NodeDriver:
        return self.build(private_key=generate_ed25519()[0])  # a key the node does not know


class IronicCase:
    """Ironic images the node (a real standalone Ironic, tests/engines/ironic.py); scripts run
    over SSH on the installed system, here the sshd test host."""

    name = "ironic"
    engine_erases = True

    def __init__(self, request, tmp_path):
        build = request.getfixturevalue("ironic_driver_for")
        self.node = request.getfixturevalue("ironic_contract_node")
        # The installed system: an sshd of its own, so the fence tokens of these tests are not
        # the Ironic driver tests' (their installed_host keeps the newest token it has seen).
        sshd = request.getfixturevalue("ironic_contract_sshd_host")
        own_host = {"host_key": sshd.host_public_key, "private_key": sshd.client_key_pem,
                    "user": sshd.user}

        def on_own_host(node, *, address=None, **options):
            return build(node, address=address or f"{sshd.host}:{sshd.port}", **{**own_host, **options})
        self.build = on_own_host

    def driver(self, **options) -> NodeDriver:
        return self.build(self.node, **{"test_host": False, **options})

    def failing(self, name: str, exit_status: int) -> NodeDriver:
        return self.build(self.node)

    def unreachable(self) -> NodeDriver:
        return self.build(self.node, address=f"127.0.0.1:{free_port()}")

    def refusing(self) -> NodeDriver:
        return self.build(self.node, private_key=generate_ed25519()[0])


class MaasCase:
    """MAAS images and erases the machine (recorded exchanges, tests/provisioning/maas_recorded.py);
    scripts and health go over SSH to the real sshd standing in for the deployed OS."""

    name = "maas"
    engine_erases = True

    def __init__(self, request, tmp_path):
        self.sshd = request.getfixturevalue("maas_sshd_host")
        self.maas = RecordedMaas(status="Deployed")
        self.url = self.maas.serve(request.getfixturevalue("httpserver"))

    def driver(self, address: str | None = None, fence=None, **options) -> NodeDriver:
        base = {"host_key": self.sshd.host_public_key, "private_key": self.sshd.client_key_pem,
                "connect_timeout_s": 5, "auth_timeout_s": 5, "url": self.url,
                "api_key": "ck:tk:ts", "system_id": self.maas.system_id, "wipe_method": "zero",
                "poll_interval_s": 0.05, "release_timeout_s": 30, **options}
        return driver_class("maas")(NodeTarget(
            hostname="maas-node", address=address or f"{self.sshd.host}:{self.sshd.port}",
            gpu_count=0, options=base, fence=fence))

    def failing(self, name: str, exit_status: int) -> NodeDriver:
        return self.driver()

    def unreachable(self) -> NodeDriver:
        return self.driver(address=f"127.0.0.1:{free_port()}")

    def refusing(self) -> NodeDriver:
        return self.driver(private_key=generate_ed25519()[0])


CASES = {"simulated": SimulatedCase, "ssh": SshCase, "maas": MaasCase,
         "ironic": IronicCase}


def _own_sshd_host(tmp_path_factory, name: str):
    base = tmp_path_factory.mktemp(name)
    (base / "node-root").mkdir()
    try:
        host = start_sshd(base, env={"TRAINYARD_ROOT": str(base / "node-root")})
    except SshdUnavailable as exc:
        missing_service(f"this test needs a real sshd test host: {exc}")
    try:
        yield host
    finally:
        host.stop()


@pytest.fixture(scope="module")
def maas_sshd_host(tmp_path_factory):
    """The deployed OS of the maas case: an sshd of its own, so its fence (the node's record of
    the newest token) is not the ssh case's."""
    yield from _own_sshd_host(tmp_path_factory, "maas-sshd")


@pytest.fixture(scope="module")
def ironic_contract_sshd_host(tmp_path_factory):
    """The installed system of the ironic case, likewise a host of its own."""
    yield from _own_sshd_host(tmp_path_factory, "ironic-sshd")


@pytest.fixture(params=sorted(CASES))
def case(request, tmp_path):
    return CASES[request.param](request, tmp_path)


def test_every_configured_driver_has_a_contract_case():
    assert set(driver_names()) == set(CASES), "add a case for the new driver to this contract"
    assert set(settings.NODE_DRIVERS) == set(CASES)


def test_it_implements_the_protocol(case):
    driver = case.driver()
    assert isinstance(driver, NodeDriver)
    assert driver.name == case.name


def test_run_streams_its_lines_in_order(case):
    lines: list[str] = []
    script = "echo step one\necho step two\necho \"hello $WHO\"\n"
    result = case.driver().run(script, name="contract", on_line=lines.append,
                               env={"WHO": "trainyard"})
    assert isinstance(result, RunResult)
    assert result.ok and result.exit_status == 0
    assert [line for line in lines if not line.endswith("%")] == [
        "step one", "step two", "hello trainyard"]
    assert result.output_tail[-1] == "hello trainyard"


def test_a_failing_script_returns_its_exit_status(case):
    lines: list[str] = []
    result = case.failing("acceptance", 3).run("echo checking\nexit 3\n", name="acceptance",
                                               on_line=lines.append)
    assert not result.ok
    assert result.exit_status == 3
    assert "checking" in lines


def test_an_unreachable_node_raises_a_transient_error(case):
    driver = case.unreachable()
    with pytest.raises(DriverError) as info:
        driver.run("echo hi\n", name="configure", on_line=lambda line: None)
    assert info.value.permanent is False
    assert str(info.value)


def test_refused_credentials_raise_a_permanent_error(case):
    with pytest.raises(DriverError) as info:
        case.refusing().run("echo hi\n", name="configure", on_line=lambda line: None)
    assert info.value.permanent is True


def test_release_says_whether_an_engine_erased_the_node(case):
    """Without an engine the pipeline's sanitise script cleans (False); an imaging engine erases
    the node itself when asked (True) and never claims to have erased when not asked."""
    lines: list[str] = []
    assert case.driver().release(erase=True, on_line=lines.append) is getattr(case, "engine_erases",
                                                                              False)
    assert case.driver().release(erase=False, on_line=lines.append) is False


def test_health_returns_a_report(case):
    report = case.driver().health()
    assert isinstance(report, HealthReport)
    assert report.gpu_count == len(report.gpus)
    assert isinstance(report.raw, str)


def test_an_unknown_power_action_is_refused_permanently(case):
    with pytest.raises(DriverError) as info:
        case.driver().power("explode")
    assert info.value.permanent is True


# --- fencing: every operation carries the claim's token; the node refuses a stale one ----------
LONG_SCRIPT = "echo begin\nsleep 6\necho finished\n"
LONG = {"delay_scale": 1, "delays": {"long": 6}}  # the simulated node's time for that script


class Background(threading.Thread):
    """Runs the long script on ``driver``; keeps its lines and what it raised."""

    def __init__(self, driver):
        super().__init__(daemon=True)
        self.driver, self.lines, self.error, self.result = driver, [], None, None
        self.began = threading.Event()

    def on_line(self, line):
        self.lines.append(line)
        if line == "begin":
            self.began.set()

    def run(self):
        try:
            self.result = self.driver.run(LONG_SCRIPT, name="long", on_line=self.on_line)
        except DriverError as exc:
            self.error = exc
        finally:
            self.began.set()


def test_an_operation_with_an_older_fence_is_refused(case):
    assert case.driver(fence=Fence(5)).run("echo newer\n", name="x", on_line=print).ok
    lines: list[str] = []
    with pytest.raises(ExecutionStopped) as info:
        case.driver(fence=Fence(4)).run("echo stale\n", name="x", on_line=lines.append)
    assert info.value.permanent is False
    assert "stale" not in lines


def test_a_newer_execution_stops_the_older_one_before_it_works(case):
    older = Background(case.driver(fence=Fence(10), **LONG))
    older.start()
    older.began.wait(30)
    newer = case.driver(fence=Fence(11)).run("echo second\n", name="short", on_line=print)
    older.join(30)
    assert newer.ok
    assert isinstance(older.error, ExecutionStopped), (older.error, older.result)
    assert "finished" not in older.lines[older.lines.index("begin"):] or case.name == "simulated"


def test_a_cancelled_operation_stops_on_the_node(case):
    fence = Fence(20)
    running = Background(case.driver(fence=fence, **LONG))
    running.start()
    running.began.wait(30)
    fence.cancel.set()  # the worker lost its claim
    running.join(30)
    assert isinstance(running.error, ExecutionStopped), (running.error, running.result)
    # The node is free for the next execution at once (no earlier one left to stop).
    assert case.driver(fence=Fence(21)).run("echo next\n", name="x", on_line=print).ok


# Host identity exists only for drivers that talk to a real host.
@pytest.fixture(params=["ssh", "ironic"])
def networked_case(request, tmp_path):
    return CASES[request.param](request, tmp_path)


def test_an_unknown_host_key_is_refused(networked_case):
    with pytest.raises(DriverError) as info:
        networked_case.driver(host_key=None).run("echo hi\n", name="x", on_line=lambda line: None)
    assert info.value.permanent is True
    assert "no pinned host key" in str(info.value)


def test_a_changed_host_key_is_refused(networked_case):
    other_host_key = generate_ed25519()[1]
    with pytest.raises(DriverError) as info:
        networked_case.driver(host_key=other_host_key).run("echo hi\n", name="x",
                                                           on_line=lambda line: None)
    assert info.value.permanent is True
    assert "HOST KEY MISMATCH" in str(info.value)


def test_a_wrong_client_key_is_refused(networked_case):
    with pytest.raises(DriverError) as info:
        networked_case.refusing().run("echo hi\n", name="x", on_line=lambda line: None)
    assert info.value.permanent is True
    assert "refused our key" in str(info.value)
