"""host.cluster: programs run on the nodes of a Ray cluster; tools still answered here.

Ray is imported when a ``RayRuntime`` is made, never by ``import host.cluster``
(``pip install 'dsh-code[ray]'``).
"""

from __future__ import annotations

from host.cluster._exceptions import ClusterError
from host.cluster._runtime import RayRuntime, ray_runtime_from_flag
from host.cluster._stats import ClusterRunStats

__all__ = ("ClusterError", "ClusterRunStats", "RayRuntime", "ray_runtime_from_flag")

for _name in __all__:
    _value = globals()[_name]
    if hasattr(_value, "__module__"):
        _value.__module__ = "host.cluster"
del _name, _value
