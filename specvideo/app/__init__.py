"""The Gradio web demo: a Video tab and a Text tab over the shipped models (see app.py)."""

from specvideo.app.config import APP_DEFAULTS, AppConfig, from_env
from specvideo.app.ui import build_demo, launch, main, parse_args

__all__ = ["APP_DEFAULTS", "AppConfig", "build_demo", "from_env", "launch", "main", "parse_args"]
