"""The specvideo web demo: ``python app.py [--host HOST] [--port PORT]`` (see specvideo/app/)."""

from specvideo.app import build_demo, main

__all__ = ["build_demo"]

if __name__ == "__main__":
    main()
