"""Every public module says what it exports, exports what it says, and names it publicly."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import dsh_code
import host
import runtime
import sdkgen


def _public_modules() -> list[str]:
    names: list[str] = []
    for package in (dsh_code, host, runtime, sdkgen):
        names.append(package.__name__)
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if not any(part.startswith("_") for part in info.name.split(".")):
                names.append(info.name)
    return names


PUBLIC = [name for name in _public_modules() if name != "host"]  # "host" is a namespace only


def _private(module_name: str) -> bool:
    return any(part.startswith("_") for part in module_name.split("."))


def test_the_public_modules_are_found() -> None:
    assert {
        "dsh_code",
        "runtime",
        "runtime.testing",
        "host.sandbox",
        "host.codemode",
        "sdkgen",
    } <= set(PUBLIC)


@pytest.mark.parametrize("name", PUBLIC)
def test_all_is_a_tuple_of_distinct_names_that_resolve(name: str) -> None:
    module = importlib.import_module(name)
    exported = module.__all__
    assert isinstance(exported, tuple) and exported
    assert len(set(exported)) == len(exported)
    missing = [n for n in exported if not hasattr(module, n)]
    assert missing == []
    assert set(exported) <= set(dir(module))


@pytest.mark.parametrize("name", PUBLIC)
def test_exported_classes_and_functions_name_a_public_home(name: str) -> None:
    module = importlib.import_module(name)
    private = []
    for export in module.__all__:
        value = getattr(module, export)
        if not (inspect.isclass(value) or inspect.isfunction(value)):
            continue
        if hasattr(value, "__struct_fields__"):
            continue  # msgspec resolves a Struct's string annotations in the module it names
        home = getattr(value, "__module__", "")
        if _private(home):
            private.append(f"{export} ({home})")
    assert private == []


@pytest.mark.parametrize("name", PUBLIC)
def test_unknown_attributes_raise_attribute_error(name: str) -> None:
    module = importlib.import_module(name)
    with pytest.raises(AttributeError):
        _ = module.no_such_name_here
