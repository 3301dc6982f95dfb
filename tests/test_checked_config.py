"""The checked-config base (core/checked_config.py) on small configs written here: coercion to the declared
types, `require`'s one-line errors, nested configs from mappings (named from the outer config), `to_dict`,
field help, dotted names; and every config class of the library derives from it."""
from __future__ import annotations

import dataclasses
import importlib
import pkgutil
import re
from dataclasses import dataclass

import pytest

from lmgym.core.checked_config import CheckedConfig, ConfigError, UnknownFieldError, field_help, setting
from lmgym.core.dotted_names import coerce_setting, flatten, settings_of, unflatten

LIBRARY = ("core", "retrieval", "envs", "buffers", "policies", "episodes", "training", "search",
           "evaluation", "traindata", "algorithms", "serving")
CONFIG_NAME = re.compile(r".*(Config|Settings|Limits)$")


@dataclass
class Inner(CheckedConfig):
    depth: int = setting(3, "how deep")
    rate: float = setting(0.5, "a rate in (0, 1]")
    mode: str = setting("a", "a | b")

    def __post_init__(self) -> None:
        super().__post_init__()
        self.require("depth", self.depth > 0, "a positive integer")
        self.require("rate", 0 < self.rate <= 1, "in (0, 1]")


@dataclass
class Middle(CheckedConfig):
    inner: Inner = setting(Inner(depth=5), "the inner settings")
    label: str = setting("m", "a label")


@dataclass
class Outer(CheckedConfig):
    passed_down = {"inner": ("rate",)}

    flag: bool = setting(False, "a switch")
    size: int | None = setting(None, "a size, or None")
    pair: tuple[float, float] = setting((0.1, 0.2), "two numbers")
    rate: float = setting(0.9, "the rate the inner settings take")
    inner: Inner = setting(Inner(mode="b"), "the inner settings (mode b)")
    middle: Middle = setting(Middle(), "two levels down")
    names: list = setting(["x"], "a list")


@dataclass(frozen=True)
class Frozen(CheckedConfig):
    count: int = setting(1, "a count")


def one_line(call, *args, **kwargs) -> str:
    with pytest.raises(ConfigError) as info:
        call(*args, **kwargs)
    assert "\n" not in str(info.value)
    return str(info.value)


def test_every_field_is_coerced_to_its_declared_type():
    c = Outer(flag="yes", size="12", pair=["1", 2], rate=1)
    assert (c.flag, c.size, c.pair, c.rate) == (True, 12, (1.0, 2.0), 1.0) and type(c.rate) is float
    assert Outer(size=None).size is None and Outer(size=2.0).size == 2
    assert Frozen(count="4").count == 4  # frozen configs are coerced too
    assert one_line(Outer, flag="maybe") == "Outer.flag expects true or false (or yes/no, on/off, 1/0), got 'maybe'"
    assert one_line(Outer, size=2.5) == "Outer.size expects an integer, got 2.5"
    assert one_line(Outer, pair=[1]) == "Outer.pair expects a list of 2 numbers, got [1]"


def test_require_is_one_line_naming_class_field_expectation_and_value():
    with pytest.raises(ConfigError) as info:
        Inner(depth=0)
    assert str(info.value) == "Inner.depth must be a positive integer, got 0" and info.value.field == "depth"


def test_a_nested_config_takes_a_mapping_merged_into_the_fields_default():
    c = Outer(inner={"depth": "7"}, middle={"inner": {"mode": "b"}})
    assert c.inner == Inner(depth=7, mode="b")  # the field's default (mode b) kept, depth coerced
    assert c.middle.inner == Inner(depth=5, mode="b")  # two levels: merged into Middle's default (depth 5)
    assert Outer(inner=Inner(depth=2)).inner == Inner(depth=2)  # a config is taken as it is
    assert Outer().inner is not Outer().inner and Outer().names is not Outer().names  # mutable defaults copied


def test_a_nested_error_is_named_from_the_outer_config():
    with pytest.raises(ConfigError) as info:
        Outer(inner={"depth": 0})
    assert str(info.value) == "Outer.inner.depth must be a positive integer, got 0"
    assert info.value.field == "inner.depth"
    assert one_line(Outer, middle={"inner": {"rate": 2}}) == "Outer.middle.inner.rate must be in (0, 1], got 2.0"
    assert one_line(Outer, inner={"deep": 1}) == "Outer.inner: unknown Inner field(s): deep (did you mean depth?)"
    assert one_line(Outer, inner=3) == "Outer.inner expects a mapping of Inner fields, got 3"
    assert one_line(Outer, inner={"rate": 0.3}) == (
        "Outer: inner.rate is not read: inner takes this config's own rate; set rate")


def test_an_unknown_keyword_is_one_line_and_a_type_error_and_an_old_flat_name_says_the_dotted_one():
    with pytest.raises(UnknownFieldError) as info:
        Outer(colour="red")
    assert isinstance(info.value, TypeError) and str(info.value) == "unknown Outer field(s): colour"
    assert one_line(Outer, inner_depth=4) == (
        "Outer: inner_depth is now inner.depth (YAML: `inner: {depth: ...}`; flag: --inner.depth; "
        "Python: inner=Inner(depth=...))")


def test_to_dict_is_plain_values_and_rebuilds_the_config():
    c = Outer(size=3, inner={"depth": 9})
    values = c.to_dict()
    assert values["inner"] == {"depth": 9, "mode": "b"}  # rate is passed down: not recorded under inner
    assert values["middle"] == {"inner": {"depth": 5, "rate": 0.5, "mode": "a"}, "label": "m"}
    assert Outer(**values) == c
    values["names"].append("y")
    assert c.names == ["x"]  # a copy


def test_field_help_and_the_dotted_settings():
    assert field_help(Outer, "size") == "a size, or None"
    settings = settings_of(Outer)
    assert list(settings) == ["flag", "size", "pair", "rate", "inner.depth", "inner.mode", "middle.inner.depth",
                              "middle.inner.rate", "middle.inner.mode", "middle.label", "names"]
    assert settings["inner.mode"].default == "b" and settings["middle.inner.depth"].default == 5  # the outer defaults
    assert settings["inner.depth"].help == "how deep" and settings["inner.depth"].owner is Inner


def test_flatten_unflatten_and_coerce_a_dotted_setting():
    flat = flatten(Outer, {"size": 1, "inner": {"depth": 2}, "middle": {"inner": {"mode": "b"}}})
    assert flat == {"size": 1, "inner.depth": 2, "middle.inner.mode": "b"}
    assert unflatten(flat) == {"size": 1, "inner": {"depth": 2}, "middle": {"inner": {"mode": "b"}}}
    assert flatten(Outer, {"inner": Inner(depth=4)}) == {"inner.depth": 4, "inner.mode": "a"}  # rate passed down
    assert coerce_setting(Outer, "middle.inner.depth", "6") == 6
    assert one_line(coerce_setting, Outer, "inner.depth", "deep") == "Outer.inner.depth expects an integer, got 'deep'"


def library_config_classes() -> list[type]:
    """Every dataclass named *Config, *Settings or *Limits defined in a library module."""
    found = {}
    for package in LIBRARY:
        package = f"lmgym.{package}"
        root = importlib.import_module(package)
        names = [package] + [m.name for m in pkgutil.walk_packages(root.__path__, f"{package}.")]
        for name in names:
            try:
                module = importlib.import_module(name)
            except ModuleNotFoundError as err:
                if err.name and err.name.split(".")[0] == "lmgym":
                    raise
                continue  # an optional extra that is not installed
            for value in vars(module).values():
                if (isinstance(value, type) and value.__module__ == name and dataclasses.is_dataclass(value)
                        and CONFIG_NAME.match(value.__name__)):
                    found[f"{name}.{value.__name__}"] = value
    return list(found.values())


@pytest.mark.filterwarnings("ignore:.* moved to .*:FutureWarning")  # the old import paths, walked too
def test_every_config_class_of_the_library_derives_from_the_base():
    classes = library_config_classes()
    names = {cls.__name__ for cls in classes}
    assert {"TrainerConfig", "RLConfig", "GRPOConfig", "MCTSSearchConfig", "MCTSConfig", "SearchSettings",
            "ServerLimits", "StoreConfig", "ShepherdConfig", "SamplingSettings", "LoraSettings"} <= names
    assert [cls.__qualname__ for cls in classes if not issubclass(cls, CheckedConfig)] == []
