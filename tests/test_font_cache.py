"""A zygote starts with the host's matplotlib font list in its empty home
(``sandbox.font_cache`` on the host, ``zygote._seed_font_cache`` inside), so that its warm-up
does not build the list again (``fc-list``, then every font file: 0.1-0.3 s of CPU a zygote).
"""

import json
import os
import subprocess
import sys

from autograder.grading.host.sandbox import FONT_CACHE_MAX, font_cache
from autograder.grading.inside.zygote import _seed_font_cache


def test_only_matplotlibs_font_lists_are_read_and_each_is_bounded(tmp_path, monkeypatch):
    monkeypatch.setenv("MPLCONFIGDIR", str(tmp_path))
    (tmp_path / "fontlist-v3.11.0.json").write_text('{"_version": "3.11.0"}')  # no fonts
    (tmp_path / "fontlist-v9.9.json").write_bytes(b" " * (FONT_CACHE_MAX + 1))  # too large
    (tmp_path / "matplotlibrc").write_text("backend: Agg")
    (tmp_path / "fontlist-v1.json.bak").write_text("{}")
    assert font_cache() == {"fontlist-v3.11.0.json": '{"_version": "3.11.0"}'}
    monkeypatch.setenv("MPLCONFIGDIR", str(tmp_path / "missing"))
    assert font_cache() == {}


def test_a_list_naming_a_font_outside_usr_is_not_passed(tmp_path, monkeypatch):
    """The user's own fonts (in their home) would tell the sandbox about the host."""
    monkeypatch.setenv("MPLCONFIGDIR", str(tmp_path))
    entry = {"fname": "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", "name": "DejaVu Sans"}
    bundled = {"fname": "fonts/ttf/DejaVuSans.ttf", "name": "DejaVu Sans"}
    ok = {"_version": "3.11.0", "ttflist": [entry, bundled], "afmlist": []}
    (tmp_path / "fontlist-v3.11.0.json").write_text(json.dumps(ok))
    assert list(font_cache()) == ["fontlist-v3.11.0.json"]
    for fname in ("/home/alice/.local/share/fonts/Mine.ttf", "fonts/../../../etc/x.ttf", 3):
        mine = dict(ok, afmlist=[{"fname": fname, "name": "Mine"}])
        (tmp_path / "fontlist-v3.11.0.json").write_text(json.dumps(mine))
        assert font_cache() == {}, fname
    (tmp_path / "fontlist-v3.11.0.json").write_text("not json")
    assert font_cache() == {}


def test_the_zygote_writes_only_font_list_names_into_its_home(tmp_path):
    home = tmp_path / "home"
    fonts = {
        "fontlist-v3.11.0.json": "{}",
        "../../escape.json": "x",
        "fontlist-v1.json/../../x.json": "x",
        "matplotlibrc": "backend: TkAgg",
    }
    _seed_font_cache({"home": str(home), "fonts": fonts})
    written = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    assert written == ["home/.cache/matplotlib/fontlist-v3.11.0.json"]
    _seed_font_cache({"home": str(home), "fonts": "not a dict"})  # ignored


def _matplotlib_log(**env) -> str:
    """What matplotlib logs when it finds a font in a fresh process with ``env`` (and no other
    matplotlib setting, as in the sandbox)."""
    base = {k: v for k, v in os.environ.items() if k not in ("MPLCONFIGDIR", "XDG_CACHE_HOME")}
    probe = (
        "import logging; logging.basicConfig(level=logging.INFO);"
        "import matplotlib.font_manager as fm; fm.findfont('DejaVu Sans')"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        env=dict(base, **env),
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stderr


def test_matplotlib_in_a_seeded_home_uses_the_list_and_builds_none(tmp_path, monkeypatch):
    """The file lands where matplotlib looks: it logs "generated new fontManager" only when it
    builds the list."""
    host = tmp_path / "host-cache"
    built = _matplotlib_log(MPLCONFIGDIR=str(host))
    assert "generated new fontManager" in built, built  # the host's own list
    monkeypatch.setenv("MPLCONFIGDIR", str(host))
    fonts = font_cache()
    assert fonts
    home = tmp_path / "home"
    _seed_font_cache({"home": str(home), "fonts": fonts})
    seeded = _matplotlib_log(HOME=str(home))
    assert "generated new fontManager" not in seeded, seeded
