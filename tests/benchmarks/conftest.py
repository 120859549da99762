"""Shared by the benchmark tests."""

import pytest
import torch


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Tiny models on a busy machine: several threads only fight over the cores (up to 10x slower)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
