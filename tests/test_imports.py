"""The imports people expect, and loading without library warnings (accelerate is a dependency)."""

import os
import subprocess
import sys

import pytest

from specvideo.cli import build_parser


def test_video_and_top_level_exports():
    import specvideo
    from specvideo.video import (
        DiffusionVerifier,
        FlowDrafter,
        LearnedDrafter,
        SpeculativeVideoPipeline,
        VideoPipelineOutput,
    )
    from specvideo.video.pipeline import SpeculativeVideoPipeline as Same

    assert SpeculativeVideoPipeline is Same and DiffusionVerifier and VideoPipelineOutput
    assert FlowDrafter and LearnedDrafter
    assert specvideo.SpeculativeVideoPipeline is SpeculativeVideoPipeline
    from specvideo.text import SpeculativeGenerator

    assert specvideo.SpeculativeGenerator is SpeculativeGenerator and callable(specvideo.speculate)
    assert {"SpeculativeVideoPipeline", "SpeculativeGenerator"} <= set(dir(specvideo))
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        specvideo.Nope  # noqa: B018


def test_the_settings_import_nothing_heavy():
    code = (
        "import sys\n"
        "from specvideo.text.config import TEXT_DEFAULTS, DRAFTERS\n"
        "from specvideo.video.config import VIDEO_DEFAULTS\n"
        "from specvideo.text import TextConfig\n"
        "heavy = sorted(m for m in ('torch', 'transformers', 'diffusers', 'cv2') if m in sys.modules)\n"
        "assert not heavy, heavy\n"
        "assert 'ngram' in DRAFTERS and TextConfig is type(TEXT_DEFAULTS)\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr


def test_every_row_of_the_drafter_table_names_what_exists():
    from specvideo.text.drafting.catalog import DRAFTER_SPECS, _resolve

    for name, spec in DRAFTER_SPECS.items():
        assert callable(_resolve(spec.build)) and callable(_resolve(spec.verifier)), name
        assert spec.check is None or callable(_resolve(spec.check)), name
        assert spec.chain is None or DRAFTER_SPECS[spec.chain].chain is None, name


def test_loading_prints_no_accelerate_warning():
    code = (
        "from specvideo.video import SpeculativeVideoPipeline\n"
        "from specvideo.text import SpeculativeGenerator\n"
        "SpeculativeVideoPipeline.from_pretrained()\n"
        "SpeculativeGenerator.from_pretrained()\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "SPECVIDEO_MODELS"}  # the repository's models/
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 0, run.stderr
    assert "accelerate" not in run.stderr + run.stdout


@pytest.mark.parametrize(
    "argv,bad",
    [
        (["video", "--demo", "x.mp4", "--schedule", "confidence"], "confidence"),  # VIDEO_SCHEDULES
        (["video", "--demo", "x.mp4", "--drafter", "magic"], "magic"),  # DRAFTERS
        (["video", "--demo", "x.mp4", "--metric", "lpips"], "lpips"),  # METRICS
        (["text", "x", "--schedule", "fast"], "fast"),  # SCHEDULES
    ],
)
def test_cli_choices_come_from_the_config_tuples(argv, bad, capsys):
    with pytest.raises(SystemExit) as exit:
        build_parser().parse_args(argv)
    assert exit.value.code == 2 and f"invalid choice: '{bad}'" in capsys.readouterr().err


@pytest.mark.parametrize("module", ["specvideo.bench", "specvideo.training"])
def test_benchmarks_and_recipes_are_not_in_the_package(module):
    run = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, text=True, timeout=120)
    assert run.returncode != 0 and "ModuleNotFoundError" in run.stderr


def test_bench_and_train_run_from_a_checkout_and_say_so_without_one(capsys):
    """A pip-installed package lacks benchmarks/ and recipes/: the commands stay and say why."""
    from specvideo.cli import CHECKOUT_COMMANDS, UsageError, add_checkout_commands, main
    from specvideo.cli.common import Parser

    parser = Parser(prog="specvideo")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    add_checkout_commands(commands, [(name, f"absent_{module}", help) for name, module, help in CHECKOUT_COMMANDS])
    args = parser.parse_args(["bench", "text", "--repeats", "2"])
    with pytest.raises(UsageError, match="runs from a checkout of the specvideo repository: its absent_benchmarks/"):
        args.run(args)
    for argv in (["bench", "text", "--help"], ["bench", "video", "--help"], ["train", "--help"]):
        with pytest.raises(SystemExit) as exit:  # this checkout has them: the real commands
            main(argv)
        assert exit.value.code == 0 and "(from a checkout" not in capsys.readouterr().out


# specvideo/text's rooms, bottom floor first (docs/ARCHITECTURE.md §1): a room imports only rooms on
# floors below its own
TEXT_FLOORS = [
    ("runtime",),
    ("sampling", "prompts"),
    ("book",),
    ("drafting",),
    ("config",),
    ("models",),
    ("text_models", "verifier"),
    ("run",),
    ("generator",),
    ("trees", "__init__"),
]


def test_the_text_rooms_import_only_floors_below_them():
    import ast
    from pathlib import Path

    import specvideo.text

    root = Path(specvideo.text.__file__).parent
    floor = {room: i for i, rooms in enumerate(TEXT_FLOORS) for room in rooms}

    def room(parts: list[str]) -> str:  # a module's path inside specvideo/text -> its room
        return parts[0].removesuffix(".py")

    rooms = {room(p.relative_to(root).parts) for p in root.rglob("*.py")}
    assert rooms == set(floor), f"rooms without a floor or floors without a room: {rooms ^ set(floor)}"
    upward = []
    for path in root.rglob("*.py"):
        here = room(path.relative_to(root).parts)
        for node in ast.walk(ast.parse(path.read_text())):  # lazy imports inside functions too
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("specvideo.text."):
                there = node.module.split(".")[2]
                if there != here and floor[there] >= floor[here]:
                    upward.append(f"{path.relative_to(root)} imports {node.module}")
    assert not upward, upward
