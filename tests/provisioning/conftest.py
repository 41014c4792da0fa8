from tests.orders.conftest import People, drain, people, sim_dir  # noqa: F401
