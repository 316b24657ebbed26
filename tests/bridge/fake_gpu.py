"""The tier's fake GPU is the package's presented device (mbridge_launch/catalog_sync/presented_device.py,
which `catalog verify --present-gpu` uses too): one implementation, read its docstring."""

from mbridge_launch.catalog_sync.presented_device import GPU_TYPES, FakeDeviceProperties, properties
from mbridge_launch.catalog_sync.presented_device import presented_gpu as fake_gpu

__all__ = ["GPU_TYPES", "FakeDeviceProperties", "fake_gpu", "properties"]
