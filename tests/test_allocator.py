"""The allocator setting the service applies at start-up."""

import platform

import pytest
import torch

from model_core.allocator import keep_freed_memory


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_glibc_accepts_the_settings_and_torch_still_allocates():
    assert keep_freed_memory()
    for _ in range(3):  # blocks below and around the mmap threshold, allocated and freed
        x = torch.ones(2 * 1024 * 1024)  # 8 MB
        assert float(x.sum()) == 2 * 1024 * 1024
        del x
