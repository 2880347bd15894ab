"""The Gluon API sheet of the prompt lists, of each version alias in the stages, the name the installed Triton has."""
from __future__ import annotations

import pytest
import triton

from agent.gluon_sheet import api_sheet, installed_names, installed_triton, used_names, version_alternatives
from evaluator.ladder import stage_files

pytestmark = pytest.mark.compiler  # reads real compiler output: CI runs it on two Triton releases

ALIASED = '''
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import tma

tma_load = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared
barrier = getattr(gl, "no_such_name_in_any_release", None) or gl.thread_barrier
'''
TMA = "triton.experimental.gluon.language.nvidia.hopper.tma"


def test_literal_getattr_counts_as_a_use_and_aliases_group_their_names():
    assert {f"{TMA}.async_load", f"{TMA}.async_copy_global_to_shared"} <= set(used_names([ALIASED]))
    groups = version_alternatives([ALIASED])
    assert groups[f"{TMA}.async_copy_global_to_shared"] == (f"{TMA}.async_load", f"{TMA}.async_copy_global_to_shared")


def test_only_the_installed_name_of_an_alias_is_listed():
    from triton.experimental.gluon.language.nvidia.hopper import tma

    names = installed_names([ALIASED])
    new = f"{TMA}.async_load"
    assert (new in names) == hasattr(tma, "async_load")
    assert (f"{TMA}.async_copy_global_to_shared" in names) == (not hasattr(tma, "async_load"))
    assert "triton.experimental.gluon.language.no_such_name_in_any_release" not in names


def test_sm90_sheet_names_the_installed_release_and_its_tma_load():
    from triton.experimental.gluon.language.nvidia.hopper import tma

    sheet = api_sheet(p.read_text() for p in stage_files("sm90"))
    assert installed_triton() == triton.__version__ and f"installed Triton {triton.__version__}" in sheet
    current = "async_load" if hasattr(tma, "async_load") else "async_copy_global_to_shared"
    other = "async_copy_global_to_shared" if current == "async_load" else "async_load("
    assert f"gl.nvidia.hopper.tma.{current}(" in sheet and f"gl.nvidia.hopper.tma.{other}" not in sheet
