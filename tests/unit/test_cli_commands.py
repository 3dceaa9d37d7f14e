"""The command line's shape: one module per subcommand, each registering itself and its ``run``; a small ``main``.

A new subcommand is one module with ``add_parser`` and one entry in ``cli.main.COMMANDS``; ``main`` never
branches on the subcommand's name. The ``watch`` options are declared once (``cli.watch.WATCH_FLAGS``),
each naming the setting or watcher option it sets.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import importlib
import inspect
import os
import pathlib

import pytest

from spark_state_observer.cli import watch
from spark_state_observer.fleet.runtime import WatchOptions
from spark_state_observer.settings import Settings

cli_main = importlib.import_module("spark_state_observer.cli.main")  # the package exports the function under this name
MAIN_SOURCE = pathlib.Path(cli_main.__file__).read_text(encoding="utf-8")
SERVING = {"watch", "demo", "ui", "mcp"}  # serve clients until stopped: they keep Python's SIGPIPE handling


def _choices(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def _registered_by(module: object) -> set[str]:
    """The subcommands a module's ``add_parser`` registers, on a parser of its own."""
    parser = argparse.ArgumentParser()
    module.add_parser(parser.add_subparsers(dest="command"))  # type: ignore[attr-defined]
    return set(_choices(parser))


def test_every_subcommand_comes_from_one_module_with_add_parser_and_run() -> None:
    seen: dict[str, str] = {}
    for module in cli_main.COMMANDS:
        assert callable(getattr(module, "add_parser", None)), f"{module.__name__} has no add_parser"
        for name in _registered_by(module):
            assert name not in seen, f"{name} registered by {seen.get(name)} and {module.__name__}"
            seen[name] = module.__name__
    choices = _choices(cli_main.build_parser())
    assert set(seen) == set(choices)
    for name, parser in choices.items():
        run = parser.get_default("run")
        assert callable(run), f"{name} sets no run"
        assert run.__module__ == seen[name], f"{name}'s run is not in its own module {seen[name]}"
        assert bool(parser.get_default("serving")) == (name in SERVING), name


def test_main_is_small_and_never_branches_on_the_subcommand() -> None:
    tree = ast.parse(MAIN_SOURCE)
    (main,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "main"]
    statements = [n for n in ast.walk(main) if isinstance(n, ast.stmt)]
    assert len(statements) <= 10
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            names = {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)} | {
                n.value for n in ast.walk(node) if isinstance(n, ast.Constant)
            }
            assert not names & ({"command", "mixin_command"} | set(_choices(cli_main.build_parser()))), ast.unparse(node)
    assert len(inspect.getsource(cli_main.main).splitlines()) <= 20


def _parse_watch(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    watch.add_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["watch", "logs", *argv])


def test_the_watch_flags_default_to_the_watchers_own_options() -> None:
    defaults = {f.name: f.default for f in dataclasses.fields(WatchOptions)}
    named = {flag.option for flag in watch.WATCH_FLAGS if flag.option}
    assert named == set(defaults), "every watcher option has its flag, and no flag names an option that is gone"
    settings, options = watch.watch_setup(_parse_watch())
    assert options == WatchOptions()
    assert settings == Settings.from_env()


def test_each_watch_flag_reaches_the_setting_or_option_it_names(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("SPARK_STATE_OBSERVER_"):
            monkeypatch.delenv(name)
    args = _parse_watch(
        *("--port", "0", "--host", "0.0.0.0", "--history", "sqlite:///h.db", "--labels", "cluster=a"),
        *("--shard", "1/4", "--poll-interval", "0.5", "--state-file", "p.json", "--grace-seconds", "0"),
        *("--lost-after-seconds", "60", "--read-finished", "--follow-symlinks", "--max-apps", "7"),
    )
    settings, options = watch.watch_setup(args)
    assert (settings.http_port, settings.http_host, settings.history_path) == (0, "0.0.0.0", "sqlite:///h.db")
    assert settings.labels == Settings.from_env(labels="cluster=a").labels
    assert options == WatchOptions(
        poll_interval=0.5,
        shard=(1, 4),
        state_path="p.json",
        grace_seconds=0.0,
        lost_after_seconds=60.0,
        read_finished_at_start=True,
        follow_symlinks=True,
        max_apps=7,
        history=True,
    )
    _, no_history = watch.watch_setup(_parse_watch("--history", ""))
    assert not no_history.history


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--poll-interval", "0"), "--poll-interval and --lost-after-seconds must be finite and > 0"),
        (("--grace-seconds", "nan"), "--grace-seconds finite and >= 0"),
        (("--max-apps", "0"), "--max-apps must be at least 1, got 0"),
        (("--labels", "=x"), "labels"),
    ],
)
def test_a_bad_watch_flag_is_one_line_naming_it(argv: tuple[str, ...], message: str) -> None:
    with pytest.raises(watch.WatchArgsError) as refused:
        watch.watch_setup(_parse_watch(*argv))
    assert message in str(refused.value) and "\n" not in str(refused.value)
